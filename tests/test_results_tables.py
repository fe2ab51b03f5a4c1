"""`pdelra.results.tables`: each comparison with the paper, on constructed run tables with known answers."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from pdelra import paper
from pdelra.results import provenance, spectral, tables
from pdelra.results.catalogue import all_claims
from pdelra.results.claims import evaluate
from pdelra.runs import BASE_SETTING, RUN_KEYS
from pdelra.steps.aggregate import RUN_COLUMNS


def runs_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """runs.csv rows (only the given fields set; the rest empty), completed unless a row says otherwise."""
    full = [{"status": "completed", "setting": BASE_SETTING, "scale": "h1", **row} for row in rows]
    return pd.DataFrame(full, columns=list(RUN_COLUMNS))


def cell(task: str, variant: str, accuracies: list[float], scale: str = "h1", **extra: Any) -> list[dict]:
    return [
        {"task": task, "variant": variant, "scale": scale, "seed": seed, "test_accuracy": acc, **extra}
        for seed, acc in enumerate(accuracies)
    ]


def test_table11_gain_is_the_paired_mean_difference_with_its_t_interval() -> None:
    base, ours = [0.50, 0.52, 0.51], [0.55, 0.56, 0.58]
    runs = runs_frame(cell("listops", "none", base) + cell("listops", "after_embedding", ours))
    t11 = tables.table11(runs, evaluate(runs, claims=all_claims())).set_index(
        ["variant", "task"]
    )  # gains as the claims judged them
    row = t11.loc[("after_embedding", "listops")]
    diffs = np.subtract(ours, base)  # 0.05, 0.04, 0.07
    half = scipy_stats.t.ppf(0.975, 2) * diffs.std(ddof=1) / math.sqrt(3)
    assert row["gain"] == pytest.approx(diffs.mean())
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((diffs.mean() - half, diffs.mean() + half))
    assert row["n"] == 3 and row["method"] == "paired t"
    assert row["relative_pct"] == pytest.approx(100 * diffs.mean() / np.mean(base))
    assert row["paper_gain"] == paper.TABLE11["after_embedding"]["listops"]["delta"]
    # A cell without runs has no gain, but keeps the paper's.
    empty = t11.loc[("after_mlp", "text")]
    assert math.isnan(empty["gain"]) and empty["n"] == 0
    assert empty["paper_relative_pct"] == paper.TABLE11["after_mlp"]["text"]["relative_pct"]


def test_table12_takes_the_best_single_scale_from_the_multiscale_table() -> None:
    runs = runs_frame(
        cell("listops", "none", [0.37, 0.37])
        + [
            r
            for scale, acc in {"h1": 0.39, "h2": 0.41, "h4": 0.38, "multi": 0.42}.items()
            for r in cell("listops", "after_embedding", [acc, acc], scale=scale)
        ]
    )
    t12 = tables.table12(tables.multiscale_table(runs)).set_index(["variant", "scale"])
    multi = t12.loc[("after_embedding", "multi")]
    assert multi["best_single_scale"] == "h2"
    assert multi["multi_gain"] == pytest.approx(0.01)
    assert t12.loc[("after_embedding", "h2"), "gain_over_baseline"] == pytest.approx(0.04)
    # The paper's: h4 (0.399) is its best single scale for After Embedding, multi-scale 0.408.
    assert multi["paper_best_single_scale"] == "h4"
    assert multi["paper_multi_gain"] == pytest.approx(0.408 - 0.399)
    assert t12.loc[("after_mlp", "multi"), "n"] == 0 and math.isnan(t12.loc[("after_mlp", "multi"), "mean"])


def test_the_average_is_left_empty_until_every_task_has_a_result() -> None:
    two_tasks = runs_frame(cell("listops", "none", [0.4, 0.5]) + cell("text", "none", [0.6, 0.7]))
    comparison = tables.table10_comparison(tables.main_table(two_tasks)).set_index(["variant", "task"])
    average = comparison.loc[("none", "average")]
    # main.csv averages the two tasks run; beside the paper's five-task average that would mislead.
    assert math.isnan(average["mean"]) and average["n_tasks"] == 2
    assert average["paper"] == paper.TABLE10["none"]["average"]
    assert comparison.loc[("none", "listops"), "delta"] == pytest.approx(
        0.45 - paper.TABLE10["none"]["listops"]
    )

    every_task = runs_frame(
        [r for i, t in enumerate(paper.TASKS) for r in cell(t, "none", [0.1 * i, 0.1 * i])]
    )
    comparison = tables.table10_comparison(tables.main_table(every_task)).set_index(["variant", "task"])
    assert comparison.loc[("none", "average"), "mean"] == pytest.approx(0.2)
    assert comparison.loc[("none", "average"), "n_tasks"] == 5


def test_table6_ranks_the_positions_by_our_average() -> None:
    comparison = pd.DataFrame(
        [
            {"variant": v, "task": "average", "paper": paper.TABLE6[v], "mean": m, "std": 0.0, "n": 2}
            for v, m in zip(paper.TABLE10, [0.5, 0.4, 0.6, 0.55, *[math.nan] * 5], strict=False)
        ]
    )
    t6 = tables.table6(comparison).set_index("variant")
    assert t6.loc["after_mlp", "rank"] == 1 and t6.loc["between_layers", "rank"] == 2
    assert t6.loc["after_embedding", "rank"] == 3
    assert math.isnan(t6.loc["none", "rank"])  # the baseline is not a position
    assert t6.loc["after_embedding", "predicted_rank"] == 1 and t6.loc["after_embedding", "paper_rank"] == 1
    assert list(t6["paper"]) == sorted(t6["paper"], reverse=True)


def test_table13_correlates_across_seeds_and_needs_three() -> None:
    lst, txt = [0.30, 0.35, 0.40], [0.60, 0.62, 0.64]
    runs = runs_frame(
        cell("listops", "none", lst)
        + cell("text", "none", txt)
        + cell("listops", "after_mlp", lst[:2])
        + cell("text", "after_mlp", txt[:2])
    )
    t13 = tables.table13(runs).set_index(["variant", "task_a", "task_b"])
    assert t13.loc[("none", "listops", "text"), "ours"] == pytest.approx(1.0)
    assert t13.loc[("none", "listops", "text"), "n_seeds"] == 3
    assert math.isnan(t13.loc[("after_mlp", "listops", "text"), "ours"])
    assert t13.loc[("none", "listops", "text"), "paper"] == paper.TABLE13["none"][("listops", "text")]


def test_cost_overhead_is_paired_per_seed_and_table14_shows_its_spread() -> None:
    runs = runs_frame(
        cell("listops", "none", [0.3, 0.3], median_step_time_s=0.1)
        + [
            {**r, "median_step_time_s": t}
            for r, t in zip(cell("listops", "after_embedding", [0.3, 0.3]), [0.11, 0.09], strict=True)
        ]
    )
    runs.loc[1, "median_step_time_s"] = 0.2  # seed 1's baseline ran slower: its pair is −55 %
    overhead = tables.cost_overhead(runs).set_index(["variant", "scale"])
    row = overhead.loc[("after_embedding", "h1")]
    per_seed = [10.0, -55.0]
    assert row["mean"] == pytest.approx(np.mean(per_seed)) and row["n"] == 2
    assert row["std"] == pytest.approx(np.std(per_seed, ddof=1))
    t14 = tables.table14(tables.cost_table(runs), tables.cost_overhead(runs)).set_index(["variant", "scale"])
    assert t14.loc[("after_embedding", "h1"), "time_overhead_std"] == pytest.approx(row["std"])
    assert t14.loc[("after_embedding", "h1"), "paper_time_overhead_pct"] == 5.6
    assert math.isnan(t14.loc[("none", "h1"), "time_overhead_pct"])


def test_table15_compares_mean_and_spread() -> None:
    runs = runs_frame(cell("listops", "none", [0.37, 0.38, 0.39]))
    t15 = tables.table15(tables.main_table(runs)).set_index("variant")
    assert t15.loc["none", "delta"] == pytest.approx(0.38 - 0.3740)
    assert t15.loc["none", "std_ratio"] == pytest.approx(0.01 / 0.0054)


def test_tables_14_and_15_show_a_configs_own_variant_after_the_papers() -> None:
    """An own variant that ran on ListOps is a row of both tables, its paper columns empty; one that ran
    only on another task is in neither (both tables are ListOps')."""
    runs = runs_frame(
        cell("listops", "none", [0.37, 0.38], median_step_time_s=0.10)
        + cell("listops", "smooth_embed", [0.40, 0.42], median_step_time_s=0.12)
        + cell("text", "only_text", [0.6, 0.61], median_step_time_s=0.1)
    )
    t14 = tables.table14(tables.cost_table(runs), tables.cost_overhead(runs))
    assert list(t14["variant"])[-1] == "smooth_embed" and "only_text" not in set(t14["variant"])
    mine = t14.set_index("variant").loc["smooth_embed"]
    assert mine["time_overhead_pct"] == pytest.approx(20.0) and math.isnan(mine["paper_time_overhead_pct"])
    t15 = tables.table15(tables.main_table(runs)).set_index("variant")
    assert list(t15.index)[-1] == "smooth_embed" and "only_text" not in t15.index
    assert t15.loc["smooth_embed", "mean"] == pytest.approx(0.41) and t15.loc["smooth_embed", "n"] == 2
    assert math.isnan(t15.loc["smooth_embed", "paper_mean"])


def test_table16_is_the_band_energy_at_initialisation_beside_the_paper() -> None:
    t16 = tables.table16().set_index(["scale", "stencil"])
    assert t16.loc[("h1", "unit"), "high"] == pytest.approx(spectral.band_energy([0.1], (1,))["high"])
    assert t16.loc[("multi", "paper"), "low"] == paper.TABLE16["multi"][paper.TABLE16_BANDS.index("low")]
    assert t16.loc[("h1", "unit"), "low"] > t16.loc[("h1", "unit"), "high"]  # a low-pass filter


def alpha_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=[*RUN_KEYS, "layer", *tables.ALPHA_COLUMNS])


