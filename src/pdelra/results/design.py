"""The noise of one run, cell by cell: the variance behind every accuracy comparison.

Seeds are blocks: a seed fixes the initialisation stream and the data order, and every cell of a task's grid
runs with the same seeds. A run's accuracy is modelled as cell effect + seed effect + noise, additive, with a
noise variance **of its own for each cell**:

    y[c, s] = μ + a[c] + b[s] + ε[c, s],   ε[c, s] ~ N(0, σ_c²)

Real LRA runs are not equally noisy: one position trains less stably than the others. A variance pooled over
the task gives that position's comparisons a standard error too small (measured: with 3× the others' sd, its
Table 11 claims were falsely decided in 18–27 % at a nominal 5 %), and a pre-test for equal variances has no
power at 3–5 seeds (Brown–Forsythe at n = 3 cannot reject). So no verdict rests on such a pre-test.

**Each cell's variance is measured against the rest of its grid at the same seed** (`cell_noise`). For cell a,
the reference at seed s is the mean of the other cells of its grid that ran every seed a ran; the difference

    e[a, s] = y[a, s] − mean_{c in R(a)} y[c, s]

removes the seed effect b[s] exactly, and its sample variance over a's seeds estimates σ_a² + Σ_{c in R(a)}
σ_c² / |R(a)|² on |S_a| − 1 degrees of freedom: an exact scaled χ² whatever the other cells' variances. The
second term is the reference's own noise, 1/7 of a run's variance with the 8 cells of a task's main grid: a
small conservative bias. A cell with a failed seed (`pdelra.results.claims`: diverged, or at chance) leaves
the references of the cells that ran that seed, so a failure widens no other cell's variance.

**Moderation** (`moderate`, with 5 seeds or more). A cell's own variance on 4 df is rough, so it borrows
from its grid by empirical Bayes (Smyth 2004, the limma moderated t): the cells' variances are taken as
draws from a scaled inverse-χ² prior (s0², d0), fitted by the method of moments on their logarithms
(`prior`), and a cell's variance becomes (d0_c s0² + d_c s_c²) / (d0_c + d_c) on d0_c + d_c df. Plain
moderation would shrink a noisier cell toward the others and hide its noise (measured: its intervals then
covered 86 % at 95 %), so a cell borrows only as far as its own spread agrees with the grid's: d0_c =
min(d0, D_c) · min(1, 2 P_c)², with D_c the other cells' df and P_c the prior-predictive probability of a
spread at least as large as its own. A cell with a typical spread borrows fully; one whose spread the grid
makes surprising keeps its own. There is no threshold, and nothing is hidden: the method column says
"moderated". Below 5 seeds (2 df) a spread cannot show whether its cell belongs to the grid, and nothing is
borrowed.

A comparison Σ_c w_c ȳ_c (a − b, or means of cells) over the seeds its cells share has variance
Σ_c w_c² σ_c² / S, estimated cell by cell, with Welch–Satterthwaite's df (`satterthwaite`). Only the cells
the claim compares enter it (and, through their references, 1/|R|² of the others'). Averaged over tasks, each
task contributes its own cells' variances; Satterthwaite's df runs over all of them.

**Grids.** A task's *main* grid is the baseline and the seven positions at h1; its *scale* grid is the cells
of the positions run at several scales (ListOps' Table 12: three positions × h1, h2, h4, multi). A comparison
within one grid uses that grid's references and prior, so the multi-scale cells never enter a single-scale
claim. A cell in no grid (another setting, a related system's variant, a config's own variant) and every
metric that is not an accuracy are compared by the paired t-test over the seeds both cells share
(`pdelra.results.stats.paired`).

**A floor**, so that seeds that agree exactly (a constant guess, a coarse test set) never give p = 0. A test
accuracy lives on a grid of 1 / n_test: each cell's variance is raised to the grid's resolution
(1 / n_test)² / 12 (`resolution_floor`) and, on fewer than `FEW_DF` df, to the binomial variance p(1 − p) /
n_test of its grid's runs (`binomial_floor`), a conservative guard: on a fixed test set runs vary less than
binomially.

**Additivity** (no seed × cell interaction beyond noise) is assumed, as the seeds share only initialisation
streams and data order; a cell's variance absorbs any interaction of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

FEW_DF = 4  # a comparison on fewer df than this is floored at the binomial variance
# A cell needs this many other cells, with all of its seeds, to measure its variance against.
MIN_REFERENCE = 2
# Below this many seeds a cell borrows nothing from its grid (`moderate`).
MODERATED_SEEDS = 5

CellKey = tuple[str, str, str]  # (variant, scale, setting)
# A task's grids: its baseline and seven positions at h1 ("main"); positions run at several scales ("scale").
GRIDS = ("main", "scale")


@dataclass(frozen=True)
class CellNoise:
    """One cell's run-to-run variance about its grid's reference, moderated (`moderate`), on `df` degrees of
    freedom, measured against `reference` other cells; `own` and `own_df` are the cell's own estimate (floored
    at the resolution) before moderation."""

    variance: float
    df: float
    reference: int
    own: float
    own_df: int
    floored: bool = False


@dataclass(frozen=True)
class GridNoise:
    """The per-cell noise of one grid of one task: the cells whose variance could be measured, why the others
    could not (`reasons`), and the binomial floor of one run."""

    cells: Mapping[CellKey, CellNoise]
    reasons: Mapping[CellKey, str]
    floor: float


def binomial_floor(accuracy: float, n_test: float) -> float:
    """The variance of one accuracy over `n_test` examples: p(1 − p) / n (0 when n_test is unknown)."""
    if math.isnan(accuracy) or math.isnan(n_test) or n_test <= 0:
        return 0.0
    p = min(max(accuracy, 0.0), 1.0)
    return max(p * (1 - p), 1.0 / n_test) / n_test  # p ∈ {0, 1} still has a resolution of 1 / n_test


def resolution_floor(n_test: float) -> float:
    """The variance of one grid step of 1 / n_test, uniform: (1 / n_test)² / 12 (0 when unknown)."""
    return 0.0 if math.isnan(n_test) or n_test <= 0 else 1.0 / (12.0 * n_test**2)


def cell_noise(
    cells: Mapping[CellKey, Mapping[int, float]], key: CellKey, n_test: float = math.nan, floor: float = 0.0
) -> CellNoise | str:
    """The variance of cell `key` against the other cells of its grid (`cells`: per-seed values of the usable
    runs), before moderation, or the reason it has none. Floored at the resolution, and on fewer than
    `FEW_DF` df at `floor` (the binomial variance of one run)."""
    own = cells[key]
    seeds = sorted(own)
    if len(seeds) < 2:
        return f"{len(seeds)} usable seed(s)"
    reference = [values for other, values in cells.items() if other != key and set(seeds) <= set(values)]
    if len(reference) < MIN_REFERENCE:
        return f"{len(reference)} other cell(s) ran all of its seeds"
    level = np.array([[values[s] for s in seeds] for values in reference]).mean(axis=0)
    e = np.array([own[s] for s in seeds]) - level
    df = len(seeds) - 1
    lowest = max(resolution_floor(n_test), floor if df < FEW_DF else 0.0)
    raw = float(e.var(ddof=1))
    variance = max(raw, lowest)
    return CellNoise(variance, df, len(reference), variance, df, floored=raw < lowest)


def prior(cells: Mapping[CellKey, CellNoise]) -> tuple[float, float]:
    """(s0², d0): the scaled-inverse-χ² prior of the cells' variances fitted by the method of moments on their
    logarithms (limma's `fitFDist`, Smyth 2004): s0² the typical variance, d0 its weight in degrees of freedom
    (∞ when the variances spread no more than their own sampling does)."""
    from scipy import optimize, special

    s2 = np.array([c.own for c in cells.values()])
    d = np.array([c.own_df for c in cells.values()], dtype=float)
    e = np.log(s2) - special.digamma(d / 2) + np.log(d / 2)
    excess = float(e.var(ddof=1) - np.mean(special.polygamma(1, d / 2)))
    if excess <= 0:
        return float(np.exp(e.mean())), math.inf
    half = optimize.brentq(lambda x: special.polygamma(1, x) - excess, 1e-8, 1e8)
    d0 = 2 * half
    return float(np.exp(e.mean() + special.digamma(half) - math.log(half))), d0


def moderate(cells: Mapping[CellKey, CellNoise]) -> dict[CellKey, CellNoise]:
    """Each cell's variance moderated toward its grid's (empirical Bayes, Smyth 2004), as far as its own
    spread agrees with the grid's: the prior's weight for cell c is d0_c = min(d0, D_c) · min(1, 2 P_c)²,
    where D_c is the other cells' df (a grid cannot lend more than it has) and P_c the prior-predictive
    probability of a spread at least as large as c's (F(own df, d0)). A cell with a typical spread (P_c ≥ ½)
    borrows the full weight; a cell whose spread the grid makes surprising borrows little and keeps its own.
    Then v_c = (d0_c s0² + d_c s_c²) / (d0_c + d_c) on d0_c + d_c df. Nothing is borrowed below
    `MODERATED_SEEDS` seeds (a spread on 2 df cannot show whether its cell belongs to the grid) or with
    fewer than
    `MIN_REFERENCE` + 1 cells."""
    from scipy import stats

    # The prior is fitted on the cells that borrow, with a measured spread: not on a floor (a bound, not an
    # estimate), nor on a cell that lost seeds to a failure (its floored spread made the grid look uneven).
    lenders = {
        k: c for k, c in cells.items() if c.own > 0 and not c.floored and c.own_df >= MODERATED_SEEDS - 1
    }
    if len(lenders) <= MIN_REFERENCE:
        return dict(cells)
    s0, d0 = prior(lenders)
    total = sum(c.own_df for c in lenders.values())
    out = {}
    for key, c in cells.items():
        if c.own_df < MODERATED_SEEDS - 1:  # (a cell that lost a seed to a failure, or a small pilot)
            out[key] = c
            continue
        weight = min(d0, total - (c.own_df if key in lenders else 0))
        ratio = c.own / s0
        surprise = float(
            stats.f.sf(ratio, c.own_df, d0)
            if math.isfinite(d0)
            else stats.chi2.sf(ratio * c.own_df, c.own_df)
        )
        borrowed = weight * min(1.0, 2 * surprise) ** 2
        variance = (borrowed * s0 + c.own_df * c.own) / (borrowed + c.own_df)
        out[key] = CellNoise(variance, borrowed + c.own_df, c.reference, c.own, c.own_df, c.floored)
    return out


def assume(noise: GridNoise, variance: float) -> GridNoise:
    """The grid's noise if every cell's run had `variance` (for planning seeds: `pdelra.results.seeds`): each
    cell's estimate carries its reference's share, 1 / (reference cells), as a measured one does, and its df
    are what `moderate` gives cells whose spreads agree (d0 = ∞): all the lenders' df from 5 seeds on, its
    own below. No floor."""
    total = sum(c.own_df for c in noise.cells.values())
    cells = {}
    for key, c in noise.cells.items():
        v = variance * (1 + 1 / max(c.reference, 1))
        lends = c.own_df >= MODERATED_SEEDS - 1 and len(noise.cells) > MIN_REFERENCE
        cells[key] = CellNoise(v, total if lends else c.own_df, c.reference, v, c.own_df)
    return GridNoise(cells, noise.reasons, 0.0)


def grid_noise(cells: Mapping[CellKey, Mapping[int, float]], n_test: float) -> GridNoise:
    """Every cell's noise in one grid of one task (`cell_noise`, then `moderate`), and the grid's binomial
    floor of one run."""
    values = [v for per_seed in cells.values() for v in per_seed.values()]
    floor = binomial_floor(float(np.mean(values)) if values else math.nan, n_test)
    found: dict[CellKey, CellNoise] = {}
    reasons: dict[CellKey, str] = {}
    for key in cells:
        noise = cell_noise(cells, key, n_test, floor)
        if isinstance(noise, str):
            reasons[key] = noise
        else:
            found[key] = noise
    return GridNoise(moderate(found), reasons, floor)


def satterthwaite(shares: list[tuple[float, float]]) -> float:
    """Welch–Satterthwaite's degrees of freedom of a sum of independent variance estimates, each given as
    (its share of the sum, its df)."""
    total = sum(v for v, _ in shares)
    spread = sum(v * v / df for v, df in shares if df > 0)
    return total * total / spread if spread > 0 else math.nan
