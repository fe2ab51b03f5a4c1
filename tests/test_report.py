"""`pdelra report`: hand-written metrics.json → `pdelra aggregate` → `pdelra report` → claims.csv; every
section, figure and table of the paper; an index page with the verdicts; `--partial` on a running grid."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, tool_env
from test_aggregate import write_metrics

from pdelra import paper
from pdelra.reporting.io import read_artifacts
from pdelra.results.claims import CLAIM_COLUMNS, VERDICTS
from pdelra.results.diagnostics import COLUMNS as DIAGNOSTICS_COLUMNS
from pdelra.results.verdict_rule import VERDICT_RULE
from pdelra.runs import run_dir
from pdelra.steps.aggregate import aggregate
from pdelra.steps.diagnose import diverged_reason, skipped_run
from pdelra.steps.report import ReportError, _claims_html, build_report, write_partial_tables

NOTEBOOK = REPO / "workflow" / "notebooks" / "report.ipynb"
PDELRA = ["pdelra"]  # the installed entry point, found on the venv's PATH (tool_env)

FIGURES = (
    "claims_forest",
    "figure2_spectral",
    "figure3_average",
    "figure6_per_task",
    "figure7_heatmap",
    "figure8_multiscale_heatmap",
    "figure9_10_multiscale",
    "learned_alpha",
    "cost_overhead",
)
TABLES = (
    "claims",
    "table4_ranking",
    "table6",
    "table7",
    "table10",
    "table10_comparison",
    "table11",
    "table12_comparison",
    "table13_comparison",
    "table14",
    "table15",
    "table16",
    "table8_9_config",
    "warmup",
    "provenance_data",
    "runs_per_cell",
)


def _alpha(scale: str, value: float) -> dict:
    scales = {"h1": [1], "h2": [2], "h4": [4], "multi": [1, 2, 4]}[scale]
    per_scale = [value * r for r in (1.0, 0.6, 0.3)][: len(scales)]
    return {"encoder.embedding": {"mean": sum(per_scale) / len(per_scale), "min": 0.01, "max": 0.3,
                                  "per_scale": per_scale, "scales": scales}}  # fmt: skip


def write_experiment(runs: Path, seeds: range, *, skip_multi: bool = False) -> list[Path]:
    """A grid shaped like the paper's: every position on every task (After Embedding a clear +0.05 on
    every task, every seed), the ListOps multi-scale sweep, one diverged related-system run."""
    files = []
    train = {"batch_size": 32, "warmup_steps": 50, "max_epochs": 3, "lr": 0.003, "weight_decay": 1e-5}
    common = {
        "run_config": {"model": {"alpha_init": 0.1}, "train": train},
        "planned_steps": 30,
        "steps_per_epoch": 10,
    }
    for seed in seeds:
        wobble = 0.004 * ((seed * 5) % 3 - 1)
        for v in paper.TABLE10:
            for t in paper.TASKS:
                acc = (
                    paper.TABLE10["none"][t]
                    + wobble
                    + (0.05 if v == "after_embedding" else 0.002 * (seed % 2))
                )
                alpha = None if v == "none" else _alpha("h1", 0.1 + 0.01 * seed)
                step = 0.1 * (1.05 if v != "none" else 1.0)
                files.append(
                    write_metrics(runs, t, v, "h1", seed, acc, alpha=alpha, step_time=step, **common)
                )
        for v in paper.TABLE12:
            for s in ("h2", "h4", "multi"):
                if skip_multi and s == "multi":
                    continue
                acc = paper.TABLE12[v][s] + wobble
                files.append(write_metrics(runs, "listops", v, s, seed, acc, alpha=_alpha(s, 0.09), **common))
    files.append(write_metrics(runs, "text", "physqk", "h1", 0, None, status="diverged"))
    return files


def pdelra(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PDELRA, *args], cwd=cwd, env=tool_env(), capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """results/unit/{runs,tables,report} made through the public commands only."""
    root = tmp_path_factory.mktemp("ws")
    exp = root / "results" / "unit"
    write_experiment(exp / "runs", range(3))
    done = pdelra("aggregate", "--runs", "results/unit/runs", "--out", "results/unit/tables", cwd=root)
    assert done.returncode == 0, done.stderr
    done = pdelra("report", "--tables", "results/unit/tables", "--out", "results/unit/report",
                  "--notebook", str(NOTEBOOK), "--experiment", "unit", cwd=root)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return exp / "report"


@pytest.mark.slow
def test_claims_csv_through_the_public_path(built: Path) -> None:
    claims = pd.read_csv(built / "tables" / "claims.csv").set_index("claim_id")
    assert list(claims.reset_index().columns) == list(CLAIM_COLUMNS)
    assert set(claims["verdict"]) <= set(VERDICTS)
    gain = claims.loc["after_embedding_gain"]
    # After Embedding is +0.05 over the shared per-seed wobble, the baseline +0.002 on odd seeds: paired
    # differences 0.05, 0.048, 0.05 (CSV keeps 6 significant digits).
    assert gain["effect"] == pytest.approx(0.05 - 0.002 / 3, abs=1e-6)
    assert gain["verdict"] == "reproduced" and gain["n"] == 3
    assert gain["paper_effect"] == pytest.approx(0.0407)
    assert claims.loc["after_embedding_best", "verdict"] == "reproduced"
    for variant in ("after_embedding", "after_mlp", "between_layers"):
        assert claims.loc[f"multiscale_gain_{variant}", "n"] == 3
    assert claims.loc["table11_sign_after_embedding_pathfinder", "verdict"] == "reproduced"


@pytest.mark.slow
def test_every_table_and_figure_in_every_format_with_a_caption(built: Path) -> None:
    for name in FIGURES:
        for ext in ("png", "pdf"):
            assert (built / "figures" / f"{name}.{ext}").stat().st_size > 1000, name
    for name in TABLES:
        for ext in ("csv", "md", "tex"):
            assert (built / "tables" / f"{name}.{ext}").is_file(), f"{name}.{ext}"
    captions = {(a["kind"], a["name"]): a["caption"] for a in read_artifacts(built)}
    assert all(captions[("figure", n)] for n in FIGURES) and all(captions[("table", n)] for n in TABLES)
    t6 = pd.read_csv(built / "tables" / "table6.csv").set_index("position")
    assert t6.loc["After Embedding", "paper"] == pytest.approx(0.6269)
    assert list(t6.columns) == ["paper", "ours", "Δ", "n"]
    assert "\\toprule" in (built / "tables" / "table6.tex").read_text()
    spectral = pd.read_csv(built / "tables" / "table16.csv")
    at_init = spectral[(spectral["scale"] == "Fast (h=1)") & (spectral["stencil"] == "eq. 6 (unit)")]
    assert at_init["low"].iloc[0] == pytest.approx(0.98, abs=0.02)  # α = 0.1 barely touches low frequencies


@pytest.mark.slow
def test_report_reads_like_a_results_section(built: Path) -> None:
    page = (built / "report.html").read_text()
    headings = ("Verdicts", "Provenance", "Table 11", "Multi-scale", "Table 15", "spectral view", "Table 14")
    for heading in (*headings, "Tables 8 and 9", "Related systems", "diagnostics", "Deviations"):
        assert heading in page, heading
    assert page.count('<h2 id="Related-systems">') == 1, "one heading per section"
    for deviation in ("stencil_scaling", "multiscale_init", "Pre-LN", "Best-validation checkpoint",
                      "curv_contour_length_14", "weight decay", "TF32"):  # fmt: skip
        assert deviation in page, deviation
    assert "def " not in page and "import " not in page, "code cells must be hidden"
    assert "+nan" not in page and ">nan<" not in page and "nan ±" not in page
    assert "Unnamed: 0" not in page


@pytest.mark.slow
def test_index_is_a_landing_page_with_verdicts_first(built: Path) -> None:
    index = (built / "index.html").read_text()
    assert index.index('id="claims"') < index.index("<h2>Figures</h2>")
    assert "after_embedding_gain" in index and "reproduced" in index and "1 diverged" in index
    assert "<th>what would decide it</th>" in index and "<th>unit</th>" in index
    for name in FIGURES:
        assert f'src="figures/{name}.png"' in index
    for name in TABLES:
        assert f'href="tables/{name}.tex"' in index
    executed = json.loads((built / "report.ipynb").read_text())
    assert executed["metadata"]["kernelspec"]["name"] == "pdelra"


@pytest.mark.slow
def test_partial_report_on_a_half_finished_grid_leaves_the_workflow_outputs_alone(tmp_path: Path) -> None:
    exp = tmp_path / "results" / "half"
    write_experiment(exp / "runs", range(2), skip_multi=True)
    # Runs still going: a checkpoint folder and a run folder without metrics.json yet.
    (exp / "runs" / "listops" / "after_embedding" / "multi" / "base" / "seed0").mkdir(parents=True)
    (exp / "checkpoints" / "listops" / "after_mlp" / "multi" / "base" / "seed0").mkdir(parents=True)
    for owned in ("tables/runs.csv", "report/index.html"):
        (exp / owned).parent.mkdir(parents=True, exist_ok=True)
        (exp / owned).write_text("the workflow's own file")
    _write_lm_runs(exp / "lm" / "runs")
    _write_run_diagnostics(exp / "runs")
    _write_cta_official_runs(exp / "cta_official" / "runs", range(2))
    data = {"task": "listops", "data": "generated", "origin": "pdelra generate listops {}", "n_train": 10,
            "n_val": 2, "n_test": 2, "max_length": 64, "paper_max_length": 2000, "d_model": 16, "n_layers": 2,
            "n_heads": 2, "batch_size": 4, "paper_d_model": 128, "paper_n_layers": 6, "paper_n_heads": 8,
            "paper_batch_size": 256, "paper_setting": False, "differences": "generated data"}  # fmt: skip
    pd.DataFrame([data]).to_csv(exp / "tables" / "data.csv", index=False)
    done = pdelra(
        "report", "--partial", "--runs", "results/half/runs", "--notebook", str(NOTEBOOK), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = exp / "report-partial"
    claims = pd.read_csv(out / "tables" / "claims.csv").set_index("claim_id")
    assert claims.loc["multiscale_gain_after_mlp", "verdict"] == "not run"
    assert "no run: After MLP (multi) on ListOps" in claims.loc["multiscale_gain_after_mlp", "detail"]
    assert claims.loc["after_embedding_gain", "verdict"] in ("reproduced", "inconclusive")
    assert claims.loc["after_embedding_gain", "n"] == 2
    assert "Partial report" in (out / "index.html").read_text()
    assert "Partial report" in (out / "report.html").read_text()
    assert (out / "source-tables" / "runs.csv").is_file()
    for owned in ("tables/runs.csv", "report/index.html"):
        assert (exp / owned).read_text() == "the workflow's own file"
    # The LM runs and the diagnostics measured so far are part of it, and no temporary path is named.
    page = (out / "report.html").read_text()
    assert (out / "source-tables" / "lm_runs.csv").is_file()
    assert len(pd.read_csv(out / "source-tables" / "lm_runs.csv")) == 2
    assert "no lm_runs.csv" not in page and "PhysQK-AD" in page
    assert len(pd.read_csv(out / "source-tables" / "diagnostics_per_position.csv")) > 0
    named = "Not diagnosed</strong> (1 run, left out of every diagnostic): Text, PhysQK (h1, base, seed 0): "
    assert f"{named}diverged." in page  # the diverged run's diagnostics: skipped, and said so
    assert {"lm", "diagnostics"} <= set(claims["family"])
    # So are CTA's own experiments (the same parts as the workflow's aggregate step, pdelra.steps.parts).
    assert len(pd.read_csv(out / "source-tables" / "cta_official_runs.csv")) == 4
    official = claims.loc[claims["family"] == "cta_official", "verdict"]
    assert (official != "not run").any()
    assert ".tmp" not in page and ".partial-tables." not in page
    assert "Not the paper" in page and "Not the paper" in (out / "index.html").read_text()


def _write_lm_runs(root: Path) -> None:
    """Two finished LM runs (MHA and PhysQK-AD) as `pdelra lm train` writes their metrics.json."""
    for variant, loss in (("mha", 3.9), ("physqk_ad", 3.8)):
        path = run_dir(root, "lm_text", variant, "d16", "base", 0) / "metrics.json"
        path.parent.mkdir(parents=True)
        dynamics = [
            {"step": 10, "epoch": 1, "layer": k, "alpha": 0.1, "eta": 1.0, "eff_pe": 0.5} for k in (0, 1)
        ]
        path.write_text(json.dumps({"task": "lm_text", "variant": variant, "scale": "d16", "setting": "base",
                                    "seed": 0, "status": "completed", "test_loss_nats": loss,
                                    "test_bits_per_byte": loss / 0.69, "corpus": "text",
                                    "dynamics": dynamics if variant == "physqk_ad" else []}))  # fmt: skip


def _write_run_diagnostics(runs: Path) -> None:
    """Each finished ListOps run's cached diagnostics.csv (as `pdelra diagnose run` leaves it), and the
    diverged run's: its one `skipped` row, which the report names."""
    for metrics in sorted(runs.glob("*/*/*/*/seed*/metrics.json")):
        m = json.loads(metrics.read_text())
        if diverged_reason(m) is not None:
            skipped_run(m, diverged_reason(m)).to_csv(metrics.parent / "diagnostics.csv", index=False)
    for metrics in sorted(runs.glob("listops/*/h1/base/seed*/metrics.json")):
        m = json.loads(metrics.read_text())
        keys = {k: m[k] for k in ("task", "variant", "scale", "setting", "seed")}
        rows = [{**keys, "block": 0, "operator": "probe", "kind": "probe", "position": "residual_stream",
                 "alpha_mean": 0.1, "commutator": 0.2, "commutator_branch": 0.3, "rel_roughness_in": 1.0,
                 "rel_roughness_out": 0.9, "bound_ratio": 0.5}]  # fmt: skip
        if m["variant"] != "none":
            rows.append(
                {**rows[0], "operator": "encoder.embedding", "kind": "trained", "position": "embedding"}
            )
        pd.DataFrame(rows).reindex(columns=DIAGNOSTICS_COLUMNS).to_csv(
            metrics.parent / "diagnostics.csv", index=False
        )