def test_learned_alpha_and_its_transfer_function() -> None:
    runs = runs_frame(
        cell("listops", "after_embedding", [0.4, 0.4], alpha_init=0.2, stencil_scaling="unit")
        + cell("listops", "after_embedding", [0.4], scale="multi", alpha_init=0.2)
    )
    key = {"task": "listops", "variant": "after_embedding", "setting": BASE_SETTING}
    alpha = alpha_frame(
        [
            {**key, "scale": "h1", "seed": 0, "layer": "embed", "mean": 0.1, "per_scale_h1": 0.1},
            {**key, "scale": "h1", "seed": 1, "layer": "embed", "mean": 0.3, "per_scale_h1": 0.3},
            {**key, "scale": "multi", "seed": 0, "layer": "embed", "mean": 0.1}
            | {"per_scale_h1": 0.1, "per_scale_h2": 0.1, "per_scale_h4": 0.1},
        ]
    )
    learned = tables.learned_alpha(alpha, runs).set_index("scale")
    assert learned.loc["h1", ["n", "mean", "min", "max"]].tolist() == pytest.approx([2, 0.2, 0.1, 0.3])
    assert learned.loc["h1", "alpha_init"] == pytest.approx(0.2)
    assert learned.loc["multi", "alpha_init"] == pytest.approx(0.2 * (1 + 0.6 + 0.3) / 3)

    curves = tables.spectral_response(alpha, runs)
    at_pi = curves[np.isclose(curves["omega"], math.pi)].set_index(["panel", "variant"])
    # H(π) = 1 − 4α at h = 1: α = 0.1 and 0.3 give 0.6 and −0.2; the initial α = 0.2 gives 0.2.
    learned_h1 = at_pi.loc[("learned_h1", "after_embedding")]
    assert (learned_h1["mean"], learned_h1["min"], learned_h1["max"]) == pytest.approx((0.2, -0.2, 0.6))
    assert learned_h1["n"] == 2
    assert at_pi.loc[("learned_h1", "initial"), "mean"] == pytest.approx(0.2)
    # h = 2 and 4 leave ω = π (an even multiple of π/2 and π/4) untouched: only the h = 1 term acts.
    assert at_pi.loc[("learned_multi", "after_embedding"), "mean"] == pytest.approx(0.6)
    assert set(curves["panel"]) == {"initial", "learned_h1", "learned_multi"}


