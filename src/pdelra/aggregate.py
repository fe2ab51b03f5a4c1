"""`pdelra aggregate`: every run's metrics.json → the tables the report and the paper comparison read.

Outputs (in `--out`), all CSV:
- `runs.csv`: one row per run, whatever became of it (status `completed`, `diverged`, ...), with provenance.
- `main.csv`: test accuracy mean ± std per task × variant at scale h1, plus a task `average` row per
  variant (paper Tables 6 and 10). Only completed runs count; `n_runs` vs `n` shows what was left out.
- `multiscale.csv`: each (task, variant) trained at several scales, per scale, with the gain over the
  baseline and of the multi-scale combination over the best single scale (paper Table 12).
- `cost.csv`: step time and peak memory per configuration and their overhead over `none` (paper Table 14).
- `alpha.csv`: the learned diffusion coefficients, one row per run and diffusion layer.
- `settings.csv`: test accuracy mean ± std per task × variant × scale × setting, every setting (grid
  ablations such as CTA's pseudo-time steps); `main.csv` and the paper comparisons use the `base` setting.

A run's identity (task, variant, scale, setting, seed; `pdelra.runs`) is read from metrics.json and checked
against its path `.../runs/{task}/{variant}/{scale}/{setting}/seed{n}/metrics.json`: a misplaced file is
caught, not mislabelled. Every table has a `setting` column right after `scale` and groups by it.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra.atomic import write_text_atomic
from pdelra.errors import UserError
from pdelra.runs import BASE_SETTING, RUN_KEYS, RunPathError, find_run_files, parse_run_dir

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

BASELINE = "none"
MAIN_SCALE = "h1"
MULTI_SCALE = "multi"
COMPLETED = "completed"

# Columns of runs.csv, in order. Missing values (a diverged run has no test accuracy) are left empty.
RUN_COLUMNS = (
    *RUN_KEYS,
    "status",
    "test_accuracy",
    "best_val_accuracy",
    "best_epoch",
    "epochs",
    "steps",
    "wall_time_s",
    "median_step_time_s",
    "peak_memory_mb",
    "resumed_count",
    "alpha_mean",
    "alpha_min",
    "alpha_max",
    "n_params",
    "device",
    "config_hash",
    "data_hash",
    "code_version",
    "metrics_path",
)


# The tables `aggregate` writes (as NAME.csv), all of which the report reads.
AGGREGATE_TABLES = ("runs", "main", "multiscale", "cost", "alpha", "settings")


class MetricsError(UserError, ValueError):
    """A metrics.json that cannot be used; the message names the file."""


# ----------------------------------------------------------------------------------------------------
# Reading runs
# ----------------------------------------------------------------------------------------------------
def _learned_alpha(metrics: dict[str, Any]) -> Any:
    """The α summary `{layer: {mean, min, max}}` at the best (tested) epoch, else at the last epoch."""
    history = [h for h in metrics.get("history") or [] if h.get("alpha")]
    best = [h for h in history if h.get("epoch") == metrics.get("best_epoch")]
    return (best or history or [{}])[-1].get("alpha")


def _alpha_stats(alpha: Any) -> tuple[float | None, float | None, float | None]:
    """Mean of the layers' mean α and the overall min/max, from `{layer: {mean, min, max}}`."""
    if not isinstance(alpha, dict) or not alpha:
        return None, None, None
    layers = [v for v in alpha.values() if isinstance(v, dict) and "mean" in v]
    if not layers:
        return None, None, None
    return (
        sum(v["mean"] for v in layers) / len(layers),
        min(v.get("min", v["mean"]) for v in layers),
        max(v.get("max", v["mean"]) for v in layers),
    )


def _code_version(value: Any) -> Any:
    """metrics.json's `code_version` {package, git} as one string: the git description when there is one."""
    return (value.get("git") or value.get("package")) if isinstance(value, dict) else value


