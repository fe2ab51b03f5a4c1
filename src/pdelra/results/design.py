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

**The baseline keeps its own noise.** It enters every comparison of its task, so an error in its variance is
shared by all seven of them at once: a noisy baseline whose 4-df spread happens to look typical would
borrow a typical variance and take every comparison of its task too narrow together (measured: the Table 11
family-wise error 6.3 % with the baseline's sd 3× the others', at a nominal 5 %). So the baseline
(`keeps_own`) borrows nothing, at any number of seeds; it still lends to the others. Its comparisons carry its
own df through Welch–Satterthwaite.

**Cells beside the grid** (a config's own variants, a related system's variant run on the LRA: `attached`)
are measured the same way, against the grid's cells at the same seeds, and borrow from the grid's prior as
far as their spread agrees; they enter neither the other cells' references nor the prior, so adding them
changes no verdict of the paper's claims.

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
accuracy lives on a grid of 1 / n_test, so no spread below that grid's resolution can be measured: each
cell's variance is raised to (1 / n_test)² / 12 (`resolution_floor`), a true lower bound. The binomial
variance p(1 − p) / n_test is an upper bound for runs on a fixed test set (they vary less than binomially:
Table 15's 0.35–0.54 pp on ListOps against its binomial 1.09 pp), so it is no floor; it guards only a
spread on a single df (`FEW_DF`: two seeds), where one tie of the two seeds' values on a coarse test set
would decide a claim on no measured spread at all.

**Additivity** (no seed × cell interaction beyond noise) is assumed, as the seeds share only initialisation
streams and data order; a cell's variance absorbs any interaction of its own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

FEW_DF = 2  # a spread on fewer df than this (two seeds) is guarded by the binomial variance
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
    cells: Mapping[CellKey, Mapping[int, float]],
    key: CellKey,
    n_test: float = math.nan,
    floor: float = 0.0,
    own: Mapping[int, float] | None = None,
) -> CellNoise | str:
    """The variance of cell `key` against the other cells of its grid (`cells`: per-seed values of the usable
    runs), before moderation, or the reason it has none. `own`: the values of a cell beside the grid
    (`attached`), measured against all of `cells`. Floored at the resolution, and on fewer than `FEW_DF` df
    at `floor` (the binomial variance of one run)."""
    own = cells[key] if own is None else own
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


@dataclass(frozen=True)
class Prior:
    """What a grid lends (`moderate`): the prior (s0², d0) fitted on its lenders, their names and total df."""

    s0: float
    d0: float
    lenders: frozenset[CellKey]
    total: float


def lending(cells: Mapping[CellKey, CellNoise]) -> Prior | None:
    """The grid's prior, fitted on the cells that can lend: a measured spread on `MODERATED_SEEDS` seeds or
    more, not a floor (a bound, not an estimate), nor a cell that lost seeds to a failure (its floored spread
    made the grid look uneven); None with `MIN_REFERENCE` lenders or fewer."""
    lenders = {
        k: c for k, c in cells.items() if c.own > 0 and not c.floored and c.own_df >= MODERATED_SEEDS - 1
    }
    if len(lenders) <= MIN_REFERENCE:
        return None
    s0, d0 = prior(lenders)
    return Prior(s0, d0, frozenset(lenders), float(sum(c.own_df for c in lenders.values())))


def borrow(key: CellKey, c: CellNoise, grid: Prior) -> CellNoise:
    """Cell c's variance moderated toward the grid's prior as far as its spread agrees: the prior's weight
    d0_c = min(d0, D_c) · min(1, 2 P_c)², D_c the other lenders' df, P_c the prior-predictive probability of a
    spread at least as large as c's (F(own df, d0)); v_c = (d0_c s0² + d_c s_c²) / (d0_c + d_c) on
    d0_c + d_c df. Below `MODERATED_SEEDS` seeds the cell keeps its own."""
    from scipy import special  # F's and χ²'s survival functions, as scipy.stats.f.sf and chi2.sf call them

    if c.own_df < MODERATED_SEEDS - 1:  # (a cell that lost a seed to a failure, or a small pilot)
        return c
    weight = min(grid.d0, grid.total - (c.own_df if key in grid.lenders else 0))
    ratio = c.own / grid.s0
    surprise = float(
        special.fdtrc(c.own_df, grid.d0, ratio)
        if math.isfinite(grid.d0)
        else special.chdtrc(c.own_df, ratio * c.own_df)
    )
    borrowed = weight * min(1.0, 2 * surprise) ** 2
    variance = (borrowed * grid.s0 + c.own_df * c.own) / (borrowed + c.own_df)
    return CellNoise(variance, borrowed + c.own_df, c.reference, c.own, c.own_df, c.floored)