def test_config_echo_and_warmup_come_from_the_runs_config_columns() -> None:
    runs = runs_frame(
        cell(
            "listops",
            "none",
            [0.3, 0.3],
            batch_size=32,
            warmup_steps=50,
            planned_steps=30,
            steps_per_epoch=10,
        )
        + cell(
            "listops",
            "after_mlp",
            [0.3],
            batch_size=64,
            warmup_steps=50,
            planned_steps=30,
            steps_per_epoch=10,
        )
    )
    echo = provenance.config_echo(runs).set_index(["task", "field"])
    assert echo.loc[("listops", "batch_size"), "ours"] == 32  # the most common value
    assert echo.loc[("listops", "batch_size"), "n_values"] == 2
    assert echo.loc[("listops", "batch_size"), "paper"] == paper.TABLE8["listops"]["batch_size"]
    assert echo.loc[("listops", "lr"), "paper"] == paper.TABLE9["lr"]
    assert echo.loc[("listops", "d_model"), "n_values"] == 0  # not in these runs' config echo
    warm = provenance.warmup(runs).set_index("task").loc["listops"]
    assert not warm["peak_lr_reached"] and warm["highest_lr_fraction"] == pytest.approx(0.6)


def test_provenance_counts_every_run_whatever_its_status() -> None:
    runs = runs_frame(cell("listops", "none", [0.3, 0.3], data_hash="ab" * 32))
    runs.loc[1, "status"] = "diverged"
    cells = provenance.runs_per_cell(runs).iloc[0]
    assert (cells["runs"], cells["completed"]) == (2, 1)
    data = provenance.provenance_data(runs).iloc[0]
    assert data["data_hash"] == "ab" * 8 and data["n_hashes"] == 1
    summary = dict(provenance.provenance_summary(runs).itertuples(index=False))
    assert summary["runs"] == 2 and summary["status diverged"] == 1
    assert summary["seeds"] == 2 and summary["seed ids"] == "0, 1"  # a count, then which
    one = dict(provenance.provenance_summary(runs[runs["seed"] == 0]).itertuples(index=False))
    assert one["seeds"] == 1 and one["seed ids"] == "0"  # one seed, id 0: not "seeds 0"


def test_summarise_returns_every_comparison_table_even_without_runs() -> None:
    empty = runs_frame([])
    inputs = {"runs": empty, **tables.run_tables(empty, [])}
    out = tables.summarise(inputs)
    assert tuple(out) == tables.COMPARISON_TABLES
    # The paper's side is there before any run: the report shows it with "—" for ours.
    assert len(out["table10_comparison"]) == len(paper.TABLE10) * (len(paper.TASKS) + 1)
    assert out["table11"]["gain"].isna().all()
    assert len(out["table16"]) == 12