CTA_PDE = "cta_official_diffusion"  # Continuous-Time Attention's own model with its diffusion


def _write_cta_official_runs(root: Path, seeds: range) -> None:
    """Finished AG News runs of CTA's own experiments (baseline and diffusion) as `pdelra train` writes
    their metrics.json, and one run still training (its folder, no metrics.json yet)."""
    for seed in seeds:
        for variant, accuracy in (("none", 0.60), (CTA_PDE, 0.65 + 0.001 * seed)):
            keys = {"task": "agnews", "variant": variant, "scale": "h1", "setting": "base", "seed": seed}
            path = run_dir(root, *keys.values()) / "metrics.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps({**keys, "status": "completed", "test_accuracy": accuracy}))
    run_dir(root, "sst2", "none", "h1", "base", 0).mkdir(parents=True)


def test_partial_tables_include_the_cta_official_runs_finished_so_far(tmp_path: Path) -> None:
    exp, tables = tmp_path / "results" / "half", tmp_path / "tables"
    write_metrics(exp / "runs", "listops", "none", "h1", 0, 0.37)
    write_metrics(exp / "runs", "listops", "after_embedding", "h1", 0, 0.40)
    _write_cta_official_runs(exp / "cta_official" / "runs", range(3))
    tables.mkdir()
    write_partial_tables(exp / "runs", tables)
    runs = pd.read_csv(tables / "cta_official_runs.csv")
    assert len(runs) == 6 and set(runs["task"]) == {"agnews"}
    summary = pd.read_csv(tables / "cta_official_summary.csv").set_index(["task", "variant"])
    assert summary.loc[("agnews", CTA_PDE), "n"] == 3
    claims = pd.read_csv(tables / "claims.csv")
    official = claims[claims["family"] == "cta_official"].set_index("claim_id")["verdict"]
    judged = official[official != "not run"]
    assert len(judged) == 1 and "agnews" in judged.index[0], official.to_dict()
    assert not (tables / "lm_runs.csv").exists()  # no LM run yet: that part is left out ("not run")


