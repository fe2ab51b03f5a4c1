"""`pdelra report`: the papermill notebook on real tables, rendered to HTML, written all-or-nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO
from test_aggregate import write_metrics

from pdelra.aggregate import aggregate
from pdelra.report import ReportError, build_report

NOTEBOOK = REPO / "workflow" / "notebooks" / "report.ipynb"


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tables of a small experiment with every section: main grid, a multi-scale sweep, a diverged run."""
    root = tmp_path_factory.mktemp("exp")
    files = []
    alpha = {"embed": {"mean": 0.11, "min": 0.05, "max": 0.2}}
    for seed in range(3):
        for task, base in (("listops", 0.35), ("text", 0.6), ("image", 0.4)):
            files.append(write_metrics(root / "runs", task, "none", "h1", seed, base + 0.01 * seed))
            files.append(
                write_metrics(root / "runs", task, "after_embedding", "h1", seed, base + 0.02, alpha=alpha)
            )
        for scale in ("h2", "h4", "multi"):
            files.append(write_metrics(root / "runs", "listops", "after_embedding", scale, seed, 0.37))
    files.append(write_metrics(root / "runs", "text", "physqk", "h1", 0, None, status="diverged"))
    aggregate(files, root / "tables")
    return root / "tables"


def test_report_has_tables_figures_paper_numbers_and_index(tables: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    index = build_report(tables, out, NOTEBOOK, experiment="unit")
    assert index == out / "index.html"
    page = (out / "report.html").read_text()
    assert "<table" in page and "<img" in page
    assert "Deviations" in page and "After Embedding" in page
    assert "def save(" not in page, "code cells must be hidden in the HTML"
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {"accuracy_per_task.png", "accuracy_heatmap.png", "multiscale.png", "learned_alpha.png"} <= figures
    comparison = pd.read_csv(out / "tables" / "table10_comparison.csv").set_index(["variant", "task"])
    assert comparison.loc[("after_embedding", "text"), "paper_accuracy"] == pytest.approx(0.7029)
    assert comparison.loc[("none", "listops"), "mean"] == pytest.approx(0.36)
    landing = index.read_text()
    assert 'href="report.html"' in landing and "figures/multiscale.png" in landing
    assert "1 diverged" in landing
    executed = json.loads((out / "report.ipynb").read_text())
    assert executed["metadata"]["kernelspec"]["name"] == "pdelra"


def test_a_failing_notebook_leaves_the_previous_report_untouched(tables: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "index.html").write_text("previous report")
    broken = json.loads(NOTEBOOK.read_text())
    broken["cells"].append(
        {"id": "boom", "cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": "raise RuntimeError('boom')"}
    )  # fmt: skip
    notebook = tmp_path / "broken.ipynb"
    notebook.write_text(json.dumps(broken))
    with pytest.raises(ReportError, match=r"broken.ipynb: cell \d+ failed with RuntimeError: boom"):
        build_report(tables, out, notebook)
    assert (out / "index.html").read_text() == "previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.ipynb", "report"]


def test_unknown_kernel_is_explained(tables: Path, tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"no Jupyter kernel named 'no-such-kernel'.*ipykernel install"):
        build_report(tables, tmp_path / "report", NOTEBOOK, kernel="no-such-kernel")
    assert not (tmp_path / "report").exists()


def test_missing_tables_are_named(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"runs.csv does not exist"):
        build_report(tmp_path / "nothing", tmp_path / "report", NOTEBOOK)
