"""The tables of numbers: the run summaries of `pdelra aggregate` (the paper's Tables 6/10, 12, 14 and every
grid setting from runs.csv) and the comparisons with the paper's published values that the report shows.

Pure functions, pandas in and out. A gain over the baseline, a best single scale or an overhead is computed
here once; the report only reads the CSVs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pdelra.runs import BASE_SETTING

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

BASELINE = "none"
MAIN_SCALE = "h1"
MULTI_SCALE = "multi"
COMPLETED = "completed"
# The comparison tables `summarise` returns, by name.
COMPARISON_TABLES: tuple[str, ...] = ()


# ----------------------------------------------------------------------------------------------------
def _completed(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[(runs["status"] == COMPLETED) & runs["test_accuracy"].notna()]


def _mean_std(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """n, mean, std (sample std; empty for one run) of test accuracy per group, plus n_runs (any status)."""
    done = _completed(runs)
    stats = done.groupby(by, sort=True)["test_accuracy"].agg(n="count", mean="mean", std="std")
    total = runs.groupby(by, sort=True).size().rename("n_runs")
    return stats.join(total, how="right").fillna({"n": 0}).astype({"n": int}).reset_index()


def main_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per task × variant at h1, and per variant the `average` over tasks (only when every task has a result).

    The average's std is the std over seeds of the per-seed cross-task average, using seeds complete on
    all tasks (the spread of Fig. 3); when no seed is complete it is left empty.
    """
    import pandas as pd

    h1 = runs[(runs["scale"] == MAIN_SCALE) & (runs["setting"] == BASE_SETTING)]
    per_task = _mean_std(h1, ["variant", "task"])
    tasks = sorted(h1["task"].unique())
    averages = []
    for variant, group in per_task.groupby("variant", sort=True):
        if len(tasks) < 2 or group["mean"].isna().any() or set(group["task"]) != set(tasks):
            continue
        done = _completed(h1[h1["variant"] == variant]).pivot_table(
            index="seed", columns="task", values="test_accuracy"
        )
        per_seed = done.dropna().mean(axis=1) if set(done.columns) == set(tasks) else pd.Series(dtype=float)
        averages.append(
            {
                "variant": variant,
                "task": "average",
                "n": len(per_seed),
                "mean": group["mean"].mean(),
                "std": per_seed.std() if len(per_seed) > 1 else math.nan,
                "n_runs": int(group["n_runs"].sum()),
            }
        )
    table = pd.concat([per_task, pd.DataFrame(averages, columns=per_task.columns)], ignore_index=True)
    table.insert(2, "scale", MAIN_SCALE)
    table.insert(3, "setting", BASE_SETTING)
    return table


def settings_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per task × variant × scale × setting: every configuration of every grid."""
    return _mean_std(runs, ["task", "variant", "scale", "setting"])


def multiscale_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Each (task, variant) run at several scales, with gains over the baseline and the best single scale."""
    import pandas as pd

    stats = _mean_std(runs, ["task", "variant", "scale", "setting"])
    scale_counts = stats[stats["n"] > 0].groupby(["task", "variant", "setting"])["scale"].nunique()
    swept = scale_counts[scale_counts > 1].index
    columns = [
        *stats.columns,
        "baseline_mean",
        "gain_over_baseline",
        "best_single_scale",
        "best_single_mean",
        "multi_gain",
    ]
    rows = []
    for task, variant, setting in swept:
        group = stats[
            (stats["task"] == task) & (stats["variant"] == variant) & (stats["setting"] == setting)
        ].copy()
        base = stats[
            (stats["task"] == task)
            & (stats["variant"] == BASELINE)
            & (stats["scale"] == MAIN_SCALE)
            & (stats["setting"] == BASE_SETTING)
        ]
        baseline = base["mean"].iloc[0] if len(base) else math.nan
        single = group[(group["scale"] != MULTI_SCALE) & group["mean"].notna()]
        best = single.loc[single["mean"].idxmax()] if len(single) else None
        group["baseline_mean"] = baseline
        group["gain_over_baseline"] = group["mean"] - baseline
        group["best_single_scale"] = None if best is None else best["scale"]
        group["best_single_mean"] = math.nan if best is None else best["mean"]
        group["multi_gain"] = [
            m - group["best_single_mean"].iloc[0] if s == MULTI_SCALE else math.nan
            for s, m in zip(group["scale"], group["mean"], strict=True)
        ]
        rows.append(group)
    if not rows:
        return pd.DataFrame(columns=columns)
    scale_order = {"h1": 0, "h2": 1, "h4": 2, "multi": 3}
    table = pd.concat(rows, ignore_index=True)
    table = table.sort_values(
        ["task", "variant", "setting", "scale"], key=lambda c: c.map(scale_order) if c.name == "scale" else c
    )
    return table[columns].reset_index(drop=True)


def cost_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Median step time and peak memory per configuration, and their overhead (%) over the task's `none`.

    The step time is each run's median optimizer step (compile, evaluation and early stopping excluded),
    averaged over seeds: Table 14 compares training cost per step, not runs of different lengths.
    """
    done = runs[runs["status"] == COMPLETED]
    by = ["task", "variant", "scale", "setting"]
    table = (
        done.groupby(by, sort=True)
        .agg(
            n=("seed", "count"),
            median_step_time_s=("median_step_time_s", "mean"),
            peak_memory_mb=("peak_memory_mb", "mean"),
            wall_time_s=("wall_time_s", "mean"),
        )
        .reset_index()
    )
    base = table[
        (table["variant"] == BASELINE) & (table["scale"] == MAIN_SCALE) & (table["setting"] == BASE_SETTING)
    ].set_index("task")
    for column, name in (
        ("median_step_time_s", "time_overhead_pct"),
        ("peak_memory_mb", "memory_overhead_pct"),
    ):
        reference = table["task"].map(base[column]) if len(base) else math.nan
        table[name] = 100.0 * (table[column] / reference - 1.0)
    return table


def run_tables(runs: pd.DataFrame, alpha_rows: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """The summaries of runs.csv by name: main, multiscale, cost, alpha, settings."""
    import pandas as pd

    from pdelra.runs import RUN_KEYS

    return {
        "main": main_table(runs),
        "multiscale": multiscale_table(runs),
        "cost": cost_table(runs),
        "alpha": pd.DataFrame(alpha_rows, columns=[*RUN_KEYS, "layer", "mean", "min", "max"]),
        "settings": settings_table(runs),
    }


def summarise(inputs: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The comparisons with the paper the report shows, by name, from the run tables in `inputs`."""
    return {}