def test_partial_without_finished_runs_says_so(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    done = pdelra("report", "--partial", "--runs", "runs", cwd=tmp_path)
    assert done.returncode == 1 and "no finished run under" in done.stderr


# ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small")
    files = [
        write_metrics(root / "runs", "listops", v, "h1", s, 0.3)
        for v in ("none", "after_embedding")
        for s in (0, 1)
    ]
    aggregate(files, root / "tables")
    return root / "tables"


def test_a_failing_notebook_leaves_the_previous_report_untouched(small_tables: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "index.html").write_text("previous report")
    broken = json.loads(NOTEBOOK.read_text())
    broken["cells"].insert(
        3,
        {"id": "boom", "cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": "raise RuntimeError('boom')"},
    )  # fmt: skip
    notebook = tmp_path / "broken.ipynb"
    notebook.write_text(json.dumps(broken))
    kept = tmp_path / "report.failed.ipynb"
    with pytest.raises(ReportError, match=r"broken.ipynb: cell \d+ failed with RuntimeError: boom") as failed:
        build_report(small_tables, out, notebook)
    assert (out / "index.html").read_text() == "previous report"
    # The error names the partly executed notebook, kept outside the discarded staging folder.
    assert str(kept) in str(failed.value) and "boom" in kept.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.ipynb", "report", "report.failed.ipynb"]


def test_unknown_kernel_is_explained(small_tables: Path, tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"no Jupyter kernel named 'no-such-kernel'.*ipykernel install"):
        build_report(small_tables, tmp_path / "report", NOTEBOOK, kernel="no-such-kernel")
    assert not (tmp_path / "report").exists()


def test_missing_tables_are_named(small_tables: Path, tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"nothing lacks runs.csv, main.csv, .*`pdelra aggregate"):
        build_report(tmp_path / "nothing", tmp_path / "report", NOTEBOOK)
    tables = tmp_path / "tables"
    shutil.copytree(small_tables, tables)  # the fixture is shared by the module: change a copy
    (tables / "cost.csv").unlink()
    with pytest.raises(ReportError, match=r"lacks cost.csv: `pdelra aggregate --out"):
        build_report(tables, tmp_path / "report", NOTEBOOK)
    assert not (tmp_path / "report").exists()


# ----------------------------------------------------------------------------------------------------
# The sections, without papermill: display only, reading nothing but the tables folder's CSVs
# ----------------------------------------------------------------------------------------------------
SECTIONS = ("claims", "methods", "provenance", "table6", "table10", "table11", "ranking", "multiscale",
            "robustness", "spectral", "alpha", "cost", "config", "related", "cta_official",
            "diagnostics")  # fmt: skip


def render_sections(tables: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list[Path]]:
    """Every section of this package on `tables`; returns what it displayed and every file it opened to
    read under the tables' parent folder."""
    import builtins
    import importlib
    import io

    import IPython.display

    from pdelra.reporting.sections import Report

    shown: list = []
    reads: list[Path] = []
    real_open = builtins.open

    def tracking_open(file, mode="r", *args, **kwargs):
        if isinstance(file, str | Path) and "r" in mode and "+" not in mode:
            path = Path(file).resolve()
            if tables.parent.resolve() in path.parents:
                reads.append(path)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", tracking_open)
    monkeypatch.setattr(io, "open", tracking_open)
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **_: shown.extend(objs))
    report = Report.open(tables, out, "unit")
    for name in SECTIONS:
        importlib.import_module(f"pdelra.reporting.sections.{name}").render(report)
    return shown, reads


