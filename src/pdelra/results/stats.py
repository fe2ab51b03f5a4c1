"""The statistics behind every verdict: scipy's tests, a p-value and an interval per comparison.

Every procedure here returns an `Estimate`: the effect, its 95 % interval, n, the method's name and the
two one-sided p-values of H0 "no effect" (`p_greater` for H1: effect > 0, `p_less` for H1: effect < 0).
Verdicts are decided from these p-values at `ALPHA` two-sided (2.5 % per direction), which is the same as
asking whether the 95 % interval excludes 0 — so the interval a reader sees and the decision agree.

Why t-based: with the paper's n = 5 seeds a percentile bootstrap has 126 distinct resamples and its
intervals under-cover (measured here: 5–7 % per direction where 2.5 % is nominal), and an exact sign-flip
test cannot reject at all (its smallest two-sided p-value is 2/2⁵ = 0.0625). The paired t-test is exact for
normal per-seed differences and close to nominal for the near-normal differences of seeds (the simulation
tests in tests/test_results_stats.py measure it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE  # two-sided level of every test; 2.5 % per direction


@dataclass(frozen=True)
class Estimate:
    """An effect with its interval and one-sided p-values; NaNs where n is too small for a test."""

    effect: float
    low: float
    high: float
    n: int
    method: str
    p_greater: float = math.nan  # H0: effect ≤ 0 against H1: effect > 0
    p_less: float = math.nan  # H0: effect ≥ 0 against H1: effect < 0
    se: float = math.nan  # the test's standard error and degrees of freedom (for tests against margins)
    df: float = math.nan

    @property
    def p_two_sided(self) -> float:
        if math.isnan(self.p_greater) or math.isnan(self.p_less):
            return math.nan
        return min(1.0, 2 * min(self.p_greater, self.p_less))


def _clean(values: Sequence[float]) -> np.ndarray:
    x = np.asarray([float(v) for v in values], dtype=float)
    return x[~np.isnan(x)]


def one_sample(values: Sequence[float], null: float = 0.0, confidence: float = CONFIDENCE) -> Estimate:
    """Mean of `values` − `null` with the Student t-interval and test (scipy.stats.ttest_1samp)."""
    from scipy import stats

    x = _clean(values) - null
    n = len(x)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, "none (n = 0)")
    mean = float(x.mean())
    if n < 2:
        return Estimate(mean, math.nan, math.nan, n, "none (n < 2)")
    if float(x.std()) == 0.0:  # every seed the same: no spread to test against; a point interval
        return Estimate(
            mean, mean, mean, n, "t (no spread)", float(mean <= 0), float(mean >= 0)
        )  # fmt: skip
    return _from_t(mean, stats.ttest_1samp(x, 0.0), n, "t", confidence)


def _from_t(effect: float, result: object, n: int, method: str, confidence: float) -> Estimate:
    """An Estimate from one scipy t-test result (two-sided): its interval, both one-sided p-values from
    its statistic and degrees of freedom (one test call instead of three), and its standard error."""
    from scipy import stats

    t, df = float(result.statistic), float(result.df)  # type: ignore[attr-defined]
    ci = result.confidence_interval(confidence)  # type: ignore[attr-defined]
    se = (float(ci.high) - float(ci.low)) / (2 * float(stats.t.ppf(0.5 + confidence / 2, df)))
    return Estimate(
        effect,
        float(ci.low),
        float(ci.high),
        n,
        method,
        float(stats.t.sf(t, df)),
        float(stats.t.cdf(t, df)),
        se,
        df,
    )


def paired(a: Mapping[int, float], b: Mapping[int, float], confidence: float = CONFIDENCE) -> Estimate:
    """a − b over the seeds both have (scipy.stats.ttest_rel and its interval); Welch when < 2 are shared.

    The design pairs runs by seed (the same seed gives the same initialisation stream and data order), so a
    seed's difference removes what the seed shares.
    """
    shared = sorted(set(a) & set(b))
    if len(shared) >= 2:
        d = one_sample([a[s] - b[s] for s in shared], confidence=confidence)
        return Estimate(d.effect, d.low, d.high, d.n, "paired t", d.p_greater, d.p_less)
    return welch(list(a.values()), list(b.values()), confidence)


def welch(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """mean(a) − mean(b), unpaired, unequal variances (scipy.stats.ttest_ind(equal_var=False))."""
    from scipy import stats

    xa, xb = _clean(a), _clean(b)
    if not len(xa) or not len(xb):
        return Estimate(math.nan, math.nan, math.nan, 0, "none (n = 0)")
    effect = float(xa.mean() - xb.mean())
    n = min(len(xa), len(xb))
    if len(xa) < 2 or len(xb) < 2:
        return Estimate(effect, math.nan, math.nan, n, "none (n < 2)")
    if float(xa.std()) == 0.0 and float(xb.std()) == 0.0:
        return Estimate(
            effect, effect, effect, n, "Welch t (no spread)", float(effect <= 0), float(effect >= 0)
        )
    return _from_t(effect, stats.ttest_ind(xa, xb, equal_var=False), n, "Welch t", confidence)


def equivalence(est: Estimate, margin: float) -> tuple[float, float]:
    """(p of "effect within ± margin", p of "effect outside ± margin"), both on the two-sided scale.

    TOST: the difference lies within ± margin when both one-sided tests against the margins reject, which
    at `ALPHA` is the 95 % interval lying inside ± margin. Outside: one one-sided test beyond a margin
    rejects, i.e. the interval lies entirely beyond it. Both use the estimate's own t statistic
    (from `paired`, `one_sample` or `welch`) shifted by the margin: its standard error and degrees of
    freedom (Welch's when unpaired).
    """
    from scipy import stats

    if est.n < 2 or math.isnan(est.low):
        return math.nan, math.nan
    if not est.se > 0:  # no spread: the point interval is inside or outside
        inside = abs(est.effect) <= margin
        return (0.0, 1.0) if inside else (1.0, 0.0)
    t_low, t_high = (est.effect + margin) / est.se, (est.effect - margin) / est.se
    within = 2 * max(float(stats.t.sf(t_low, est.df)), float(stats.t.cdf(t_high, est.df)))
    outside = 2 * min(float(stats.t.cdf(t_low, est.df)), float(stats.t.sf(t_high, est.df)))
    return min(1.0, within), min(1.0, outside)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error ≤ α under any dependence); NaN stays NaN.

    scipy has Benjamini–Hochberg (`false_discovery_control`) but not Holm; this is its textbook form:
    sort ascending, multiply the k-th smallest by (m − k + 1), make the sequence non-decreasing, cap at 1.
    """
    p = np.asarray(p_values, dtype=float)
    valid = np.flatnonzero(~np.isnan(p))
    adjusted = np.full(len(p), np.nan)
    m = len(valid)
    if not m:
        return adjusted.tolist()
    order = valid[np.argsort(p[valid], kind="stable")]
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def permutation_within_strata(
    x: Sequence[float], y: Sequence[float], strata: Sequence[object], resamples: int = 9999, seed: int = 0
) -> tuple[float, float, float]:
    """(statistic, p_greater, p_less) of the association of x and y pooled across strata, where the null
    distribution shuffles y only inside each stratum (scipy.stats.permutation_test cannot stratify).

    The statistic is the mean over strata of the within-stratum rank correlation (Spearman), so a
    difference between strata — one task's larger values and lower gains — cannot make an association.
    Strata with fewer than 3 points carry no within-stratum information and are left out. The p-values
    count the observed statistic among the permutations ((k + 1) / (resamples + 1)), exact in level. The
    resamples of a stratum are drawn as one matrix (a shuffle keeps the ranks' mean and spread), not a loop.
    """
    from scipy.stats import rankdata

    xs, ys, groups = np.asarray(x, float), np.asarray(y, float), np.asarray(strata, dtype=object)
    keep = ~(np.isnan(xs) | np.isnan(ys))
    xs, ys, groups = xs[keep], ys[keep], groups[keep]
    rng = np.random.default_rng(seed)
    observed, null, used = 0.0, np.zeros(resamples), 0
    for g in dict.fromkeys(groups.tolist()):
        idx = np.flatnonzero(groups == g)
        if len(idx) < 3:
            continue
        zx, zy = (rankdata(v[idx]) for v in (xs, ys))
        zx, zy = ((v - v.mean()) / (v.std() or 1.0) for v in (zx, zy))
        observed += float(zx @ zy) / len(idx)
        null += rng.permuted(np.tile(zy, (resamples, 1)), axis=1) @ zx / len(idx)
        used += 1
    if not used:
        return math.nan, math.nan, math.nan
    observed, null = observed / used, null / used
    tol = 1e-12
    p_greater = (np.sum(null >= observed - tol) + 1) / (resamples + 1)
    p_less = (np.sum(null <= observed + tol) + 1) / (resamples + 1)
    return observed, float(p_greater), float(p_less)
