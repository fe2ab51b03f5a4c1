"""The diagnostics report section: display only, on tables made by pdelra.results.diagnostics.summarise from
constructed data (the statistics are tested in tests/test_results_diagnostics.py)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from test_results_diagnostics import POSITIONS, simpson, tables

from pdelra.paper import TASK_LABELS, TASKS
from pdelra.reporting.io import read_artifacts
from pdelra.reporting.sections import Report
from pdelra.reporting.sections import diagnostics as section
from pdelra.results.diagnostics import COLUMNS, SKIPPED, skipped_runs, summarise

matplotlib.use("Agg")


def _tables_dir(root: Path) -> Path:
    diagnostics, runs = tables(simpson(seeds=2))
    runs_keys = ["task", "variant", "scale", "setting", "seed"]
    residual = runs[runs_keys].assign(kind="residual", operator="residual", position="residual_stream")
    residual = pd.concat([residual.assign(block=b, rel_roughness_in=2.0 - b, rel_roughness_out=1.5 - b)
                          for b in (0, 1)])  # fmt: skip
    diagnostics = pd.concat([diagnostics, residual.reindex(columns=diagnostics.columns)], ignore_index=True)
    out = root / "tables"
    out.mkdir()
    for name, frame in summarise(diagnostics, runs).items():
        frame.to_csv(out / f"{name}.csv", index=False)
    return out


def test_render_says_not_run_without_the_tables(tmp_path: Path, said: list[str]) -> None:
    pytest.importorskip("IPython")
    section.render(Report.open(tmp_path / "tables", tmp_path / "out", "unit"))
    assert read_artifacts(tmp_path / "out") == [] and said[-1].startswith("*Diagnostics not run")
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "diagnostics_per_position.csv").write_text("")
    section.render(Report.open(tmp_path / "tables", tmp_path / "out2", "unit"))
    assert read_artifacts(tmp_path / "out2") == [] and said[-1].startswith("*Diagnostics not run")


def test_render_names_the_runs_diagnose_skipped_and_why(tmp_path: Path, said: list[str]) -> None:
    pytest.importorskip("IPython")
    keys = {"task": "text", "variant": "nan_op", "scale": "h1", "setting": "base", "kind": SKIPPED}
    rows = [{**keys, "seed": seed, "reason": f"diverged at step {seed + 1}"} for seed in range(12)]
    diagnostics = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    tables = _tables_dir(tmp_path)
    skipped_runs(diagnostics).to_csv(tables / "diagnostics_skipped.csv", index=False)
    section.render(Report.open(tables, tmp_path / "out", "unit"))
    (line,) = [text for text in said if "Not diagnosed" in text]
    assert line.startswith("**Not diagnosed** (12 runs, left out of every diagnostic): ")
    assert f"{TASK_LABELS['text']}, nan_op (h1, base, seed 0): diverged at step 1; " in line
    assert "seed 9): diverged at step 10; and 2 more (every one in the table `diagnostics_skipped`)." in line
    assert said.index(line) == 1  # right after the introduction, before any figure or table
    assert (tmp_path / "out" / "tables" / "diagnostics_per_position.md").is_file()  # the rest as before


def test_render_saves_every_figure_and_table_from_the_csvs(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    section.render(Report.open(_tables_dir(tmp_path), tmp_path / "out", "unit"))
    artifacts = json.loads((tmp_path / "out" / "artifacts.json").read_text())["artifacts"]
    assert {(a["kind"], a["name"]) for a in artifacts} == {
        ("figure", "diagnostics_roughness_depth"),
        ("figure", "diagnostics_commutator"),
        ("figure", "diagnostics_commutator_branch"),
        ("figure", "diagnostics_mechanism"),
        ("table", "diagnostics_per_position"),
        ("table", "diagnostics_mechanism"),
    }  # no bound table: the constructed runs have no logit effects
    shown = (tmp_path / "out" / "tables" / "diagnostics_mechanism.md").read_text()
    assert "p (Holm)" in shown and "inconclusive" in shown  # readable headers; the Simpson case: no evidence
    positions = (tmp_path / "out" / "tables" / "diagnostics_per_position.md").read_text()
    assert "Layer Diffusion" in positions and "between_layers" not in positions  # paper labels
    rows = [line.split("|")[1].strip() for line in positions.splitlines()[2:]]
    assert list(dict.fromkeys(rows)) == [TASK_LABELS[t] for t in TASKS]  # the paper's task order


def test_figures_use_paper_labels_and_order_and_draw_no_empty_rows(tmp_path: Path) -> None:
    root = _tables_dir(tmp_path)
    blocks = pd.read_csv(root / "diagnostics_per_block.csv")
    fig = section.figure_commutator(blocks, "commutator_per_alpha", "commutator")
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert [t.split(":")[0] for t in titles[: len(TASKS)]] == [TASK_LABELS[t] for t in TASKS]
    first = next(ax for ax in fig.axes if ax.get_title().startswith("ListOps: trained"))
    labels = [t.get_text() for t in first.get_yticklabels()]
    assert labels == ["After Embedding", "After MLP", "Layer Diffusion", "Before LayerNorm", "In Attention",
                      "Head Diffusion", "After Attention"][: len(labels)]  # fmt: skip
    assert len(labels) == len(POSITIONS)  # every position has a commutator here: one row each, none empty
    depth = section.figure_roughness(pd.read_csv(root / "diagnostics_depth.csv"))
    assert [ax.get_title() for ax in depth.axes] == [TASK_LABELS[t] for t in TASKS]
    assert depth.legends and not any(ax.get_legend() for ax in depth.axes)  # the key sits beside the panels
    points, test = (pd.read_csv(root / f"diagnostics_{n}.csv") for n in ("points", "mechanism"))
    mechanism = section.figure_mechanism(points, test)
    assert len(mechanism.legends) == 2 and not any(ax.texts for ax in mechanism.axes)  # keys, no point labels


def test_roughness_figure_keys_more_variants_than_markers(tmp_path: Path) -> None:
    """The demo diagnoses 11 variants (8 positions, CTA, PhysQK, PhysQK-AD): each gets a line and a key."""
    depth = pd.read_csv(_tables_dir(tmp_path) / "diagnostics_depth.csv")
    variants = [f"extra{i}" for i in range(len(section.MARKERS) + 2)]
    many = pd.concat([depth.assign(variant=v) for v in variants], ignore_index=True)
    fig = section.figure_roughness(many)
    (legend,) = fig.legends
    assert len(legend.get_texts()) == len(variants)


def test_commutator_panels_of_a_row_share_their_positions(tmp_path: Path) -> None:
    """The demo probes 11 variants on ListOps and 8 on the other tasks: every panel of the probe row must
    have the same rows in the same order (a position missing from a task is a blank cell), else reading
    across the row puts values at the wrong position."""
    blocks = pd.read_csv(_tables_dir(tmp_path) / "diagnostics_per_block.csv")
    probe = blocks.assign(kind="probe", commutator=(blocks["variant"] == "after_attention") * 9.0)
    extra = probe[probe["task"] == "listops"].assign(variant="cta", commutator=999.0)
    probe = probe[(probe["task"] == "listops") | ~probe["variant"].isin(["after_mlp", "between_layers"])]
    fig = section.figure_commutator(pd.concat([blocks, probe, extra]), "commutator_per_alpha", "commutator")
    panels = [ax for ax in fig.axes if "probe D" in ax.get_title()]
    assert len(panels) == len(TASKS)
    labels = [t.get_text() for t in panels[0].get_yticklabels()]
    assert len(labels) == len(POSITIONS) + 1 and labels[-1] == "cta"
    for ax in panels:
        (image,) = ax.images
        assert image.get_array().shape == (len(labels), 1)  # the same rows in every panel of the row
        assert not [t.get_text() for t in ax.get_yticklabels() if t.get_text()] or ax is panels[0]
        cells = {round(t.get_position()[1]): t.get_text() for t in ax.texts}
        row = labels.index("After Attention")
        assert cells[row] == "9"  # the probe's After Attention value sits on its own row in every panel
    text = next(ax for ax in panels if ax.get_title().startswith(TASK_LABELS["text"]))
    assert text.images[0].get_array().mask[labels.index("After MLP"), 0]  # not measured there: blank