@pytest.fixture(scope="module")
def sections_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, list[Path]]:
    """A small grid (two tasks, three positions, the multi-scale sweep of one) aggregated, and every
    section rendered on its tables; the runs' metrics.json stay beside them, so reading one is caught."""
    root = tmp_path_factory.mktemp("sections")
    train = {"batch_size": 32, "warmup_steps": 50, "max_epochs": 3, "lr": 0.003, "weight_decay": 1e-5}
    common = {
        "run_config": {"model": {"alpha_init": 0.1}, "train": train},
        "planned_steps": 30,
        "steps_per_epoch": 10,
    }
    files = []
    for seed in range(3):
        for task in ("listops", "text"):
            for variant, gain in (("none", 0.0), ("after_embedding", 0.05), ("after_mlp", 0.01 * seed)):
                alpha = None if variant == "none" else _alpha("h1", 0.1 + 0.01 * seed)
                acc = paper.TABLE10["none"][task] + gain
                step = 0.1 + (0.01 if variant != "none" else 0.0) * seed
                files.append(write_metrics(root / "runs", task, variant, "h1", seed, acc, alpha=alpha,
                                           step_time=step, **common))  # fmt: skip
        for scale in ("h2", "h4", "multi"):
            acc = paper.TABLE12["after_embedding"][scale]
            files.append(write_metrics(root / "runs", "listops", "after_embedding", scale, seed, acc,
                                       alpha=_alpha(scale, 0.09), **common))  # fmt: skip
    aggregate(files, root / "tables")
    with pytest.MonkeyPatch.context() as mp:
        shown, reads = render_sections(root / "tables", root / "report", mp)
    return root, shown, reads


