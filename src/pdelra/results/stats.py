"""The statistics behind every verdict: scipy's tests, a p-value and an interval per comparison.

Every procedure here returns an `Estimate`: the effect, its 95 % interval, n, the method's name and the
two one-sided p-values of H0 "no effect" (`p_greater` for H1: effect > 0, `p_less` for H1: effect < 0).
Verdicts are decided from these p-values at `ALPHA` two-sided (2.5 % per direction), which is the same as
asking whether the 95 % interval excludes 0 — so the interval a reader sees and the decision agree.

Why t-based: with the paper's n = 5 seeds a percentile bootstrap has 126 distinct resamples and its
intervals under-cover (measured here: 5–7 % per direction where 2.5 % is nominal), and an exact sign-flip
test cannot reject at all (its smallest two-sided p-value is 2/2⁵ = 0.0625). The paired t-test is exact for
normal per-seed differences and close to nominal for the near-normal differences of seeds (the simulation
test of the paired t's interval coverage, tests/test_results_claims.py, measures it).
"""

from __future__ import annotations

import functools
import itertools
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
        return two_sided(min(self.p_greater, self.p_less))


def two_sided(p: float, factor: float = 2) -> float:
    """`factor` · p capped at 1 (a one-sided p on the two-sided scale, or a Bonferroni bound); NaN — no
    test — stays NaN (Python's min(1.0, nan) would return 1.0, a p-value no test gave)."""
    return math.nan if math.isnan(p) else min(1.0, factor * p)


def _clean(values: Sequence[float]) -> np.ndarray:
    x = np.asarray([float(v) for v in values], dtype=float)
    return x[~np.isnan(x)]


def one_sample(
    values: Sequence[float], null: float = 0.0, confidence: float = CONFIDENCE, variance_floor: float = 0.0
) -> Estimate:
    """Mean of `values` − `null` with the Student t-interval and test (scipy.stats.ttest_1samp).

    `variance_floor` is the smallest variance one value can have (for a test accuracy, the binomial
    variance of its test set: `pdelra.results.design`): the sample variance is raised to it, so seeds that
    agree exactly (a constant guess, a coarse test set) give a finite t, never p = 0. With no floor and no
    spread there is nothing to test against: the p-values are NaN (an inconclusive verdict)."""
    from scipy import stats

    x = _clean(values) - null
    n = len(x)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, "none (n = 0)")
    mean = float(x.mean())
    if n < 2:
        return Estimate(mean, math.nan, math.nan, n, "none (n < 2)")
    variance = float(x.var(ddof=1))
    if variance >= variance_floor and variance > 0:
        return _from_t(mean, stats.ttest_1samp(x, 0.0), n, "t", confidence)
    if variance_floor <= 0:  # every seed the same and no floor: a point, and no test
        return Estimate(mean, mean, mean, n, "t (no spread)", se=0.0, df=n - 1)
    return t_estimate(mean, math.sqrt(variance_floor / n), n - 1, n, "t (variance floored)", confidence)


def t_estimate(
    effect: float, se: float, df: float, n: int, method: str, confidence: float = CONFIDENCE
) -> Estimate:
    """An Estimate from an effect, its standard error and degrees of freedom (a t statistic built here, for
    designs scipy has no single call for: the pooled variance of `pdelra.results.design`). scipy.special's
    t distribution functions (what scipy.stats.t calls), for speed: simulations call this thousands of
    times."""
    from scipy import special

    if not (se > 0) or not (df > 0):
        return Estimate(effect, effect, effect, n, f"{method} (no spread)", se=0.0, df=df)
    t = effect / se
    half = float(special.stdtrit(df, 0.5 + confidence / 2)) * se
    p_less, p_greater = float(special.stdtr(df, t)), float(special.stdtr(df, -t))  # (1 − x underflows)
    return Estimate(effect, effect - half, effect + half, n, method, p_greater, p_less, se, df)


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


def paired(
    a: Mapping[int, float],
    b: Mapping[int, float],
    confidence: float = CONFIDENCE,
    variance_floor: float = 0.0,
) -> Estimate:
    """a − b over the seeds both have (scipy.stats.ttest_rel and its interval); Welch when < 2 are shared.

    The design pairs runs by seed (the same seed gives the same initialisation stream and data order), so a
    seed's difference removes what the seed shares.
    """
    shared = sorted(set(a) & set(b))
    if len(shared) >= 2:
        d = one_sample([a[s] - b[s] for s in shared], confidence=confidence, variance_floor=variance_floor)
        method = d.method.replace("t", "paired t", 1)
        return Estimate(d.effect, d.low, d.high, d.n, method, d.p_greater, d.p_less, d.se, d.df)
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
    if float(xa.std()) == 0.0 and float(xb.std()) == 0.0:  # no spread: no test (never p = 0)
        return Estimate(effect, effect, effect, n, "Welch t (no spread)", se=0.0, df=n - 1)
    return _from_t(effect, stats.ttest_ind(xa, xb, equal_var=False), n, "Welch t", confidence)


