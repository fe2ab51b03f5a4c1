"""The noise of one run, pooled over a task's grid: the variance behind every accuracy comparison.

Seeds are blocks: a seed fixes the initialisation stream and the data order, and every cell of a task's grid
(the baseline, the seven positions, the multi-scale cells) runs with the same seeds. A run's accuracy is
then modelled as cell effect + seed effect + noise, additive, with one noise variance σ² per task:

    y[c, s] = μ + a[c] + b[s] + ε[c, s],   ε ~ (0, σ²)

σ² is estimated from the residuals of that two-way table over every cell that has all the task's seeds:
(C − 1)(S − 1) degrees of freedom (8 cells × 5 seeds: 28), where one paired t-test of two cells has S − 1 = 4.
A comparison of two cells then has standard error σ √(2 / S) with the pooled df, which is what gives the
per-task claims of Table 11 and the multi-scale claims their power (`pdelra.results.power`).

The assumptions, and what happens when they fail:
- **equal variance across the cells of a task**: checked with the Brown–Forsythe test (scipy's `levene`,
  centred on the median) on the residuals grouped by cell, at `CHECK_LEVEL`; when it rejects (a position
  that sometimes diverges, one unstable configuration), the task's claims fall back to each comparison's own
  paired t-test over its seeds, which assumes nothing about the other cells, and their method says why;
- **additivity** (no seed × cell interaction beyond noise): the seeds share only initialisation streams and
  data order, which the design makes common; it is not tested separately (Tukey's one-degree test has little
  power at 5 seeds), and the simulations of tests/test_results_claims.py measure the levels under it;
- **a floor**, so that seeds that agree exactly (a constant guess, a coarse test set) never give p = 0. A
  test accuracy lives on a grid of 1 / n_test. The pooled σ², on ≥ 4 residual df, is raised to the grid's
  own resolution (1 / n_test)² / 12 (`resolution_floor`). A paired t-test on 1–4 df, whose spread can come
  out zero by chance on a coarse grid, is floored at the binomial variance p(1 − p) / n_test
  (`binomial_floor`; p: the mean accuracy of the task's runs), a conservative guard: on a fixed test set
  runs vary less than binomially (the paper's ListOps std over seeds, 0.35–0.54 pp, is below the 1.1 pp
  binomial sd of its 2,000 test examples), so the pooled estimate is not held to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

CHECK_LEVEL = 0.05  # the equal-variance check's level: below it, the task falls back to paired t-tests
MIN_CELLS = 3  # fewer cells than this pool nothing a paired t-test does not already have

CellKey = tuple[str, str, str]  # (variant, scale, setting)


@dataclass(frozen=True)
class TaskNoise:
    """One task's pooled noise: σ² (floored), its df, the cells and seeds of the design, and, when it cannot
    be used, why (`reason`)."""

    variance: float
    df: float
    cells: frozenset[CellKey]
    seeds: frozenset[int]
    floor: float  # binomial: for the paired t-tests that fall back from the design
    reason: str = ""

    @property
    def usable(self) -> bool:
        return not self.reason


def binomial_floor(accuracy: float, n_test: float) -> float:
    """The variance of one accuracy over `n_test` examples: p(1 − p) / n (0 when n_test is unknown)."""
    if math.isnan(accuracy) or math.isnan(n_test) or n_test <= 0:
        return 0.0
    p = min(max(accuracy, 0.0), 1.0)
    return max(p * (1 - p), 1.0 / n_test) / n_test  # p ∈ {0, 1} still has a resolution of 1 / n_test


def resolution_floor(n_test: float) -> float:
    """The variance of one grid step of 1 / n_test, uniform: (1 / n_test)² / 12 (0 when unknown)."""
    return 0.0 if math.isnan(n_test) or n_test <= 0 else 1.0 / (12.0 * n_test**2)


def task_noise(cells: Mapping[CellKey, Mapping[int, float]], n_test: float) -> TaskNoise:
    """The pooled noise of one task from its cells' per-seed values (one metric, completed runs)."""
    from scipy import stats

    counts: dict[int, int] = {}
    for values in cells.values():
        for seed in values:
            counts[seed] = counts.get(seed, 0) + 1
    # The design's seeds: those most cells have (a cell that lacks one of them stays out of the design).
    most = max(counts.values(), default=0)
    seeds = frozenset(s for s, c in counts.items() if c == most)
    design = {key: values for key, values in cells.items() if seeds <= set(values)}
    matrix = np.array([[design[key][s] for s in sorted(seeds)] for key in sorted(design)], dtype=float)
    floor = binomial_floor(float(matrix.mean()) if matrix.size else math.nan, n_test)
    empty = TaskNoise(math.nan, math.nan, frozenset(design), seeds, floor)
    if len(design) < MIN_CELLS or len(seeds) < 3:
        return _unusable(empty, f"{len(design)} cells × {len(seeds)} seeds: too few to pool")
    residuals = (
        matrix - matrix.mean(axis=1, keepdims=True) - matrix.mean(axis=0, keepdims=True) + matrix.mean()
    )
    df = (matrix.shape[0] - 1) * (matrix.shape[1] - 1)
    variance = float((residuals**2).sum()) / df
    if variance > 1e-15:  # (no residual at all: nothing to compare; the resolution floor decides)
        check = float(stats.levene(*residuals, center="median").pvalue)
        if check < CHECK_LEVEL:
            reason = f"variances differ across cells (Brown–Forsythe p = {check:.2g})"
            return _unusable(TaskNoise(variance, df, frozenset(design), seeds, floor), reason)
    return TaskNoise(max(variance, resolution_floor(n_test)), df, frozenset(design), seeds, floor)


def _unusable(noise: TaskNoise, reason: str) -> TaskNoise:
    return TaskNoise(noise.variance, noise.df, noise.cells, noise.seeds, noise.floor, reason)