def _text(shown: list) -> str:
    return "\n".join(
        getattr(obj, "data", None) or "" for obj in shown if isinstance(getattr(obj, "data", None), str)
    )


def test_sections_read_nothing_but_the_tables_csvs(sections_out: tuple[Path, list, list[Path]]) -> None:
    root, _, reads = sections_out
    tables, report = (root / "tables").resolve(), (root / "report").resolve()
    outside = [
        p for p in reads if not (p.parent == tables and p.suffix == ".csv") and report not in p.parents
    ]
    assert not outside, outside
    assert any(p.name == "table11.csv" for p in reads)  # the tracking sees the loader's reads


def test_every_section_saves_its_tables_and_figures(sections_out: tuple[Path, list, list[Path]]) -> None:
    root, _, _ = sections_out
    report = root / "report"
    # Figure 3 draws the LRA average, which needs all five tasks: this grid has two.
    assert not (report / "figures" / "figure3_average.png").exists()
    for name in set(FIGURES) - {"figure3_average"}:
        assert (report / "figures" / f"{name}.png").stat().st_size > 1000, name
    for name in TABLES:
        assert (report / "tables" / f"{name}.csv").is_file(), name
    assert (report / "tables" / "claims.csv").read_text() == (root / "tables" / "claims.csv").read_text()