def equivalence(est: Estimate, margin: float) -> tuple[float, float]:
    """(p of "effect within ± margin", p of "effect outside ± margin"), both on the two-sided scale.

    TOST: the difference lies within ± margin when both one-sided tests against the margins reject, which
    at `ALPHA` is the 95 % interval lying inside ± margin. Outside: one one-sided test beyond a margin
    rejects, i.e. the interval lies entirely beyond it. Both use the estimate's own t statistic
    (from `paired`, `one_sample` or `welch`) shifted by the margin: its standard error and degrees of
    freedom (Welch's when unpaired).
    """
    from scipy.special import stdtr  # the t CDF, as in t_estimate (scipy.stats.t's, without its overhead)

    if est.n < 2 or math.isnan(est.low) or math.isnan(est.se):
        return math.nan, math.nan
    if est.se == 0:  # no spread and no floor: nothing to test against (never p = 0)
        return math.nan, math.nan
    t_low, t_high = (est.effect + margin) / est.se, (est.effect - margin) / est.se
    within = 2 * max(float(stdtr(est.df, -t_low)), float(stdtr(est.df, t_high)))
    outside = 2 * min(float(stdtr(est.df, t_low)), float(stdtr(est.df, -t_high)))
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


# A joint permutation of k labels is enumerated exactly up to this many permutations (8! = 40,320), else
# drawn at random (`resamples`).
EXACT_PERMUTATIONS = 40_320


@functools.cache
def _all_permutations(k: int) -> np.ndarray:
    """Every permutation of range(k), the identity first (itertools' order), as a (k!, k) array."""
    return np.array(list(itertools.permutations(range(k))))


def permutation_of_labels(
    x: Sequence[float],
    y: Sequence[float],
    strata: Sequence[object],
    labels: Sequence[object],
    resamples: int = 9999,
    seed: int = 0,
) -> tuple[float, float, float, int]:
    """(statistic, p_greater, p_less, permutations) of the association of x and y across `labels` (the
    positions), repeated in several strata (the tasks), where the null moves *labels*, not points.

    The statistic is the mean over strata of the within-stratum Spearman ρ of x and y (a difference between
    strata cannot make an association). Under the null the y-values of a label are exchangeable with those of
    another label, jointly in every stratum: one permutation π of the k labels sends y(stratum, ℓ) to
    y(stratum, π(ℓ)) in all strata at once. So effects that belong to a position and recur in every task
    (the gain and the predictor both properties of the position) count as k points, not as k × strata:
    shuffling within each stratum independently would treat the strata as independent copies and is
    anti-conservative (measured: 18.7 % false "reproduced" at a nominal 2.5 %). With k ≤ 8 labels every
    permutation is enumerated (7! = 5,040: exact p-values, the smallest 1/k!); beyond that `resamples`
    random ones. A stratum needs 3 labels with both values for a ρ; labels missing in a stratum stay out of
    that stratum's ρ for every permutation.
    """
    from scipy.stats import rankdata

    xs, ys = np.asarray(x, float), np.asarray(y, float)
    groups = list(dict.fromkeys(strata))
    names = list(dict.fromkeys(labels))
    k = len(names)
    if k < 3:
        return math.nan, math.nan, math.nan, 0
    X = np.full((len(groups), k), np.nan)
    Y = np.full((len(groups), k), np.nan)
    g_index = {g: i for i, g in enumerate(groups)}
    l_index = {name: j for j, name in enumerate(names)}
    for xi, yi, g, name in zip(xs, ys, strata, labels, strict=True):
        X[g_index[g], l_index[name]] = xi
        Y[g_index[g], l_index[name]] = yi
    exact = math.factorial(k) <= EXACT_PERMUTATIONS
    if exact:
        perms = _all_permutations(k)
    else:
        rng = np.random.default_rng(seed)
        perms = np.vstack([np.arange(k), np.array([rng.permutation(k) for _ in range(resamples)])])
    statistics = np.zeros(len(perms))
    used = np.zeros(len(perms))
    for s in range(len(groups)):
        if not (np.isnan(X[s]).any() or np.isnan(Y[s]).any()):
            # Every label present: the ranks of permuted values are the permuted ranks, one product.
            rx, ry = rankdata(X[s]) - (k + 1) / 2, rankdata(Y[s]) - (k + 1) / 2
            denominator = math.sqrt(float(rx @ rx) * float(ry @ ry))
            if denominator > 0:
                statistics += ry[perms] @ rx / denominator
                used += 1
            continue
        yp = Y[s][perms]  # (permutations, k): the y of label π(ℓ) at label ℓ
        xp = np.broadcast_to(X[s], yp.shape).copy()
        valid = ~(np.isnan(xp) | np.isnan(yp))
        xp[~valid], yp[~valid] = np.nan, np.nan
        rx = rankdata(xp, axis=1, nan_policy="omit")
        ry = rankdata(yp, axis=1, nan_policy="omit")
        rx = rx - np.nanmean(rx, axis=1, keepdims=True)
        ry = ry - np.nanmean(ry, axis=1, keepdims=True)
        denominator = np.sqrt(np.nansum(rx**2, axis=1) * np.nansum(ry**2, axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.nansum(rx * ry, axis=1) / denominator
        ok = (valid.sum(axis=1) >= 3) & (denominator > 0)
        statistics += np.where(ok, rho, 0.0)
        used += ok
    if not used[0]:
        return math.nan, math.nan, math.nan, 0
    null = statistics / np.maximum(used, 1)
    observed = float(null[0])  # the identity permutation comes first
    tol = 1e-12
    if exact:
        p_greater = float(np.mean(null >= observed - tol))
        p_less = float(np.mean(null <= observed + tol))
    else:  # the identity plus `resamples` random permutations: (k + 1) / (resamples + 1)
        p_greater = float(np.sum(null >= observed - tol) / len(null))
        p_less = float(np.sum(null <= observed + tol) / len(null))
    return observed, p_greater, p_less, len(perms)
