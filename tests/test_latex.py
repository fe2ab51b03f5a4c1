"""The report's LaTeX tables: every one compiles under plain pdflatex and fits its page; paper-tables.tex.

The compile tests use a real TeX (Debian's texlive-latex-base and -recommended, installed by `make test` or
by `ensure_debian_tool` when missing); they are skipped, with the reason, only where it cannot be installed.
"""

from __future__ import annotations

import math
import re
import subprocess
import warnings
from pathlib import Path

import pandas as pd
import pytest
from tools import ensure_debian_tool

from pdelra.errors import UserError
from pdelra.reporting.io import save_table, to_latex
from pdelra.reporting.latex import PACKAGES, latex_escape
from pdelra.reporting.paper_tables import LatexError, build_pdf, write_paper_tables

# Every non-ASCII character the report's tables were found to hold.
ISSUE_CHARACTERS = "τρη≤²±−—ΣαβΔ‖×…→ω½é–↔§"


def latex_packages_installed() -> bool:
    names = [f"{name}.sty" for name in PACKAGES]
    return subprocess.run(["kpsewhich", *names], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def pdflatex() -> str:
    return ensure_debian_tool("pdflatex", "texlive-latex-base", "texlive-latex-recommended",
                              recommends=False, ready=latex_packages_installed)  # fmt: skip


def claims_like(rows: int = 48) -> pd.DataFrame:
    """15 columns as claims.csv: identifiers, long free text, numbers with gaps, verdicts."""
    return pd.DataFrame(
        {
            "claim_id": [f"table11_sign_after_embedding_task{i}" for i in range(rows)],
            "claim": ["The seven positions rank as in the paper's measurements (Kendall τ, Table 6)"] * rows,
            "source": ["Table 6, abstract"] * rows,
            "kind": ["ranking"] * rows,
            "unit": ["Kendall τ"] * rows,
            "paper_effect": [1.0] * rows,
            "effect": [0.5345 - i / 100 for i in range(rows)],
            "ci_low": [-0.2] * rows,
            "ci_high": [math.nan] + [0.9] * (rows - 1),
            "n": [3] * rows,
            "verdict": ["reproduced"] * rows,
            "paper_in_ci": [False] * rows,
            "method": ["paired t per pair (all δ > 0; Bonferroni ×6 for contradicted)"] * rows,
            "n_excluded": [0] * rows,
            "detail": ["ours: After Embedding > After MLP > Layer Diffusion > Before LayerNorm > In "
                       "Attention > Head Diffusion > After Attention — ρ ≥ 0.5"] * rows,
        }
    )  # fmt: skip


def table10_like() -> pd.DataFrame:
    """13 columns as Table 10: mean ± std per task and its Δ to the paper."""
    data: dict[str, list] = {"position": ["Baseline", "After Embedding", "Before LayerNorm"]}
    for task in ("ListOps", "Text", "Retrieval", "PathFinder", "Image", "Average"):
        data[task] = ["0.3747 ± 0.0050", "0.4240 ± 0.0040", "—"]
        data[f"Δ {task}"] = [0.0007, -0.0149, math.nan]
    return pd.DataFrame(data)


def unicode_heavy() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "quantity": ["η (lr)", "‖∇‖²", "Péclet number", "½ · α + β", "Σ ω", "τ → ρ"],
            "value": [0.003, -1.5, 12.0, 0.5, math.nan, -0.25],
            "note": ["≤ 1e−3", "± 2 %", "en–dash, em—dash", "×2 …", "$x_1$ & 50% #1 {a} ~ ^", "a < b | c"],
        }
    )


def test_every_character_of_the_issue_becomes_plain_ascii_latex() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of them may fall through to the "no LaTeX form" path
        out = latex_escape(ISSUE_CHARACTERS)
    assert out.isascii()
    assert latex_escape("Péclet") == r"P\'{e}clet"
    assert latex_escape("τ ≤ ±") == r"\ensuremath{\tau} \ensuremath{\leq} \ensuremath{\pm}"


def test_specials_and_minus_signs() -> None:
    assert latex_escape("10% & a_b #1 $x$ {y}") == r"10\% \& a\_b \#1 \$x\$ \{y\}"
    assert latex_escape("-0.5 (-3) warm-up 1-2") == r"\ensuremath{-}0.5 (\ensuremath{-}3) warm-up 1-2"
    assert latex_escape("a<b") == r"a\textless{}b"  # OT1 would print "<" as an inverted exclamation mark


def test_a_character_without_latex_form_is_named_and_kept_visible() -> None:
    with pytest.warns(UserWarning, match=r"U\+2603 SNOWMAN"):
        assert latex_escape("☃") == r"\texttt{U+2603}"


def test_wide_tables_turn_the_page_and_free_text_wraps() -> None:
    tex = to_latex(claims_like(5), "Every claim", "claims")
    assert r"\begin{landscape}" in tex and r"\documentclass" not in tex
    spec = re.search(r"\\begin\{tabular\}\{(.*)\}\n", tex).group(1)
    widths = re.findall(r"p\{([\d.]+)em\}", spec)
    # claim_id, claim, method, detail wrap, each as narrow as two lines of its longest cell allow (≤ 16em)
    assert widths == ["8.5", "16", "15.5", "16"]
    assert r"table11\_\allowbreak{}sign\_\allowbreak{}after" in tex  # an identifier breaks after "_"
    assert r"\pdelrafit{" in tex and r"\label{tab:claims}" in tex
    small = to_latex(pd.DataFrame({"task": ["listops"], "acc": [0.5]}), "Small", "small")
    assert r"\begin{landscape}" not in small and "p{" not in small