def test_the_claims_section_shows_verdict_size_and_the_rule(
    sections_out: tuple[Path, list, list[Path]],
) -> None:
    root, shown, _ = sections_out
    text = _text(shown)
    assert VERDICT_RULE in text
    claims = pd.read_csv(root / "tables" / "claims.csv").set_index("claim_id")
    # After Embedding's multi-scale gain on ListOps: 0.408 − its best single scale, every seed alike.
    claim = claims.loc["multiscale_gain_after_embedding"]
    assert claim["verdict"] in VERDICTS[:3] and isinstance(claim["size"], str)
    row = next(line for line in text.split("<tr>") if "multiscale_gain_after_embedding" in line)
    assert claim["verdict"] in row and claim["size"] in row
    assert f"{claim['effect']:+.4f} [" in row  # effect [CI] as formatted by pdelra.reporting.style
    assert "not run" in next(line for line in text.split("<tr>") if "after_embedding_gain<" in line)


def test_the_average_over_an_incomplete_task_set_is_blank(
    sections_out: tuple[Path, list, list[Path]],
) -> None:
    root, _, _ = sections_out
    t6 = pd.read_csv(root / "report" / "tables" / "table6.csv").set_index("position")
    # Only two of the paper's five tasks ran: no LRA average beside the paper's five-task one.
    assert t6.loc["After Embedding", "ours"] == "—" and pd.isna(t6.loc["After Embedding", "Δ"])
    t11 = pd.read_csv(root / "report" / "tables" / "table11.csv").set_index("position")
    # Every seed +0.05: the interval comes from the cell's variance against the other cells of its grid,
    # never a point (no p = 0).
    cell = t11.loc["After Embedding", "ListOps"]
    low, high = (float(x) for x in cell.split("[")[1].split("]")[0].split(", "))
    assert cell.startswith("+0.0500 [") and low < 0.05 < high and cell.endswith("(+0.0222)")


def test_a_section_can_only_read_a_declared_table(tmp_path: Path) -> None:
    from pdelra.reporting.sections import Report, UndeclaredTableError

    report = Report.open(tmp_path / "tables", tmp_path / "out", "unit")
    assert report.table("runs").empty  # declared, not there yet: empty
    assert report.table("cta_official_summary").empty  # CTA's own experiments: declared, not in this grid
    with pytest.raises(UndeclaredTableError, match="metrics"):
        report.table("metrics")