def read_run(path: Path) -> dict[str, Any]:
    """One runs.csv row from a metrics.json file."""
    return _read(path)[0]


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(runs.csv row, alpha.csv rows) of one metrics.json, parsed once (10,000s of files: parse each once)."""
    try:
        metrics = json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise MetricsError(f"{path}: metrics file does not exist") from exc
    except json.JSONDecodeError as exc:
        raise MetricsError(
            f"{path}: line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg}); Snakemake counts "
            f"it as done, so remove it (rm {path}) and rerun snakemake to train that run again"
        ) from exc
    if not isinstance(metrics, dict):
        raise MetricsError(f"{path}: expected a JSON object, got {type(metrics).__name__}")

    row: dict[str, Any] = {}
    for key in RUN_KEYS:
        if key == "setting" and metrics.get(key) is None:
            metrics[key] = BASE_SETTING  # written before settings existed: the grid's only setting
        if metrics.get(key) is None:
            raise MetricsError(f"{path}: no {key!r}: not a metrics.json written by `pdelra train`")
        row[key] = int(metrics[key]) if key == "seed" else str(metrics[key])
    try:
        from_path: dict[str, Any] | None = parse_run_dir(path)
    except RunPathError:  # a file outside the runs layout (given by hand): nothing to check against
        from_path = None
    if from_path and any(row[k] != from_path[k] for k in RUN_KEYS):
        found = ", ".join(f"{k}={row[k]}" for k in RUN_KEYS)
        raise MetricsError(f"{path}: the file says {found}, which does not match its location")

    # Field names as the trainer writes them (docs/interfaces.md, pdelra.training.metrics).
    peak = metrics.get("peak_memory_bytes")
    alpha_mean, alpha_min, alpha_max = _alpha_stats(_learned_alpha(metrics))
    row.update(
        status=metrics.get("status") or COMPLETED,
        test_accuracy=metrics.get("test_accuracy"),
        best_val_accuracy=metrics.get("best_val_accuracy"),
        best_epoch=metrics.get("best_epoch"),
        epochs=metrics.get("epochs_run"),
        steps=metrics.get("steps_run"),
        wall_time_s=metrics.get("wall_time_s"),
        median_step_time_s=metrics.get("median_step_time_s"),
        peak_memory_mb=None if peak is None else peak / 2**20,
        resumed_count=metrics.get("resumed_count"),
        alpha_mean=alpha_mean,
        alpha_min=alpha_min,
        alpha_max=alpha_max,
        n_params=metrics.get("parameter_count"),
        device=metrics.get("device"),
        config_hash=metrics.get("config_hash"),
        data_hash=metrics.get("data_manifest_hash"),
        code_version=_code_version(metrics.get("code_version")),
        metrics_path=str(path),
    )
    return row, _alpha_rows(metrics, row)


def read_alpha(path: Path) -> list[dict[str, Any]]:
    """Rows (run keys, layer, mean, min, max) of the learned α of one run; none for runs without diffusion."""
    return _read(path)[1]


def _alpha_rows(metrics: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    alpha = _learned_alpha(metrics)
    if not isinstance(alpha, dict):
        return []
    return [
        {**{k: run[k] for k in RUN_KEYS}, "layer": layer, **{s: stats.get(s) for s in ("mean", "min", "max")}}
        for layer, stats in alpha.items()
        if isinstance(stats, dict)
    ]


def find_metrics(runs_dir: Path) -> list[Path]:
    return find_run_files(runs_dir, "metrics.json")


# ----------------------------------------------------------------------------------------------------
# Summaries
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


# ----------------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------------


def write_csv_atomic(frame: pd.DataFrame, path: Path) -> None:
    write_text_atomic(path, frame.to_csv(index=False, float_format="%.6g"))


def aggregate(metrics_files: Iterable[Path], out: Path) -> dict[str, pd.DataFrame]:
    """Build every table from the given metrics files and write them into `out`; returns them by name."""
    import pandas as pd

    files = sorted({Path(p) for p in metrics_files})
    if not files:
        raise MetricsError("no metrics.json files to aggregate")
    parsed = [_read(p) for p in files]
    rows = [row for row, _ in parsed]
    runs = pd.DataFrame(rows, columns=list(RUN_COLUMNS)).sort_values(list(RUN_KEYS), ignore_index=True)
    duplicates = runs[runs.duplicated(list(RUN_KEYS), keep=False)]
    if len(duplicates):
        raise MetricsError(f"the same run appears twice: {duplicates['metrics_path'].tolist()}")
    for column in (
        "test_accuracy",
        "best_val_accuracy",
        "median_step_time_s",
        "peak_memory_mb",
        "wall_time_s",
    ):
        runs[column] = pd.to_numeric(runs[column], errors="coerce")
    alpha_rows = [row for _, alpha in parsed for row in alpha]
    tables = {
        "runs": runs,
        "main": main_table(runs),
        "multiscale": multiscale_table(runs),
        "cost": cost_table(runs),
        "alpha": pd.DataFrame(alpha_rows, columns=[*RUN_KEYS, "layer", "mean", "min", "max"]),
        "settings": settings_table(runs),
    }
    assert tuple(tables) == AGGREGATE_TABLES
    for name, table in tables.items():
        write_csv_atomic(table, Path(out) / f"{name}.csv")
    not_done = runs[runs["status"] != COMPLETED]
    log.info(
        "aggregated %d runs (%d not completed: %s) into %s",
        len(runs),
        len(not_done),
        ", ".join(f"{n} {s}" for s, n in not_done["status"].value_counts().items()) or "none",
        out,
    )
    return tables


# ----------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------
def _run(args: argparse.Namespace) -> int:
    files: list[Path] = list(args.metrics)
    if args.runs is not None:
        found = find_metrics(args.runs)
        if not found:
            log.error("no runs/T/V/S/SETTING/seedN/metrics.json under %s", args.runs)
            return 1
        files += found
    if not files:
        log.error("give metrics.json files and/or --runs DIR")
        return 2
    aggregate(files, args.out)
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "aggregate",
        help="collect every run's metrics.json into the result tables (CSV)",
        description=(
            "Read the metrics.json of each run (given as paths and/or found under --runs) and write "
            "runs.csv (one row per run, diverged and failed runs included), main.csv (mean ± std test "
            "accuracy per task × variant at h1 plus the cross-task average, paper Tables 6/10), "
            "multiscale.csv (Table 12), cost.csv (time and memory overhead over the baseline, Table 14), "
            "alpha.csv (learned diffusion coefficients) and settings.csv (every grid setting)."
        ),
    )
    parser.add_argument("metrics", nargs="*", type=Path, help="metrics.json files of the runs to include")
    parser.add_argument(
        "--runs",
        type=Path,
        help="also include every runs/T/V/S/SETTING/seedN/metrics.json under this folder",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for the CSV tables (created if missing)"
    )
    parser.set_defaults(func=_run)
