"""The related-systems report section: readable tables from the results CSVs, on constructed tables."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from test_results_related import MHA, cta_runs, dynamics, lm_runs

from pdelra.reporting import display
from pdelra.reporting.io import read_artifacts
from pdelra.reporting.sections import Report
from pdelra.reporting.sections import related as rs
from pdelra.results import related

pytest.importorskip("IPython")


def test_ci_cells_read_value_then_interval() -> None:
    assert display.with_ci(0.1234, 0.1, 0.15, "{:.3f}") == "0.123 [0.100, 0.150]"
    assert display.with_ci(-0.065, -0.09, -0.04, "{:+.3f}") == "−0.065 [−0.090, −0.040]"
    assert display.with_ci(0.5, float("nan"), float("nan"), "{:.3f}") == "0.500"  # n < 2: no interval
    assert display.with_ci(0.5, 0.5, 0.5, "{:.3f}") == "0.500 [0.500, 0.500]"  # no spread over seeds
    assert display.with_ci(float("nan"), 0, 1, "{:.3f}") == "—"


def test_constant_context_columns_are_stated_once() -> None:
    table = pd.DataFrame(
        {"Task": ["ListOps"] * 2, "Δ method": ["", "paired t"], "Seeds": ["3", "2 of 3"], "Acc": [1, 1]}
    )
    shown, line = display.lift_constants(table, ["Task", "Δ method", "Seeds"])
    assert list(shown.columns) == ["Seeds", "Acc"]  # results columns stay even when constant
    assert line == "Task: ListOps · Δ method: paired t"


def test_claims_of_a_family_with_or_without_the_family_column() -> None:
    claims = pd.DataFrame({"claim_id": ["lm_a", "cta_b", "after_embedding_gain"], "claim": ["x", "y", "z"]})
    assert display.family_claims(claims, "lm")["claim_id"].tolist() == ["lm_a"]
    claims["family"] = ["lm", "cta", "primary"]
    claims.loc[0, "claim_id"] = "physqk_ad_beats_mha"
    assert display.family_claims(claims, "lm")["claim_id"].tolist() == ["physqk_ad_beats_mha"]


def test_seed_values_are_attached_to_the_layers_the_seed_names() -> None:
    assert rs.seed_reported("base", 1) == "α ≈ 0.44, eff_Pe 1.142"
    assert rs.seed_reported("base", 3) == "α < 0.003"
    assert rs.seed_reported("base", 0) == rs.seed_reported("shared", 1) == "—"


def _legend(layers: int) -> list[str]:
    import matplotlib.pyplot as plt

    fig = rs.dynamics_figure(related.layer_trajectory_table(dynamics(layers)))
    assert fig is not None
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    plt.close(fig)
    return labels


def test_the_figure_legend_names_only_layers_the_model_has() -> None:
    two = _legend(2)
    assert two == ["L0", "L1", "seed: L1 α ≈ 0.44", "seed: L1 eff_Pe 1.142", "eff_Pe = 1"]
    assert "seed: L2/L3 α < 0.003" in _legend(4)
    assert "seed: L2 α < 0.003" in _legend(3)


def _claims_csv() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "claim_id": ["after_embedding_gain", "lm_physqk_ad_vs_mha", "cta_wave_gain"],
            "claim": ["After Embedding gains", "PhysQK-AD beats MHA", "CTA wave beats the baseline"],
            "family": ["primary", "lm", "cta"],
            "paper_effect": [0.041, -0.065, float("nan")],
            "effect": [0.03, -0.07, 0.01],
            "ci_low": [0.01, -0.09, -0.02],
            "ci_high": [0.05, -0.05, 0.04],
            "n": [5, 3, 3],
            "verdict": ["reproduced", "reproduced", "inconclusive"],
            "p_adjusted": [0.01, 0.002, 0.4],
            "size": ["as claimed", "as claimed", ""],
            "method": ["paired t"] * 3,
            "detail": ["a long free-text explanation that would run off the page " * 3] * 3,
        }
    )


def _write_tables(folder: Path, layers: int = 4) -> None:
    folder.mkdir(parents=True)
    runs = lm_runs(
        {
            ("mha", "base"): MHA,
            ("physqk", "base"): [2.05, 2.15, 2.25],
            ("physqk_ad", "base"): [1.925, 2.035, 2.145],
            ("physqk_ad", "shared"): [1.5, 1.61, 1.72],
        }
    )
    cost = pd.DataFrame(
        {
            "task": ["listops", "listops", "text"],
            "variant": ["none", "cta_wave", "none"],
            "scale": "h1",
            "setting": ["base", "steps4", "base"],
            "n": 3,
            "median_step_time_s": [0.0123456, 0.0145678, 0.05],
            "peak_memory_mb": [529.2230, 612.5, 90.0],
            "wall_time_s": 60.0,
            "time_overhead_pct": [0.0, 18.0, 0.0],
            "memory_overhead_pct": [0.0, 15.7, 0.0],
        }
    )
    for name, table in related.summarise(runs, dynamics(layers), cta_runs(), cost).items():
        table.to_csv(folder / f"{name}.csv", index=False)
    _claims_csv().to_csv(folder / "claims.csv", index=False)


def _render(tables: Path, out: Path) -> None:
    rs.render(Report.open(tables, out, "unit"))


def test_render_shows_readable_tables_from_the_csvs(tmp_path: Path, said: list[str]) -> None:
    _write_tables(tmp_path / "tables")
    out = tmp_path / "out"
    _render(tmp_path / "tables", out)
    names = {a["name"] for a in read_artifacts(out)}
    assert names == {
        "lm_eval_loss",
        "lm_alpha_ablation",
        "lm_layers",
        "lm_dynamics",
        "lm_claims",
        "cta_type_steps",
        "cta_cost",
        "cta_claims",
    }
    assert not any(line.startswith("## ") for line in said)  # the notebook prints the section's heading
    shown = {
        name: pd.read_csv(out / "tables" / f"{name}.csv", dtype=str, keep_default_na=False)
        for name in names - {"lm_dynamics"}
    }
    for name, table in shown.items():
        snake = [c for c in table.columns if re.fullmatch(r"[a-z]+(_[a-z]+)+", c)]
        assert not snake, f"{name}: machine names as headers {snake}"
        assert "detail" not in table.columns
    loss = shown["lm_eval_loss"].set_index("Condition")
    assert loss.loc["PhysQK-AD", "Δ vs MHA (nats) [95 % CI]"] == "−0.065 [−0.090, −0.040]"
    assert loss.loc["PhysQK-AD", "Seed's ΔEval (nats)"] == "−0.065"
    assert "Corpus" not in loss.columns and "Corpus: Text · Width: d = 256" in " ".join(said)
    cta = shown["cta_type_steps"]
    assert cta["PDE type"].tolist() == ["Baseline", "CTA diffusion", "CTA wave", "CTA wave"]
    assert cta["Pseudo-time steps"].tolist() == ["—", "3 (default)", "1", "4"]
    cost = shown["cta_cost"]
    assert "Text" not in cost.to_string()  # no baseline row for a task without CTA runs
    assert cost["Peak memory (MiB)"].tolist() == ["529.2", "612.5"]
    assert cost["Step time (ms)"].tolist() == ["12.3", "14.6"]
    claims = shown["lm_claims"]
    assert claims["Claim"].tolist() == ["PhysQK-AD beats MHA"] and "n" not in claims.columns
    layers = shown["lm_layers"]
    assert layers["Layer"].tolist() == ["L0", "L1", "L2", "L3"]
    assert (out / "figures" / "lm_dynamics.png").is_file()


def test_render_says_not_run_per_part(tmp_path: Path, said: list[str]) -> None:
    _render(tmp_path / "absent", tmp_path / "empty")
    assert read_artifacts(tmp_path / "empty") == []
    text = "\n".join(said)
    assert "Not run: PhysQK-AD's language model" in text and "Not run: Continuous-Time Attention" in text
    # LM tables without dynamics or claims: those parts say so, the others show.
    tables = tmp_path / "tables"
    _write_tables(tables)
    (tables / "lm_layers.csv").write_text(",".join(related.LAYER_COLUMNS) + "\n")
    (tables / "claims.csv").unlink()
    (tables / "lm_layer_trajectory.csv").unlink()  # no figure: spares drawing it
    said.clear()
    _render(tables, tmp_path / "out")
    text = "\n".join(said)
    assert "Not run: PhysQK-AD's per-layer α, η, eff_Pe" in text
    assert "Not run: PhysQK-AD's claims (no `claims.csv`" in text
    assert "lm_eval_loss" in {a["name"] for a in read_artifacts(tmp_path / "out")}


def test_cta_table_shows_epochs_and_says_when_steps_trained_different_budgets(
    tmp_path: Path, said: list[str]
) -> None:
    """The demo's 3-step (default) runs trained 4 epochs, its 1- and 4-step runs 2: the report says so."""
    runs = cta_runs()
    runs["max_epochs"] = runs["epochs"] = [2 if s.startswith("steps") else 4 for s in runs["setting"]]
    table = related.cta_table(runs)
    note = rs.epochs_confound(table)
    assert "ListOps (baseline: 4; 1 step: 2; 3 steps: 4; 4 steps: 2 epochs)" in note
    assert rs.epochs_confound(related.cta_table(cta_runs().assign(max_epochs=4))) == ""  # one budget
    wide = cta_runs().assign(max_epochs=4)
    wide.loc[wide["setting"] == "steps4", ["setting", "max_epochs"]] = ["wide", 8]  # not a steps setting
    assert "ListOps (baseline: 4; 1 step: 4; 3 steps: 4; wide: 8 epochs)" in rs.epochs_confound(
        related.cta_table(wide)
    )
    assert rs.epochs_confound(related.cta_table(cta_runs())) == ""  # no epoch columns (older tables)
    folder = tmp_path / "tables"
    _write_tables(folder)
    table.to_csv(folder / "cta_type_steps.csv", index=False)
    rs.render_cta(Report.open(folder, tmp_path / "out", "unit"))
    assert note in said
    shown = pd.read_csv(tmp_path / "out" / "tables" / "cta_type_steps.csv", dtype=str, keep_default_na=False)
    assert shown["Pseudo-time steps"].tolist() == ["—", "3 (default)", "1", "4"]
    assert shown["Epochs (budget)"].tolist() == ["4", "4", "2", "2"]