def test_the_reporting_layer_imports_no_step() -> None:
    """The report reads tables; the steps that write them (pdelra.steps) stay out of its kernel."""
    code = (
        # pdelra.builtin_parts first, as the notebook imports it
        "import importlib, pkgutil, sys, pdelra.builtin_parts, pdelra.reporting as r\n"
        "for m in pkgutil.walk_packages(r.__path__, 'pdelra.reporting.'): importlib.import_module(m.name)\n"
        "from pathlib import Path; from pdelra.reporting.sections import Report\n"
        "Report(Path('absent'), Path('absent'), 'unit').table('runs')\n"
        "print(sorted(m for m in sys.modules if m.startswith('pdelra.steps')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_std_error_bars_only_where_a_bar_has_two_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Figures 6 and 9/10 draw ± std over seeds: none for a bar of one seed (its std is no spread; a
    zero-length bar with caps read as "no variation"), and their keys or captions say so."""
    import types

    import matplotlib

    matplotlib.use("Agg")
    from pdelra.reporting.sections import multiscale, table10

    drawn: list = []
    for module in (table10, multiscale):
        monkeypatch.setattr(module, "show_figure", lambda fig, *a, **_: drawn.append((fig, a[-1])))
    report = types.SimpleNamespace(out_dir=tmp_path)
    n = {"none": 1, "after_embedding": 3, "after_mlp": 1}  # the demo: one seed; here one bar has three

    def bar(variant: str, **keys: object) -> dict:
        spread = 0.01 if n[variant] > 1 else float("nan")  # results.tables: no std for one seed
        return {"variant": variant, "mean": 0.4, "std": spread, "n": n[variant], **keys}

    table10._figure6(
        report, pd.DataFrame([bar(v, task="listops", paper=paper.TABLE10[v]["listops"]) for v in n])
    )
    gains = {"gain_over_baseline": 0.01, "paper": 0.4, "paper_gain_over_baseline": 0.01}
    scales = ("h1", "h2", "h4", "multi")
    t12 = pd.DataFrame([bar(v, scale=s, **gains) for v in ("after_embedding", "after_mlp") for s in scales])
    multiscale._figure9_10(report, t12, ["after_embedding", "after_mlp"])
    (fig6, caption6), (fig9, caption9) = drawn

    def segments(fig: object) -> list[int]:
        bars = [c for ax in fig.axes for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
        return [len(c.lines[2][0].get_segments()) for c in bars]

    assert segments(fig6) == [1]  # After Embedding's bar only
    assert sum(segments(fig9)) == 2 * len(scales)  # After Embedding's, per scale, in both panels
    assert "none where a bar has one seed" in caption6 and "none where a bar has one seed" in caption9
    assert any("n ≥ 2" in t.get_text() for t in fig6.legends[0].get_texts())
    # Figure 3 and the cost overhead (horizontal bars): the same rule.
    from pdelra.reporting.sections import cost, table6

    for module in (table6, cost):
        monkeypatch.setattr(module, "show_figure", lambda fig, *a, **_: drawn.append((fig, a[-1])))
    table6._figure3(report, pd.DataFrame([bar(v, paper=paper.TABLE10[v]["average"]) for v in n]))
    overhead = pd.DataFrame([bar(v, scale="h1") for v in n if v != "none"])
    cost._figure(types.SimpleNamespace(out_dir=tmp_path, table=lambda name: overhead))
    (fig3, caption3), (fig_cost, _) = drawn[2:]
    assert segments(fig3) == [1] and segments(fig_cost) == [1] and "none with one seed" in caption3


def test_the_claims_table_prints_the_columns_a_reader_needs(
    sections_out: tuple[Path, list, list[Path]],
) -> None:
    """claims.csv keeps its 21 machine columns; claims.md and .tex (so paper-tables.pdf) print the reader's
    few, the effect with its interval in one cell, so the table is legible on a page."""
    import re

    from pdelra.reporting.sections.claims import PRINTED_HEADER

    root, _, _ = sections_out
    tables = root / "report" / "tables"
    assert list(pd.read_csv(tables / "claims.csv").columns) == list(CLAIM_COLUMNS)
    tex = (tables / "claims.tex").read_text()
    spec = re.search(r"\\begin\{tabular\}\{(.*)\}\n", tex).group(1)
    assert len(re.findall(r"p\{[\d.]+em\}|[lr]", re.sub(r">\{[^}]*\}", "", spec))) == len(PRINTED_HEADER)
    header = (tables / "claims.md").read_text().splitlines()[0]
    assert [h.strip() for h in header.strip("|").split("|")] == list(PRINTED_HEADER)
    claims = pd.read_csv(tables / "claims.csv").set_index("claim_id")
    row = next(
        line
        for line in (tables / "claims.md").read_text().splitlines()
        if "| multiscale_gain_after_embedding |" in line
    )
    effect = claims.loc["multiscale_gain_after_embedding"]
    assert f"{effect['effect']:+.4f} [{effect['ci_low']:+.4f}, {effect['ci_high']:+.4f}]" in row
    assert f"({effect['source']})" in row


def test_both_pages_name_the_failed_runs(tmp_path: Path) -> None:
    """A diverged run is a finding on both pages: the report's claims section and the landing page list it
    under "Runs that did not learn", and each claim row that read it says so under its statement (here the
    multi-scale row: After Embedding's h4 cell, the one compared with, lost seed 1: set aside)."""
    train = {"batch_size": 32, "warmup_steps": 50, "max_epochs": 3, "lr": 0.003, "weight_decay": 1e-5}
    common = {"run_config": {"model": {"alpha_init": 0.1}, "train": train}, "planned_steps": 30,
              "steps_per_epoch": 10}  # fmt: skip
    files = []
    for seed in range(3):
        for variant in ("none", "after_embedding"):
            acc = paper.TABLE10["none"]["listops"] + (0.05 if variant != "none" else 0.0) + 0.002 * seed
            files.append(write_metrics(tmp_path / "runs", "listops", variant, "h1", seed, acc, **common))
        for scale in ("h2", "h4", "multi"):
            acc = paper.TABLE12["after_embedding"][scale] + 0.002 * seed
            status = "diverged" if (scale, seed) == ("h4", 1) else "completed"
            value = None if status == "diverged" else acc
            files.append(write_metrics(tmp_path / "runs", "listops", "after_embedding", scale, seed, value,
                                       status=status, **common))  # fmt: skip
    aggregate(files, tmp_path / "tables")
    with pytest.MonkeyPatch.context() as mp:
        shown, _ = render_sections(tmp_path / "tables", tmp_path / "report", mp)
    finding = "After Embedding (h4) on ListOps: diverged in 1 of 3 seeds (seed 1)"
    line = f"Failed runs: {finding} — set aside"
    report_text = _text(shown)
    landing = _claims_html(tmp_path / "report" / "tables" / "claims.csv")
    for page in (report_text, landing):
        assert "Runs that did not learn" in page and f"<li>{finding}</li>" in page
        row = next(r for r in page.split("<tr>") if "multiscale_gain_after_embedding" in r)
        assert line in row
        assert "Failed runs:" not in next(r for r in page.split("<tr>") if "after_embedding_gain<" in r)


def test_an_own_operator_studys_page_is_titled_for_its_question() -> None:
    """A study of your own operators is not asked "did it reproduce?" (the paper's headline did not run)."""
    from pdelra.reporting.title import PAPER_TITLE, page_title, title_of

    assert page_title([], headline_ran=True) == PAPER_TITLE
    assert page_title(["smooth"], headline_ran=False) == (
        "Your own operator (smooth) beside attention: better than the baseline and the paper's diffusion?"
    )
    both = page_title(["a1", "b2"], headline_ran=True)
    assert both.startswith(PAPER_TITLE[:-1]) and both.endswith("do your own operators (a1, b2) beat it?")
    # Both pages take it from the tables: runs.csv's own variants, claims.csv's headline verdicts.
    runs = pd.DataFrame({"variant": ["none", "smooth"]})
    assert title_of(runs, pd.DataFrame()) == page_title(["smooth"], headline_ran=False)
    assert title_of(pd.DataFrame(), pd.DataFrame()) == PAPER_TITLE
