"""What would decide a claim: power, the detectable effect and the seeds needed, for the t-based tests of
`pdelra.results.claims`.

Every claim's test is a t statistic, effect / se, with se = sd₁ / √n (sd₁: the spread of one seed's value
of the effect: `pdelra.results.design`) and df degrees of freedom that grow with the seeds
(`DegreesOfFreedom`). At a two-sided level `level` (the claim's own: 5 % for a lone claim, the Holm step's
α / (m − k + 1) inside a family):

- a directional claim is decided when t > t₁₋ₗₑᵥₑₗ/₂(df) on the paper's side; its power at a true effect δ
  is the noncentral t probability P(T(df, δ/se) > t₁₋ₗₑᵥₑₗ/₂) (scipy.stats.nct);
- a no-difference claim (TOST within ± margin around the centre it tests) is decided when both one-sided
  tests reject; its power at a true distance δ from the centre is P(−m + c·se < δ̂ < m − c·se), computed
  with the t distribution of the estimate (the spread's own uncertainty is ignored there: a close
  approximation at the df of the pooled design, optimistic by a few points at df = 2);
- `detectable_effect` is the true effect with 80 % power (`TARGET_POWER`), found by root search on the
  same power function, and `seeds_needed` the smallest n with 80 % power at the paper's effect.

The distributions are scipy.special's ufuncs (stdtr, stdtrit, nctdtr: the same functions scipy.stats'
t and nct call), without the frozen-distribution overhead: a claims table asks for some thousand values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pdelra.results.design import MODERATED_SEEDS

TARGET_POWER = 0.8
MAX_SEEDS = 200  # seeds_needed searches up to this many; beyond, NaN ("more than 200")


@dataclass(frozen=True)
class DegreesOfFreedom:
    """df as a function of the seeds n: `per_seed` · (n − 1) (a paired t: 1; two cells' own variances: about
    2; moderated toward their grid, more: `pdelra.results.design`). `alone`, where given, is the per-seed df
    without moderation, which applies below `MODERATED_SEEDS` seeds."""

    per_seed: float
    alone: float | None = None

    def at(self, n: int) -> float:
        if self.alone is not None and n < MODERATED_SEEDS:
            return self.alone * (n - 1)
        return self.per_seed * (n - 1)


def power_directional(delta: float, se: float, df: float, level: float) -> float:
    """P(the claim is decided on δ's side | true effect δ): one side of a two-sided test at `level`."""
    from scipy import special

    if any(math.isnan(v) for v in (delta, se, df, level)) or se <= 0 or df <= 0:
        return math.nan
    critical = float(special.stdtrit(df, 1 - level / 2))
    return float(1.0 - special.nctdtr(df, abs(delta) / se, critical))


def power_equivalence(distance: float, se: float, df: float, level: float, margin: float) -> float:
    """P(TOST decides "within ± margin" | the true effect lies `distance` from the tested centre)."""
    from scipy import special

    if any(math.isnan(v) for v in (distance, se, df, level, margin)) or se <= 0 or df <= 0:
        return math.nan
    reach = margin - float(special.stdtrit(df, 1 - level / 2)) * se  # |δ̂| must stay below this
    if reach <= 0:
        return 0.0
    inside = special.stdtr(df, (reach - distance) / se) - special.stdtr(df, (-reach - distance) / se)
    return float(max(0.0, inside))


def power(
    effect: float, sd1: float, n: int, dof: DegreesOfFreedom, level: float, margin: float | None = None
) -> float:
    """Power at `n` seeds: directional when `margin` is None, else TOST (effect = distance from the
    centre of the equivalence interval)."""
    if n < 2:
        return math.nan
    se = sd1 / math.sqrt(n)
    if margin is None:
        return power_directional(effect, se, dof.at(n), level)
    return power_equivalence(effect, se, dof.at(n), level, margin)


def detectable_effect(sd1: float, n: int, dof: DegreesOfFreedom, level: float) -> float:
    """The smallest true effect a directional test decides with `TARGET_POWER` at `n` seeds."""
    from scipy.optimize import brentq

    if n < 2 or math.isnan(sd1) or sd1 <= 0 or dof.at(n) <= 0:
        return math.nan
    se = sd1 / math.sqrt(n)
    upper = se
    while power_directional(upper, se, dof.at(n), level) < TARGET_POWER:
        upper *= 2
    return float(brentq(lambda d: power_directional(d, se, dof.at(n), level) - TARGET_POWER, 0.0, upper))


def seeds_needed(
    effect: float, sd1: float, dof: DegreesOfFreedom, level: float, margin: float | None = None
) -> float:
    """The fewest seeds (≥ 2) with `TARGET_POWER` at `effect`; NaN when more than `MAX_SEEDS` would be
    needed or nothing is known (no effect to aim at, no spread)."""
    if any(math.isnan(v) for v in (effect, sd1, level)) or sd1 <= 0:
        return math.nan
    if margin is None and effect == 0:
        return math.nan
    if power(effect, sd1, MAX_SEEDS, dof, level, margin) < TARGET_POWER:
        return math.nan
    low, high = 2, MAX_SEEDS  # power rises with n: bisect for the first n that reaches the target
    if power(effect, sd1, low, dof, level, margin) >= TARGET_POWER:
        return float(low)
    while high - low > 1:
        mid = (low + high) // 2
        if power(effect, sd1, mid, dof, level, margin) >= TARGET_POWER:
            high = mid
        else:
            low = mid
    return float(high)


def power_all(
    effects: Sequence[float],
    sd1s: Sequence[float],
    n: int,
    dofs: Sequence[DegreesOfFreedom],
    level: float,
    correlation: Sequence[Sequence[float]],
) -> float:
    """P(every comparison is decided on its effect's side): an intersection–union claim ('best', an order).
    The comparisons share cells, so their statistics are correlated (`correlation`: +½ for two differences
    with the same first cell, as a 'best' claim's; −½ where one's first cell is the other's second): the
    joint probability is the multivariate normal orthant P(Zᵢ > cᵢ − δᵢ/seᵢ for all i) (scipy's
    multivariate_normal.cdf), with each cᵢ its t critical value. Treating the statistics as normal and the
    critical values as fixed is close at the pooled design's df, optimistic at a paired test's 2–4."""
    from scipy import special
    from scipy.stats import multivariate_normal

    if n < 2 or any(math.isnan(v) for v in (*effects, *sd1s)) or any(sd <= 0 for sd in sd1s):
        return math.nan
    if len(effects) == 1:
        return power(effects[0], sd1s[0], n, dofs[0], level)
    upper = [
        abs(d) / (sd / math.sqrt(n)) - float(special.stdtrit(dof.at(n), 1 - level / 2))
        for d, sd, dof in zip(effects, sd1s, dofs, strict=True)
    ]
    # A power to 3 decimals is all a reader needs; scipy's default tolerance (1e-5) costs up to 0.1 s a claim.
    # Its quasi-Monte Carlo points are seeded, so the same runs give the same table.
    joint = multivariate_normal(
        mean=[0.0] * len(upper), cov=correlation, allow_singular=True, seed=0, abseps=1e-3, releps=1e-3
    )
    return float(joint.cdf(upper))


def seeds_needed_all(
    effects: Sequence[float],
    sd1s: Sequence[float],
    dofs: Sequence[DegreesOfFreedom],
    level: float,
    correlation: Sequence[Sequence[float]],
) -> float:
    """The fewest seeds with `TARGET_POWER` for every comparison at once (`power_all`); NaN beyond
    `MAX_SEEDS`. Each comparison alone needs no more, so the search starts at the largest of those."""
    singles = [seeds_needed(d, sd, dof, level) for d, sd, dof in zip(effects, sd1s, dofs, strict=True)]
    if not singles or any(math.isnan(s) for s in singles):
        return math.nan

    def enough(n: int) -> bool:
        return power_all(effects, sd1s, n, dofs, level, correlation) >= TARGET_POWER

    # Power rises with n, and the answer is mostly within a few seeds of the largest single: step up in
    # doubling strides from there, then bisect the last stride (each joint power is a multivariate normal
    # CDF, the table's costliest number).
    low = int(max(singles))
    if enough(low):
        return float(low)
    stride = 1
    while True:
        high = min(low + stride, MAX_SEEDS)
        if enough(high):
            break
        if high == MAX_SEEDS:
            return math.nan
        low, stride = high, 2 * stride
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return float(high)


def claim_power(
    terms: Sequence[tuple[float, float, DegreesOfFreedom]],
    correlation: Sequence[Sequence[float]] | None,
    margin: float,
    n: int,
    level: float,
) -> tuple[float, float]:
    """(power at `n` seeds, seeds for 80 %) of one claim from its comparisons `terms` (effect aimed at, sd of
    one seed's value, df per seed), which must all succeed (`power_all`; `correlation` through shared
    cells, independent without it), or, with a `margin` (not NaN), of its TOST with the truth at the centre
    of the interval. The one computation behind the claims table's power columns and `pdelra plan --power`."""
    if not math.isnan(margin):
        _, sd, dof = terms[0]
        return (
            power(0.0, sd, n, dof, level, margin),
            seeds_needed(0.0, sd, dof, level, margin),
        )
    effects, sds = [t[0] for t in terms], [t[1] for t in terms]
    dofs = [t[2] for t in terms]
    if correlation is None or len(correlation) != len(terms):
        correlation = [[float(i == j) for j in range(len(terms))] for i in range(len(terms))]
    return power_all(effects, sds, n, dofs, level, correlation), seeds_needed_all(
        effects, sds, dofs, level, correlation
    )