def moderate(
    cells: Mapping[CellKey, CellNoise], keeps_own: frozenset[CellKey] = frozenset()
) -> dict[CellKey, CellNoise]:
    """Each cell's variance moderated toward its grid's (empirical Bayes, Smyth 2004), as far as its own
    spread agrees with the grid's (`borrow`). Nothing is borrowed below `MODERATED_SEEDS` seeds (a spread on
    2 df cannot show whether its cell belongs to the grid), with `MIN_REFERENCE` lenders or fewer, nor by
    the cells of `keeps_own` (the baseline: it enters every comparison of its task), which still lend."""
    grid = lending(cells)
    if grid is None:
        return dict(cells)
    return {k: c if k in keeps_own else borrow(k, c, grid) for k, c in cells.items()}


def assume(noise: GridNoise, variance: float, keeps_own: frozenset[CellKey] = frozenset()) -> GridNoise:
    """The grid's noise if every cell's run had `variance` (for planning seeds: `pdelra.results.seeds`): each
    cell's estimate carries its reference's share, 1 / (reference cells), as a measured one does, and its df
    are those `moderate` gives on average to cells whose spreads truly agree (`expected_df`: the fitted d0 is
    finite in most grids and a spread that looks surprising borrows less), its own below 5 seeds and for
    the cells that keep their own (`keeps_own`). No floor."""
    lenders = [c for k, c in noise.cells.items() if c.own_df >= MODERATED_SEEDS - 1]
    cells = {}
    for key, c in noise.cells.items():
        v = variance * (1 + 1 / max(c.reference, 1))
        lends = c.own_df >= MODERATED_SEEDS - 1 and len(lenders) > MIN_REFERENCE and key not in keeps_own
        df = expected_df(len(lenders), c.own_df) if lends else c.own_df
        cells[key] = CellNoise(v, df, c.reference, v, c.own_df)
    return GridNoise(cells, noise.reasons, 0.0)


@functools.cache
def expected_df(lenders: int, own_df: int, draws: int = 400) -> float:
    """The df `moderate` gives, on average, a cell of a grid of `lenders` cells on `own_df` df each whose
    variances are all equal: the variance model itself run on simulated χ² spreads (fixed seed), so that the
    planned power uses the df the engine will use, not full borrowing."""
    rng = np.random.default_rng(20261207)
    keys = [(str(i), "h1", "base") for i in range(lenders)]
    found = []
    for _ in range(draws):
        spreads = rng.chisquare(own_df, lenders) / own_df
        cells = {
            k: CellNoise(float(v), own_df, lenders - 1, float(v), own_df)
            for k, v in zip(keys, spreads, strict=True)
        }
        found.append(moderate(cells)[keys[0]].df)
    return float(np.mean(found))


def grid_noise(
    cells: Mapping[CellKey, Mapping[int, float]],
    n_test: float,
    keeps_own: frozenset[CellKey] = frozenset(),
    attached: Mapping[CellKey, Mapping[int, float]] | None = None,
) -> GridNoise:
    """Every cell's noise in one grid of one task (`cell_noise`, then `moderate`; `keeps_own` borrow
    nothing), the cells beside it (`attached`: measured against the grid's cells, moderated by its prior,
    entering neither), and the grid's binomial floor of one run."""
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
    grid = lending(found)
    moderated = moderate(found, keeps_own)
    for key, own in (attached or {}).items():
        noise = cell_noise(cells, key, n_test, floor, own=own)
        if isinstance(noise, str):
            reasons[key] = noise
        else:
            moderated[key] = noise if grid is None else borrow(key, noise, grid)
    return GridNoise(moderated, reasons, floor)


def satterthwaite(shares: list[tuple[float, float]]) -> float:
    """Welch–Satterthwaite's degrees of freedom of a sum of independent variance estimates, each given as
    (its share of the sum, its df)."""
    total = sum(v for v, _ in shares)
    spread = sum(v * v / df for v, df in shares if df > 0)
    return total * total / spread if spread > 0 else math.nan
