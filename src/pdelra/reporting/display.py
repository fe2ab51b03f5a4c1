"""What the report's sections share to show things: a paragraph of Markdown (`say`), cells ("x [lo, hi]",
seeds as "n of m"), a table shown with its constant context columns stated once above it (`show_lifted`),
and claims.csv's rows of one family as a table (`family_claims`, `claims_display`).

Formatting only: every number comes from a table `pdelra aggregate` wrote; nothing here computes one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pdelra.reporting.io import MISSING, is_missing, show_table

CI = "[95 % CI]"


def say(markdown: str) -> None:
    """Show a paragraph of Markdown in the notebook."""
    # Looked up when called, so that a test capturing IPython.display.display sees every paragraph.
    from IPython.display import Markdown, display

    display(Markdown(markdown))


# ----------------------------------------------------------------------------------------------------------
# Cell text


def number(value: Any, fmt: str) -> str:
    """`value` formatted by `fmt` (a str.format pattern), "—" when missing."""
    return MISSING if is_missing(value) else fmt.format(float(value))


def with_ci(value: Any, low: Any, high: Any, fmt: str) -> str:
    """A value with its interval as "x [lo, hi]"; "x" without an interval (n < 2), "—" without a value."""
    if is_missing(value):
        return MISSING
    text = fmt.format(float(value)).replace("-", "−")
    if is_missing(low) or is_missing(high):
        return text
    lo, hi = (fmt.format(float(x)).replace("-", "−") for x in (low, high))
    return f"{text} [{lo}, {hi}]"


def ci_cell(row: pd.Series, name: str, fmt: str) -> str:
    """Column `name` of a row with its `{name}_ci_low`, `{name}_ci_high` as "x [lo, hi]"."""
    return with_ci(row[name], row[f"{name}_ci_low"], row[f"{name}_ci_high"], fmt)


def seeds_cell(n: Any, n_runs: Any) -> str:
    """Seeds behind a row: "3", or "2 of 3" when runs did not complete."""
    if is_missing(n):
        return "0"
    return f"{int(n)}" if is_missing(n_runs) or int(n) == int(n_runs) else f"{int(n)} of {int(n_runs)}"


def _effect(value: Any) -> str:
    if is_missing(value):
        return MISSING
    x = float(value)
    return (f"{x:+.4f}" if abs(x) < 1 else f"{x:+.2f}").replace("-", "−")


# ----------------------------------------------------------------------------------------------------------
# Tables for display


def display_rows(table: pd.DataFrame, row: Callable[[pd.Series], dict[str, Any]]) -> pd.DataFrame:
    """A table for display: `row` of each row of `table`, in order."""
    return pd.DataFrame([row(r) for _, r in table.iterrows()])


def lift_constants(table: pd.DataFrame, columns: Sequence[str]) -> tuple[pd.DataFrame, str]:
    """Drop the named context columns whose value is the same on every row that has one; return them as
    one line "Column: value · …" to state above the table. Other columns always stay (they are the results).
    Blank cells do not count (the reference row of a comparison has no Δ method)."""
    constant, said = [], []
    for column in columns:
        if column not in table.columns:
            continue
        present = table[column][~table[column].isin(["", MISSING])]
        if present.nunique() <= 1:
            constant.append(column)
            said += [f"{column}: {present.iloc[0]}"] if len(present) else []
    return table.drop(columns=constant), " · ".join(said)


def show_lifted(table: pd.DataFrame, context: Sequence[str], out_dir: Path, name: str, caption: str) -> None:
    """Show `table` with its constant context columns stated once above it (and in the saved caption)."""
    shown, line = lift_constants(table, context)
    if line:
        say(line)
        caption = f"{caption}. {line}"
    show_table(shown, out_dir, name, caption)


# ----------------------------------------------------------------------------------------------------------
# Claims of one family


def family_claims(claims: pd.DataFrame, family: str) -> pd.DataFrame:
    """claims.csv's rows of one family (`lm`, `cta`); by claim_id prefix when there is no family column."""
    if "family" in claims.columns:
        return claims[claims["family"] == family]
    return claims[claims["claim_id"].astype(str).str.startswith(f"{family}_")]


def claims_display(claims: pd.DataFrame) -> pd.DataFrame:
    """Claims as shown: n, method, the claim, the paper's effect, ours with its CI, p, verdict, size."""

    def row(r: pd.Series) -> dict[str, Any]:
        out = {
            "n": number(r.get("n"), "{:.0f}"),
            "Method": r.get("method") if isinstance(r.get("method"), str) else "",
            "Claim": r["claim"],
            "Paper": _effect(r.get("paper_effect")),
            f"Ours {CI}": with_ci(r.get("effect"), r.get("ci_low"), r.get("ci_high"), "{:+.4f}"),
        }
        if "p_adjusted" in r:
            out["p (adjusted)"] = number(r["p_adjusted"], "{:.3g}")
        out["Verdict"] = r["verdict"]
        if "size" in r:
            out["Size"] = r["size"] if isinstance(r["size"], str) else MISSING
        elif "paper_in_ci" in r:
            out["Paper in CI"] = MISSING if is_missing(r["paper_in_ci"]) else str(r["paper_in_ci"])
        return out

    return display_rows(claims, row)
