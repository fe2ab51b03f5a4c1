"""One comparison of two cells (or pooled cells) on a metric, a − b over the seeds they share: from each
cell's own (moderated) variance when its task's grid holds it (`pdelra.results.design`), else a paired t."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pdelra import paper
from pdelra.results import stats
from pdelra.results.claim_types import (
    ACCURACY,
    Cell,
    Cells,
    Metric,
    Pooled,
)
from pdelra.results.design import satterthwaite
from pdelra.results.power import DegreesOfFreedom
from pdelra.results.run_index import (
    RunIndex,
    seed_values,
)
from pdelra.runs import BASELINE

if TYPE_CHECKING:
    pass


# ----------------------------------------------------------------------------------------------------
# One comparison: a − b, from each cell's own (moderated) variance when its task's grid holds it
# ----------------------------------------------------------------------------------------------------
@dataclass
class Comparison:
    """sign·(a − b) with its test, the spread of one seed's value of it (`sd1`, for power) and the df's
    growth with seeds, the reference level (b's mean, for relative margins), notes and devices."""

    est: stats.Estimate
    sd1: float
    dof: DegreesOfFreedom
    reference: float
    notes: list[str]
    devices: set[str]
    missing: list[str]


def _excluded(index: RunIndex, cells: Sequence[Cells], metric: Metric) -> int:
    """Runs of these cells that count nowhere (failed; diverged outside an accuracy claim)."""
    return sum(seed_values(index, c, metric).excluded for c in cells)


def _weights(cells: Cells, weight: float) -> dict[Cell, float]:
    parts = cells.cells if isinstance(cells, Pooled) else (cells,)
    return {c: weight / len(parts) for c in parts}


def compare(index: RunIndex, a: Cells, b: Cells, metric: Metric, sign: float = 1.0) -> Comparison:
    """sign·(a − b) on the metric: Welch–Satterthwaite's t over the cells' own variances
    (`pdelra.results.design`) when every task of the metric holds the cells in one grid with a measured
    variance for each (accuracy only, failed runs set aside), else the paired t over the seeds a and b share
    (variance floored as the design floors a cell's: `RunIndex.floor`), Welch's t below 2 shared seeds."""
    sa, sb = seed_values(index, a, metric), seed_values(index, b, metric)
    notes = list(dict.fromkeys(sa.notes + sb.notes))
    where = f" on {paper.TASK_LABELS.get(metric.tasks[0], metric.tasks[0])}" if len(metric.tasks) == 1 else ""
    for cells, own, other in ((a, sa, sb), (b, sb, sa)):
        if own.values and (lacking := sorted(set(other.values) - set(own.values) - set(own.failed))):
            notes.append(f"{cells.label()}{where} lacks seed(s) {', '.join(map(str, lacking))}")
    if sa.epoch_budgets and sb.epoch_budgets and sa.epoch_budgets != sb.epoch_budgets:
        # A difference between cells that trained for different budgets mixes the variant with the epochs.
        budget = {c.label(): "/".join(map(str, sorted(v.epoch_budgets))) for c, v in ((a, sa), (b, sb))}
        notes.append(
            "trained different epoch budgets (" + ", ".join(f"{k}: {v}" for k, v in budget.items()) + ")"
        )
    missing, devices = sa.missing + sb.missing, sa.devices | sb.devices
    reference = float(np.mean(list(sb.values.values()))) if sb.values else math.nan
    weights: dict[Cell, float] = {}
    for cell, w in [*_weights(a, sign).items(), *_weights(b, -sign).items()]:
        weights[cell] = weights.get(cell, 0.0) + w
    if missing:
        nan = stats.Estimate(math.nan, math.nan, math.nan, 0, BASELINE)
        return Comparison(nan, math.nan, DegreesOfFreedom(1.0), reference, notes, devices, missing)
    tasks = metric.tasks
    counted = any((t, c) in index.counted for t in tasks for c in weights)
    if metric.column == ACCURACY and metric.overhead_vs is None and not counted:
        per_cell = _per_cell(index, weights, metric)
        if not isinstance(per_cell, str):
            est, dof = per_cell
            return Comparison(est, est.se * math.sqrt(est.n), dof, reference, notes, devices, [])
        notes.append(f"paired t (no per-cell variances: {per_cell})")
    # A failed run counted against its cell (`pdelra.results.judge`) sits at chance, far from its grid: the
    # claim's own cells are compared by the paired t over their seeds, apart from the grid's variance model.
    df = len(set(sa.values) & set(sb.values)) - 1
    floor = (
        sum(index.floor(t, metric.column, df) * sum(w * w for w in weights.values()) for t in tasks)
        / len(tasks) ** 2
    )
    # a and b are oriented by `sign` before the test, so one-sided p-values point the claim's way.
    est = stats.paired(
        {s: sign * v for s, v in sa.values.items()},
        {s: sign * v for s, v in sb.values.items()},
        variance_floor=floor,
    )
    sd1 = est.se * math.sqrt(est.n) if est.n >= 2 and not math.isnan(est.se) else math.nan
    return Comparison(est, sd1, DegreesOfFreedom(1.0), reference, notes, devices, [])


def _per_cell(
    index: RunIndex, weights: Mapping[Cell, float], metric: Metric
) -> tuple[stats.Estimate, DegreesOfFreedom] | str:
    """The contrast Σ w_c ȳ_c averaged over the tasks, each task over the seeds its cells share; variance
    Σ_t Σ_c w_c² v_tc / (T² S_t) from each cell's moderated variance v_tc, Welch–Satterthwaite's df over all
    of them (`pdelra.results.design`), and how that df grows with seeds (for power); or why it cannot be
    had."""
    tasks = metric.tasks
    keys = {(c.variant, c.scale, c.setting): w for c, w in weights.items()}
    effect, variance, floored = 0.0, 0.0, False
    shares: list[tuple[float, float]] = []
    alone: list[tuple[float, float]] = []  # the same without moderation: the df below MODERATED_SEEDS seeds
    n = math.inf
    for task in tasks:
        label = paper.TASK_LABELS.get(task, task)
        grid = index.grid(task, set(keys))
        if grid is None:
            return f"{label}: a cell outside the task's grids"
        noise = index.noise(task, grid, metric.column)
        if unmeasured := [k for k in keys if k not in noise.cells]:
            k = unmeasured[0]
            return f"{label}: {Cell(*k).label()}, {noise.reasons.get(k, 'no usable run')}"
        found = {k: index.cell(Cell(*k), task, metric.column) for k in keys}
        values = {k: v.values for k, v in found.items() if v is not None}
        seeds = sorted(set.intersection(*(set(v) for v in values.values())))
        if len(seeds) < 2:
            return f"{label}: {len(seeds)} seed(s) shared by the cells"
        # (means of a few floats: Python's sum costs a tenth of np.mean's, called thousands of times)
        effect += sum(w * sum(values[k][s] for s in seeds) / len(seeds) for k, w in keys.items()) / len(tasks)
        scale = len(tasks) ** 2 * len(seeds)
        for k, w in keys.items():
            cell = noise.cells[k]
            variance += w * w * cell.variance / scale
            shares.append((w * w * cell.variance / scale, cell.df))
            alone.append((w * w * cell.own / scale, cell.own_df))
        floored |= any(noise.cells[k].floored for k in keys)
        n = min(n, len(seeds))
    df = satterthwaite(shares)
    moderated = any(d > o for (_, d), (_, o) in zip(shares, alone, strict=True))
    method = f"{'moderated ' if moderated else ''}per-cell t (Welch–Satterthwaite, df {df:.0f})"
    method += ", variance floored" if floored else ""
    est = stats.t_estimate(effect, math.sqrt(variance), df, int(n), method)
    dof = DegreesOfFreedom(df / max(n - 1, 1), satterthwaite(alone) / max(n - 1, 1))
    return est, dof
