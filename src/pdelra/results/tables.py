"""The tables of numbers: the run summaries of `pdelra aggregate` (the paper's Tables 6/10, 12, 14 and every
grid setting from runs.csv) and the comparisons with the paper's published values that the report shows.

Pure functions, pandas in and out, with machine-readable columns (variant and task ids, not labels). A gain
over the baseline, a best single scale, an overhead, a correlation or a transfer function is computed here
once; the report only reads the CSVs and formats them (`pdelra.reporting.style`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.results import spectral, stats
from pdelra.results.claims import Cell, Metric, RunIndex, seed_values
from pdelra.results.provenance import config_echo, provenance_data, provenance_summary, runs_per_cell, warmup
from pdelra.runs import (
    BASE_SETTING,
    BASELINE,
    COMPLETED,
    MAIN_SCALE,
    MULTI_SCALE,
    RUN_KEYS,
    SCALE_ORDER,
    base_rows,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

# The comparison tables `summarise` returns, by name (each written as NAME.csv).
COMPARISON_TABLES: tuple[str, ...] = (
    "table10_comparison",
    "table6",
    "table11",
    "table12",
    "table13",
    "table14",
    "cost_overhead",
    "table15",
    "table16",
    "spectral_response",
    "learned_alpha",
    "config_echo",
    "warmup",
    "provenance_summary",
    "provenance_data",
    "runs_per_cell",
)
# alpha.csv's columns after the run keys and the layer (pdelra.steps.aggregate writes them).
ALPHA_STEP_SIZES = (1, 2, 4)
ALPHA_COLUMNS = ("mean", "min", "max", *(f"per_scale_h{h}" for h in ALPHA_STEP_SIZES))
# The ListOps tables of the paper (7, 12, 14, 15) are on this task.
LISTOPS = "listops"
# Model defaults (pdelra.nn.model.ModelConfig) for runs whose metrics.json predates the runs.csv column.
DEFAULT_ALPHA_INIT = 0.1
DEFAULT_STENCIL_SCALING = "unit"
DEFAULT_MULTISCALE_INIT = "paper"
# H(ω) is tabulated on this many frequencies of [0, π].
SPECTRAL_POINTS = 201


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
    scale_order = {scale: i for i, scale in enumerate(SCALE_ORDER)}
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

    return {
        "main": main_table(runs),
        "multiscale": multiscale_table(runs),
        "cost": cost_table(runs),
        "alpha": pd.DataFrame(alpha_rows, columns=[*RUN_KEYS, "layer", *ALPHA_COLUMNS]),
        "settings": settings_table(runs),
    }


# ----------------------------------------------------------------------------------------------------
# The paper's tables beside ours
# ----------------------------------------------------------------------------------------------------
def _cell(frame: pd.DataFrame, **keys: Any) -> pd.Series | None:
    """The one row of `frame` with these column values, else None."""
    if frame.empty:
        return None
    mask = True
    for column, value in keys.items():
        mask = mask & (frame[column] == value)
    hit = frame[mask]
    return hit.iloc[0] if len(hit) else None


def _get(row: pd.Series | None, column: str) -> float:
    """A number of the row (NaN when there is no row or the cell is empty)."""
    value = None if row is None else row[column]
    return math.nan if value is None or value != value else float(value)  # NaN != NaN


def table10_comparison(main: pd.DataFrame) -> pd.DataFrame:
    """Tables 6/10 long form: per variant and task (and `average`) the paper's value, our mean, std, n and
    delta = ours − paper. `n_tasks` counts the tasks with a result; an average over fewer than the paper's
    five tasks is left empty (it would not be the paper's average). The paper's variants, then a config's
    own variants that ran (paper.own_variants; the paper's value empty)."""
    import pandas as pd

    main = base_rows(main)
    rows = []
    for variant in [*paper.TABLE10, *paper.own_variants(main["variant"] if len(main) else [])]:
        done = [t for t in paper.TASKS if not math.isnan(_get(_cell(main, variant=variant, task=t), "mean"))]
        for task in (*paper.TASKS, "average"):
            hit = _cell(main, variant=variant, task=task)
            n_tasks = len(done) if task == "average" else int(task in done)
            if task == "average" and n_tasks < len(paper.TASKS):
                hit = None
            mean, p = _get(hit, "mean"), paper.TABLE10.get(variant, {}).get(task, math.nan)
            rows.append(
                {
                    "variant": variant,
                    "task": task,
                    "paper": p,
                    "mean": mean,
                    "std": _get(hit, "std"),
                    "n": 0 if hit is None else int(hit["n"]),
                    "delta": mean - p,
                    "n_tasks": n_tasks,
                }
            )
    return pd.DataFrame(rows)


def table6(comparison: pd.DataFrame) -> pd.DataFrame:
    """Table 6 (and Table 4's ranking): the LRA average per variant, the paper's beside ours, the ranking
    Table 4 predicts, the paper's measured ranking and ours (1 = best; positions only, not the baseline: the
    paper's seven and a config's own variants)."""
    avg = comparison[comparison["task"] == "average"].drop(columns="task").reset_index(drop=True)
    positions = avg["variant"].isin(paper.positions_of(avg["variant"]))
    avg["predicted_rank"] = avg["variant"].map(paper.TABLE4_PREDICTED_RANK)
    avg["paper_rank"] = avg["variant"].map(paper.table6_rank())
    avg["rank"] = avg["mean"].where(positions).rank(ascending=False, method="min")
    return avg.sort_values("paper", ascending=False, ignore_index=True, na_position="last")


def table11(runs: pd.DataFrame, claims: pd.DataFrame) -> pd.DataFrame:
    """Table 11: each position's gain over the baseline per task with its 95 % CI, as the claims table
    judged it (`table11_sign_{variant}_{task}`: paired by seed, `pdelra.results.claims`; computed there
    once), the relative gain (% of the baseline's mean over the same seeds) and the paper's gains. The
    paper's positions, then a config's own variants that ran (no paper gains)."""
    import pandas as pd

    judged = claims.set_index("claim_id") if len(claims) else pd.DataFrame()
    index = RunIndex(runs)
    rows = []
    for variant in paper.positions_of(runs["variant"] if len(runs) else []):
        for task in paper.TASKS:
            claim_id = f"table11_sign_{variant}_{task}"
            row = judged.loc[claim_id] if claim_id in judged.index else None
            ours = seed_values(index, Cell(variant), Metric(tasks=(task,))).values
            base = seed_values(index, Cell(BASELINE), Metric(tasks=(task,))).values
            shared = set(ours) & set(base)
            seeds = shared if len(shared) >= 2 else set(base)  # those the paired test compares (Welch: all)
            base_mean = sum(base[s] for s in seeds) / len(seeds) if seeds else math.nan
            gain = math.nan if row is None else float(row["effect"])
            p = paper.TABLE11.get(variant, {}).get(task, {"delta": math.nan, "relative_pct": math.nan})
            rows.append(
                {
                    "variant": variant,
                    "task": task,
                    "gain": gain,
                    "ci_low": math.nan if row is None else float(row["ci_low"]),
                    "ci_high": math.nan if row is None else float(row["ci_high"]),
                    "n": 0 if row is None else int(row["n"]),
                    "method": "" if row is None else row["method"],
                    "baseline_mean": base_mean,
                    "relative_pct": 100.0 * gain / base_mean if base_mean else math.nan,
                    "paper_gain": p["delta"],
                    "paper_relative_pct": p["relative_pct"],
                }
            )
    return pd.DataFrame(rows)


def table12(multiscale: pd.DataFrame) -> pd.DataFrame:
    """Tables 7/12: ListOps accuracy per position and scale, the paper's beside ours, with the gain over the
    baseline and the best single scale (both from `multiscale_table`, computed there once) and the paper's.
    The paper's positions, then a config's own variants swept over scales (the paper's columns empty)."""
    import pandas as pd

    ms = base_rows(multiscale)
    ms = ms[ms["task"] == LISTOPS] if len(ms) else ms
    paper_base = paper.TABLE10[BASELINE][LISTOPS]
    own = {
        v: dict.fromkeys(SCALE_ORDER, math.nan) for v in paper.own_variants(ms["variant"] if len(ms) else [])
    }
    rows = []
    for variant, per_scale in {**paper.TABLE12, **own}.items():
        singles = {s: per_scale[s] for s in SCALE_ORDER if s != MULTI_SCALE}
        paper_best = None if variant in own else max(singles, key=singles.__getitem__)
        for scale in SCALE_ORDER:
            hit = _cell(ms, variant=variant, scale=scale)
            mean = _get(hit, "mean")
            rows.append(
                {
                    "variant": variant,
                    "scale": scale,
                    "paper": per_scale[scale],
                    "mean": mean,
                    "std": _get(hit, "std"),
                    "n": 0 if hit is None else int(hit["n"]),
                    "delta": mean - per_scale[scale],
                    "gain_over_baseline": _get(hit, "gain_over_baseline"),
                    "paper_gain_over_baseline": per_scale[scale] - paper_base,
                    "best_single_scale": None if hit is None else hit["best_single_scale"],
                    "multi_gain": _get(hit, "multi_gain"),
                    "paper_best_single_scale": paper_best,
                    "paper_multi_gain": (
                        per_scale[MULTI_SCALE] - singles[paper_best]
                        if scale == MULTI_SCALE and paper_best is not None
                        else math.nan
                    ),
                }
            )
    return pd.DataFrame(rows)


def table13(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 13: per variant and task pair, the Pearson correlation across seeds of the variant's test
    accuracies on the two tasks (the paper does not say what it correlates), needing ≥ 3 seeds complete on
    both, beside the paper's."""
    import pandas as pd

    done = _completed(base_rows(runs)) if len(runs) else runs
    rows = []
    for variant, pairs in paper.TABLE13.items():
        cells = done[(done["variant"] == variant) & (done["scale"] == MAIN_SCALE)] if len(done) else done
        wide = (
            cells.pivot_table(index="seed", columns="task", values="test_accuracy")
            if len(cells)
            else pd.DataFrame()
        )
        for (a, b), p in pairs.items():
            pair = wide[[a, b]].dropna() if {a, b} <= set(wide.columns) else pd.DataFrame()
            ours = float(pair[a].corr(pair[b])) if len(pair) >= 3 else math.nan
            rows.append(
                {"variant": variant, "task_a": a, "task_b": b, "n_seeds": len(pair), "paper": p, "ours": ours}
            )
    table = pd.DataFrame(rows)
    table["delta"] = table["ours"] - table["paper"]
    return table


def cost_overhead(runs: pd.DataFrame, task: str = LISTOPS) -> pd.DataFrame:
    """Per configuration of `task` (base setting): the step-time overhead (%) over the baseline paired by
    seed, 100 (t_seed / t_baseline,seed − 1), with its mean, std, n and 95 % t-interval over seeds.

    Per-run step times of jobs sharing a machine vary by ±25 % or more, so this spread is what Table 14's
    single overhead per configuration hides; `pdelra bench` measures the overhead interleaved."""
    import pandas as pd

    columns = ["task", "variant", "scale", "n", "mean", "std", "ci_low", "ci_high"]
    done = base_rows(runs)
    done = done[(done["status"] == COMPLETED) & (done["task"] == task)] if len(done) else done
    if done.empty:
        return pd.DataFrame(columns=columns)
    times = done.dropna(subset=["median_step_time_s"])
    base = times[(times["variant"] == BASELINE) & (times["scale"] == MAIN_SCALE)]
    base_time = dict(zip(base["seed"], base["median_step_time_s"], strict=True))
    rows = []
    for (variant, scale), cell in times.groupby(["variant", "scale"], sort=True):
        if variant == BASELINE and scale == MAIN_SCALE:
            continue
        pct = [
            100.0 * (t / base_time[s] - 1.0)
            for s, t in zip(cell["seed"], cell["median_step_time_s"], strict=True)
            if s in base_time
        ]
        if not pct:
            continue
        est = stats.one_sample(pct)
        spread = float(pd.Series(pct).std()) if len(pct) > 1 else math.nan
        rows.append([task, variant, scale, len(pct), est.effect, spread, est.low, est.high])
    return pd.DataFrame(rows, columns=columns)


def table14(cost: pd.DataFrame, overhead: pd.DataFrame) -> pd.DataFrame:
    """Table 14: ListOps step-time and memory overhead over the baseline (%), the paper's beside ours (from
    cost.csv: the overhead of the seed-averaged median step time), with the per-seed spread of the time
    overhead (`cost_overhead`); then a config's own variants that ran on ListOps (the paper's values
    empty)."""
    import pandas as pd

    cost = base_rows(cost)
    cost = cost[cost["task"] == LISTOPS] if len(cost) else cost
    own = [((v, MAIN_SCALE), None) for v in paper.own_variants(cost["variant"] if len(cost) else [])]
    rows = []
    for (variant, scale), p in [((BASELINE, MAIN_SCALE), None), *paper.TABLE14.items(), *own]:
        hit = _cell(cost, variant=variant, scale=scale)
        spread = _cell(overhead, variant=variant, scale=scale)
        baseline = variant == BASELINE
        rows.append(
            {
                "variant": variant,
                "scale": scale,
                "paper_time_overhead_pct": math.nan if p is None else p["time_overhead_pct"],
                "time_overhead_pct": math.nan if baseline else _get(hit, "time_overhead_pct"),
                "time_overhead_std": _get(spread, "std"),
                "time_overhead_ci_low": _get(spread, "ci_low"),
                "time_overhead_ci_high": _get(spread, "ci_high"),
                "paper_memory_overhead_pct": math.nan if p is None else p["memory_overhead_pct"],
                "memory_overhead_pct": math.nan if baseline else _get(hit, "memory_overhead_pct"),
                "median_step_time_s": _get(hit, "median_step_time_s"),
                "n": 0 if hit is None else int(hit["n"]),
            }
        )
    return pd.DataFrame(rows)


def table15(main: pd.DataFrame) -> pd.DataFrame:
    """Table 15: ListOps accuracy mean ± std over seeds, the paper's beside ours, and their std ratio; then
    a config's own variants that ran on ListOps (the paper's values empty)."""
    import pandas as pd

    main = base_rows(main)
    listops = main[main["task"] == LISTOPS]["variant"] if len(main) else []
    own = [(v, (math.nan, math.nan)) for v in paper.own_variants(listops)]
    rows = []
    for variant, (paper_mean, paper_std) in [*paper.TABLE15.items(), *own]:
        hit = _cell(main, variant=variant, task=LISTOPS)
        mean, std = _get(hit, "mean"), _get(hit, "std")
        rows.append(
            {
                "variant": variant,
                "paper_mean": paper_mean,
                "paper_std": paper_std,
                "mean": mean,
                "std": std,
                "n": 0 if hit is None else int(hit["n"]),
                "delta": mean - paper_mean,
                "std_ratio": std / paper_std,
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------
# The spectral view: Table 16, Figure 2, the learned α
# ----------------------------------------------------------------------------------------------------
def table16() -> pd.DataFrame:
    """Table 16: mean |H(ω)|² per band of the layer at the paper's initialisation (α = 0.1; multi-scale
    0.1 × (1, 0.6, 0.3)) under eq. 6 (`unit`) and eq. 11 (`inverse_h2`), beside the paper's (`paper`)."""
    import pandas as pd

    rows = []
    for scale in SCALE_ORDER:
        scales = spectral.SCALES[scale]
        init = spectral.initial_alphas(scales, DEFAULT_ALPHA_INIT)
        for scaling in ("unit", "inverse_h2"):
            rows.append({"scale": scale, "stencil": scaling, **spectral.band_energy(init, scales, scaling)})
        rows.append(
            {
                "scale": scale,
                "stencil": "paper",
                **dict(zip(paper.TABLE16_BANDS, paper.TABLE16[scale], strict=True)),
            }
        )
    return pd.DataFrame(rows)[["scale", "stencil", *spectral.BANDS]]


def _run_config(runs: pd.DataFrame, column: str, default: Any) -> Any:
    """The runs' most common value of a run-config column (its default when no run records it)."""
    if runs.empty or column not in runs or runs[column].dropna().empty:
        return default
    return runs[column].dropna().mode().iloc[0]


def _layer_alphas(alpha: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """alpha.csv rows of completed base-setting runs of the positions whose layer acts on the run's own
    scales (the sequence axis), with the run's stencil scaling and a tuple `alphas` of per-scale α."""
    import pandas as pd

    per_scale = [f"per_scale_h{h}" for h in ALPHA_STEP_SIZES]
    if alpha.empty or runs.empty or not set(per_scale) <= set(alpha.columns):
        return pd.DataFrame(columns=[*RUN_KEYS, "layer", "alphas", "stencil_scaling"])
    done = _completed(base_rows(runs))
    config = done[list(RUN_KEYS)].assign(
        stencil_scaling=done["stencil_scaling"].fillna(DEFAULT_STENCIL_SCALING)
        if "stencil_scaling" in done
        else DEFAULT_STENCIL_SCALING
    )
    rows = alpha[alpha["variant"].isin(paper.positions_of(alpha["variant"]))].merge(config, on=list(RUN_KEYS))
    alphas = []
    for _, row in rows.iterrows():
        scales = spectral.SCALES.get(row["scale"], ())
        present = [h for h in ALPHA_STEP_SIZES if pd.notna(row[f"per_scale_h{h}"])]
        alphas.append(tuple(row[f"per_scale_h{h}"] for h in scales) if present == list(scales) else None)
    rows = rows.assign(alphas=alphas)
    return rows[rows["alphas"].notna()].reset_index(drop=True)


def spectral_response(alpha: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Figure 2 as numbers: H(ω) on SPECTRAL_POINTS frequencies of [0, π], per panel and curve.

    Panels: `initial` (each scale at the paper's initialisation, eq. 6 and eq. 11), `learned_h1` (each
    position's learned α at h = 1) and `learned_multi` (multi-scale); in the learned panels `mean`, `min`
    and `max` are over layers × runs (`n` of them), and the variant `initial` is the runs' initial α."""
    import numpy as np
    import pandas as pd

    omega = np.linspace(0.0, math.pi, SPECTRAL_POINTS)
    alpha_init = float(_run_config(runs, "alpha_init", DEFAULT_ALPHA_INIT))
    ms_init = str(_run_config(runs, "multiscale_init", DEFAULT_MULTISCALE_INIT))
    frames = []

    def curve(panel: str, variant: str, scale: str, scaling: str, curves: np.ndarray) -> None:
        frames.append(
            pd.DataFrame(
                {
                    "panel": panel,
                    "variant": variant,
                    "scale": scale,
                    "stencil_scaling": scaling,
                    "n": len(curves),
                    "omega": omega,
                    "mean": curves.mean(0),
                    "min": curves.min(0),
                    "max": curves.max(0),
                }
            )
        )

    for scale in SCALE_ORDER:
        scales = spectral.SCALES[scale]
        init = spectral.initial_alphas(scales, DEFAULT_ALPHA_INIT)
        for scaling in ("unit", "inverse_h2"):
            curve("initial", "initial", scale, scaling, spectral.transfer(omega, init, scales, scaling)[None])
    layers = _layer_alphas(alpha, runs)
    for panel, scale in (("learned_h1", MAIN_SCALE), ("learned_multi", MULTI_SCALE)):
        at = layers[layers["scale"] == scale]
        if at.empty:
            continue
        scales = spectral.SCALES[scale]
        scaling = str(_run_config(at, "stencil_scaling", DEFAULT_STENCIL_SCALING))
        init = spectral.initial_alphas(scales, alpha_init, ms_init)
        curve(panel, "initial", scale, scaling, spectral.transfer(omega, init, scales, scaling)[None])
        for variant, d in at.groupby("variant", sort=False):
            curves = np.array(
                [
                    spectral.transfer(omega, a, scales, sc)
                    for a, sc in zip(d["alphas"], d["stencil_scaling"], strict=True)
                ]
            )
            curve(panel, str(variant), scale, "per run", curves)
    return pd.concat(frames, ignore_index=True)


def learned_alpha(alpha: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per position and scale: the learned effective α (mean over channels and scales) of the completed
    base-setting runs' layers, mean, min and max over layers × runs (`n` of them), beside the initial α
    (its mean over the layer's scales, as the effective α is)."""
    import pandas as pd

    columns = ["variant", "scale", "n", "mean", "min", "max", "alpha_init"]
    if alpha.empty or runs.empty:
        return pd.DataFrame(columns=columns)
    done = _completed(base_rows(runs))[list(RUN_KEYS)]
    positions = paper.positions_of(alpha["variant"])
    a = alpha[alpha["variant"].isin(positions)].merge(done, on=list(RUN_KEYS))
    if a.empty:
        return pd.DataFrame(columns=columns)
    table = a.groupby(["variant", "scale"], sort=False)["mean"].agg(
        n="count", mean="mean", min="min", max="max"
    )
    table = table.reset_index()
    alpha_init = float(_run_config(runs, "alpha_init", DEFAULT_ALPHA_INIT))
    ms_init = str(_run_config(runs, "multiscale_init", DEFAULT_MULTISCALE_INIT))
    table["alpha_init"] = [
        sum(init) / len(init)
        for init in (
            spectral.initial_alphas(spectral.SCALES.get(s, (1,)), alpha_init, ms_init) for s in table["scale"]
        )
    ]
    order = {v: i for i, v in enumerate(positions)} | {s: i for i, s in enumerate(SCALE_ORDER)}
    return table.sort_values(["variant", "scale"], key=lambda c: c.map(order), ignore_index=True)[columns]


def summarise(inputs: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The comparisons with the paper the report shows, by name (COMPARISON_TABLES), from the run tables
    and the claims in `inputs` (absent ones empty)."""
    import pandas as pd

    empty = pd.DataFrame()
    runs = inputs.get("runs", empty)
    alpha = inputs.get("alpha", empty)
    comparison = table10_comparison(inputs.get("main", empty))
    overhead = cost_overhead(runs)
    out = {
        "table10_comparison": comparison,
        "table6": table6(comparison),
        "table11": table11(runs, inputs.get("claims", empty)),
        "table12": table12(inputs.get("multiscale", empty)),
        "table13": table13(runs),
        "table14": table14(inputs.get("cost", empty), overhead),
        "cost_overhead": overhead,
        "table15": table15(inputs.get("main", empty)),
        "table16": table16(),
        "spectral_response": spectral_response(alpha, runs),
        "learned_alpha": learned_alpha(alpha, runs),
        "config_echo": config_echo(runs),
        "warmup": warmup(runs),
        "provenance_summary": provenance_summary(runs),
        "provenance_data": provenance_data(runs),
        "runs_per_cell": runs_per_cell(runs),
    }
    if tuple(out) != COMPARISON_TABLES:
        raise AssertionError(f"comparison tables {list(out)} differ from COMPARISON_TABLES")
    return out