def test_long_tables_continue_in_floats_of_even_size_with_one_label() -> None:
    tex = to_latex(pd.DataFrame({"i": range(100), "x": [0.5] * 100}), "Long", "long")
    floats = tex.count(r"\begin{table}")
    assert floats == 3 and tex.count(r"\label{") == 1 and tex.count("(continued)") == 2
    rows_per_float = [part.count(r"\\") - 1 for part in tex.split(r"\begin{table}")[1:]]
    assert sum(rows_per_float) == 100 and max(rows_per_float) - min(rows_per_float) <= 1


def test_the_list_of_tables_has_one_entry_per_table(pdflatex: str, tmp_path: Path) -> None:
    """A table split over pages is one entry, under its caption: no blank line for each "continued" float,
    and its number is not repeated."""
    save_table(pd.DataFrame({"i": range(100), "x": [0.5] * 100}), tmp_path, "long", "Long")
    save_table(table10_like(), tmp_path, "table10", "Table 10")
    tex = write_paper_tables(tmp_path)
    assert (tmp_path / "tables" / "long.tex").read_text().count(r"\caption") == 1
    for _ in range(2):  # the second run reads the list of tables the first wrote
        subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error", tex.name], cwd=tex.parent,
                       capture_output=True, check=True)  # fmt: skip
    # A line of the .lot: \contentsline {table}{\numberline {1}{\ignorespaces Long}}{2}{}%
    lot = tex.with_suffix(".lot").read_text()
    entries = re.findall(r"\\numberline \{(\d+)\}\{\\ignorespaces ?(.*?)\}\}", lot)
    assert entries == [("1", "Long"), ("2", "Table 10")]


def test_paper_tables_inputs_every_recorded_table_in_order(tmp_path: Path) -> None:
    save_table(table10_like(), tmp_path, "table10", "Table 10")
    save_table(unicode_heavy(), tmp_path, "symbols", "Symbols")
    tex = write_paper_tables(tmp_path).read_text()
    assert tex.startswith(r"\documentclass") and r"\usepackage{booktabs,array,graphicx,pdflscape}" in tex
    assert re.findall(r"\\input\{(.*)\}", tex) == ["table10.tex", "symbols.tex"]
    (tmp_path / "tables" / "symbols.tex").unlink()
    with pytest.raises(UserError, match=r"artifacts\.json: table 'symbols' lists missing tables/symbols"):
        write_paper_tables(tmp_path)


def test_build_pdf_without_pdflatex_returns_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert build_pdf(tmp_path / "x.tex") is None


def test_every_table_compiles_and_fits_its_page(pdflatex: str, tmp_path: Path) -> None:
    frames = {
        "claims": claims_like(),
        "table10": table10_like(),
        "symbols": unicode_heavy(),
        "long": pd.DataFrame({"i": range(120), "name": [f"run_{i}" for i in range(120)]}),
        "empty": pd.DataFrame({"task": pd.Series([], dtype=str), "mean": pd.Series([], dtype=float)}),
        # A wrapped header line and a first cell that open with a bracket (after a row end `\\`, LaTeX
        # would read "[95 % CI]" as a vertical-space argument).
        "brackets": pd.DataFrame(
            {"[lo, hi]": ["[0.1, 0.2]"], "Test loss (nats/token) [95 % CI]": ["3.9 [3.8, 4.0]"]}
        ),
    }
    for name, df in frames.items():
        save_table(df, tmp_path, name, f"{name}: τ ≤ ½, 95 % CI — Péclet")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a table running off its page is a warning: fail on it
        pdf = build_pdf(write_paper_tables(tmp_path))
    assert pdf == tmp_path / "tables" / "paper-tables.pdf" and pdf.read_bytes().startswith(b"%PDF")


def test_a_table_that_runs_off_the_page_is_named(pdflatex: str, tmp_path: Path) -> None:
    save_table(table10_like(), tmp_path, "wide", "Wide")
    cells = " & ".join(["0.123456789"] * 20)
    body = rf"\begin{{tabular}}{{{'r' * 20}}}{cells}\end{{tabular}}"  # unfitted, ~5 times the line
    (tmp_path / "tables" / "wide.tex").write_text(body + "\n")
    with pytest.warns(UserWarning, match=r"wide\.tex: a line is \d+ pt wider than the page"):
        build_pdf(write_paper_tables(tmp_path))


def test_a_failing_compile_names_the_file_and_latex_error(pdflatex: str, tmp_path: Path) -> None:
    save_table(table10_like(), tmp_path, "broken", "Broken")
    (tmp_path / "tables" / "broken.tex").write_text("\\begin{table}\n\\nosuchmacro\n\\end{table}\n")
    with pytest.raises(LatexError, match=r"paper-tables\.tex: pdflatex failed: .*broken\.tex:2: Undefined "):
        build_pdf(write_paper_tables(tmp_path))
    assert not (tmp_path / "tables" / "paper-tables.pdf").exists()
