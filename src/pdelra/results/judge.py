"""Judging one claim (the method section of `pdelra.results.claims`): its estimate, interval, unadjusted
verdict, p-values and the terms its power columns come from; a claim of a cell with failed runs is judged
twice."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pdelra.results import stats
from pdelra.results.claim_types import (
    ACCURACY,
    COST_UNIT,
    PAIR_ORDER_UNIT,
    Best,
    Claim,
    Difference,
    PairOrder,
    _claim_cells,
)
from pdelra.results.compare import (
    Comparison,
    _excluded,
    compare,
)
from pdelra.results.run_index import (
    RunIndex,
    _isnan,
)
from pdelra.results.stats import ALPHA

if TYPE_CHECKING:
    pass


# ----------------------------------------------------------------------------------------------------
# Judging one claim
# ----------------------------------------------------------------------------------------------------
def _centred(est: stats.Estimate, centre: float) -> stats.Estimate:
    """The estimate's distance from `centre` (a no-difference claim is judged around the paper's value)."""
    return stats.Estimate(
        est.effect - centre, est.low - centre, est.high - centre, est.n, est.method,
        est.p_greater, est.p_less, est.se, est.df,
    )  # fmt: skip


def _both_ways(est: stats.Estimate, expected: int, margin: float, centre: float = 0.0) -> tuple[float, float]:
    """(p of "reproduced", p of "contradicted"), each on the two-sided scale: the t-test towards the paper's
    side and away from it for a direction; TOST within centre ± margin, and the test of lying beyond it, for a
    no-difference claim (expected 0)."""
    if expected != 0:
        towards, away = (est.p_greater, est.p_less) if expected > 0 else (est.p_less, est.p_greater)
        return stats.two_sided(towards), stats.two_sided(away)
    return stats.equivalence(_centred(est, centre), margin)


def _verdict(p_reproduced: float, p_contradicted: float) -> tuple[float, str]:
    """(p-value, unadjusted word) from the two tests: the one below `ALPHA` decides (they exclude each other);
    undecided, the smaller p, both ≥ `ALPHA`; NaN (no test) is inconclusive."""
    if p_reproduced < ALPHA:
        return p_reproduced, "reproduced"
    if p_contradicted < ALPHA:
        return p_contradicted, "contradicted"
    if math.isnan(p_reproduced) or math.isnan(p_contradicted):
        return math.nan, "inconclusive"
    return min(p_reproduced, p_contradicted), "inconclusive"


def _judged(
    est: stats.Estimate, expected: int, margin: float, method: str, centre: float = 0.0
) -> dict[str, Any]:
    """A claim row's estimate, interval, n, unadjusted word, p-values and method (with its TOST margin for a
    no-difference claim)."""
    p_reproduced, p_contradicted = _both_ways(est, expected, margin, centre)
    p_value, word = _verdict(p_reproduced, p_contradicted)
    if expected == 0:
        around = f" of the paper's {centre:+.4g}" if centre else ""
        method = f"{method}, TOST within ±{margin:.3g}{around}"
    return {
        "effect": est.effect,
        "ci_low": est.low,
        "ci_high": est.high,
        "n": est.n,
        "verdict_unadjusted": word,
        "p_value": p_value,
        "method": method,
        "_p": (p_reproduced, p_contradicted),
    }


def size_word(paper_effect: float, low: float, high: float) -> str:
    """`as claimed` / `smaller than claimed` / `larger than claimed` (in magnitude) / `opposite sign` from
    our interval."""
    if any(_isnan(x) for x in (paper_effect, low, high)):
        return ""
    if low <= paper_effect <= high:
        return "as claimed"
    if (paper_effect > 0 and high < 0) or (paper_effect < 0 and low > 0):
        return "opposite sign"
    below = high < paper_effect  # our whole interval lies below the paper's value
    if paper_effect > 0:
        return "smaller than claimed" if below else "larger than claimed"
    if paper_effect < 0:
        return "larger than claimed" if below else "smaller than claimed"
    return "larger than claimed"


def _row(claim: Claim, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "claim_id": claim.claim_id,
        "claim": claim.claim,
        "source": claim.source,
        "family": claim.family,
        "kind": claim.kind,
        "unit": PAIR_ORDER_UNIT if isinstance(claim, PairOrder) else claim.metric.unit,
        "paper_effect": claim.paper_effect,
        "effect": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "n": 0,
        "verdict_unadjusted": "not run",
        "p_value": math.nan,
        "method": "",
        "n_excluded": 0,
        "detail": "",
        "_p": (math.nan, math.nan),  # (p of "reproduced", p of "contradicted"): for the failed-runs rule
    }
    row.update(values)
    return row


def _not_run(claim: Claim, parts: Sequence[Comparison], excluded: int) -> dict[str, Any] | None:
    missing = [m for c in parts for m in c.missing]
    if not missing:
        return None
    return _row(claim, n_excluded=excluded, detail="no run: " + "; ".join(dict.fromkeys(missing)))


def _excluded_note(excluded: int) -> str:
    return (
        f"{excluded} run(s) not completed (failed, or diverged outside an accuracy claim) left out"
        if excluded
        else ""
    )


def _join(*parts: str) -> str:
    return "; ".join(dict.fromkeys(p for p in parts if p))


def _few_seeds_note(est: stats.Estimate) -> str:
    return f"only {est.n} usable seed(s): no test below 2" if est.n < 2 else ""


def _mixed_devices(claim: Claim, parts: Sequence[Comparison]) -> str:
    """Cost claims compare runs of one device type: the note when they do not."""
    devices = set().union(*(c.devices for c in parts))
    if claim.metric.unit != COST_UNIT or len(devices) <= 1:
        return ""
    return f"step times from different devices ({', '.join(sorted(devices))}) are not comparable"


def judge_difference(claim: Difference, index: RunIndex) -> dict[str, Any]:
    comparison = compare(index, claim.a, claim.b, claim.metric)
    excluded = _excluded(index, [claim.a, claim.b], claim.metric)
    if (row := _not_run(claim, [comparison], excluded)) is not None:
        return row
    est = comparison.est
    margin = claim.margin
    if claim.relative_margin is not None:  # perplexity: a margin relative to our own reference level
        margin = claim.relative_margin * abs(comparison.reference)
    centre = 0.0 if _isnan(claim.paper_effect) or claim.expected != 0 else claim.paper_effect
    judged = _judged(est, claim.expected, margin, est.method, centre)
    mixed = _mixed_devices(claim, [comparison])
    if mixed:
        judged |= {"verdict_unadjusted": "inconclusive", "p_value": math.nan, "_p": (math.nan, math.nan)}
    gap = claim.paper_effect if claim.expected != 0 else 0.0
    return _row(
        claim,
        **judged,
        n_excluded=excluded,
        detail=_join(mixed, _few_seeds_note(est), *comparison.notes, _excluded_note(excluded)),
        _margin=margin if claim.expected == 0 else math.nan,
        _terms=[(gap, comparison.sd1, comparison.dof)],  # for `adjust`'s power columns
    )


def judge_best(claim: Best, index: RunIndex) -> dict[str, Any]:
    """Intersection–union test for `reproduced`; Bonferroni over the k comparisons for `contradicted`.
    The effect and interval shown are those of the closest competitor (the smallest mean margin; ties go
    to the competitor listed first)."""
    # Orient every comparison so that > 0 favours the claim (higher is better, unless the metric is a cost;
    # `lowest` turns it round once more).
    sign = (1.0 if claim.metric.higher_is_better else -1.0) * (-1.0 if claim.lowest else 1.0)
    comparisons = [(cells, compare(index, claim.target, cells, claim.metric, sign)) for cells in claim.others]
    excluded = _excluded(index, [claim.target, *claim.others], claim.metric)
    if (row := _not_run(claim, [c for _, c in comparisons], excluded)) is not None:
        return row
    k = len(comparisons)
    closest_cells, closest = min(
        comparisons, key=lambda c: round(c[1].est.effect, 12) if not math.isnan(c[1].est.effect) else math.inf
    )
    ests = [c.est for _, c in comparisons]
    p_all = [stats.two_sided(e.p_greater) for e in ests]  # each on the two-sided scale
    p_any = [stats.two_sided(e.p_less) for e in ests]
    if any(math.isnan(p) for p in p_all):
        p_reproduced = p_contradicted = math.nan
    else:
        p_reproduced = max(p_all)  # IUT: the largest p decides
        p_contradicted = stats.two_sided(min(p_any), k)  # Bonferroni: some other is better
    p_value, word = _verdict(p_reproduced, p_contradicted)
    better = [c.label() for c, comp in comparisons if comp.est.effect < 0]
    notes = [n for _, c in comparisons for n in c.notes]
    est = closest.est
    return _row(
        claim,
        effect=sign * est.effect,
        ci_low=min(sign * est.low, sign * est.high),
        ci_high=max(sign * est.low, sign * est.high),
        n=min(e.n for e in ests),
        verdict_unadjusted=word,
        p_value=p_value,
        _p=(p_reproduced, p_contradicted),
        method=f"{est.method} per pair, intersection–union over {k} (Bonferroni ×{k} for contradicted)",
        n_excluded=excluded,
        detail=_join(
            f"closest: {closest_cells.label()}",
            f"{'below' if claim.lowest else 'better than'} the target on average: {', '.join(better)}"
            if better
            else "",
            _few_seeds_note(est),
            *notes,
            _excluded_note(excluded),
        ),
        _terms=[(gap, c.sd1, c.dof) for gap, (_, c) in zip(claim.paper_gaps(), comparisons, strict=True)],
        _correlation=shared_cell_correlation([(0, i + 1) for i in range(k)]),
    )


def judge_pair_order(claim: PairOrder, index: RunIndex) -> dict[str, Any]:
    """The order at the resolution the data supports: only the *separable* pairs (a paper gap beyond the
    claim's margin) are tested. `reproduced` when every one of them is significantly in the paper's order (an
    intersection–union test, no correction needed), `contradicted` when one of them is significantly reversed
    (Bonferroni over the separable pairs). A pair whose paper gap lies within the margin is left out of the
    verdict, as the claim's words say; its reversal is shown in the detail, not judged."""
    sign = 1.0 if claim.metric.higher_is_better else -1.0
    cells = claim.cells
    pairs = [(i, j) for i in range(len(cells)) for j in range(i + 1, len(cells))]
    comparisons = [compare(index, cells[i], cells[j], claim.metric, sign) for i, j in pairs]
    excluded = _excluded(index, cells, claim.metric)
    if (row := _not_run(claim, comparisons, excluded)) is not None:
        return row
    margin = claim.margin_for(comparisons[0].reference)
    separable = [abs(claim.paper_values[i] - claim.paper_values[j]) > margin for i, j in pairs]
    m = sum(separable)
    ests = [c.est for c in comparisons]
    method = (
        f"{ests[0].method} per pair; intersection–union over the {m} separable pairs, "
        f"Bonferroni ×{m} for a reversal"
    )
    notes = [n for c in comparisons for n in c.notes]
    if any(math.isnan(e.p_greater) for e in ests):
        return _row(
            claim,
            n=min(e.n for e in ests),
            verdict_unadjusted="inconclusive",
            method=method,
            n_excluded=excluded,
            detail=_join("fewer than 2 usable seeds in some cell", *notes, _excluded_note(excluded)),
        )
    p_order = [stats.two_sided(e.p_greater) for e in ests]
    p_reversed = [stats.two_sided(e.p_less, 2 * max(m, 1)) for e in ests]
    in_order = [s and p < ALPHA for s, p in zip(separable, p_order, strict=True)]

    def named(keep: bool) -> list[str]:
        return [
            f"{cells[j].label()} > {cells[i].label()}"
            for (i, j), p, s in zip(pairs, p_reversed, separable, strict=True)
            if p < ALPHA and s == keep
        ]

    reversed_, close_reversed = named(True), named(False)
    p_reproduced = max((p for s, p in zip(separable, p_order, strict=True) if s), default=math.nan)
    p_contradicted = min((p for s, p in zip(separable, p_reversed, strict=True) if s), default=math.nan)
    p_value, word = _verdict(p_reproduced, p_contradicted)
    close = [
        f"{cells[i].label()}–{cells[j].label()}" for (i, j), s in zip(pairs, separable, strict=True) if not s
    ]
    return _row(
        claim,
        effect=(sum(in_order) - len(reversed_)) / m if m else math.nan,
        n=min(e.n for e in ests),
        verdict_unadjusted=word,
        p_value=p_value,
        _p=(p_reproduced, p_contradicted),
        method=method,
        n_excluded=excluded,
        detail=_join(
            f"{sum(in_order)} of {m} separable pairs significantly in the paper's order, "
            f"{len(reversed_)} reversed" + (f" ({', '.join(reversed_)})" if reversed_ else ""),
            f"left out (paper gap within ±{margin:.3g}): {', '.join(close)}" if close else "",
            f"of those, reversed here (not judged): {', '.join(close_reversed)}" if close_reversed else "",
            *notes,
            _excluded_note(excluded),
        ),
        _terms=[
            (sign * (claim.paper_values[i] - claim.paper_values[j]), c.sd1, c.dof)
            for (i, j), s, c in zip(pairs, separable, comparisons, strict=True)
            if s
        ],
        _correlation=shared_cell_correlation([p for p, s in zip(pairs, separable, strict=True) if s]),
    )


def shared_cell_correlation(pairs: Sequence[tuple[int, int]]) -> list[list[float]]:
    """The correlation of differences a − b of cells with one noise variance: ½ when two share their first
    or their second cell, −½ when one's first is the other's second, 0 when they share none."""

    def rho(p: tuple[int, int], q: tuple[int, int]) -> float:
        if p == q:
            return 1.0
        return 0.5 * ((p[0] == q[0]) + (p[1] == q[1]) - (p[0] == q[1]) - (p[1] == q[0]))

    return [[rho(p, q) for q in pairs] for p in pairs]


def judge(claim: Claim, index: RunIndex) -> dict[str, Any]:
    """One claims-table row (before the family adjustment) for `claim` on the runs in `index`.

    A claim whose cells have failed runs (diverged, or at chance) on its accuracy is judged twice, by the
    rule of the method section: on the runs that learned (its estimate, interval and power columns), and
    with every failed run counted (a diverged one at chance accuracy), by paired t-tests over the claim's own
    cells. It is decided only when both analyses decide it the same way (an intersection–union test: each
    direction's p-value is the larger of the two); the detail names the failures and gives the second
    analysis. Claims that do not involve a failed cell are judged once, and the failure touches neither
    their estimate nor their variance."""
    row = _judge_once(claim, index)
    if claim.metric.column != ACCURACY or row["verdict_unadjusted"] == "not run" or index.failures:
        return row
    failed = [
        found.failed
        for cell in _claim_cells(claim)
        for task in claim.metric.tasks
        if (found := index.cell(cell, task, ACCURACY)) is not None
    ]
    if not any(failed):
        return row
    counted = _judge_once(claim, index.with_failures())
    p_reproduced, p_contradicted = (
        math.nan if math.isnan(a) or math.isnan(b) else max(a, b)
        for a, b in zip(row["_p"], counted["_p"], strict=True)
    )
    p_value, word = _verdict(p_reproduced, p_contradicted)
    rule = "failed runs: decided only when the learned runs and all runs agree"
    return row | {
        "verdict_unadjusted": word,
        "p_value": p_value,
        "_p": (p_reproduced, p_contradicted),
        "method": f"{row['method']}; {rule}",
        "detail": _join(
            row["detail"],
            f"with the failed runs counted (diverged at chance): {_estimate_words(counted)}, "
            f"{counted['verdict_unadjusted']} (p = {counted['p_value']:.2g}); learned runs alone: "
            f"{row['verdict_unadjusted']} (p = {row['p_value']:.2g})",
        ),
    }


def _estimate_words(row: Mapping[str, Any]) -> str:
    """A row's effect and interval in its unit (pp for accuracy)."""
    scale, unit = (100.0, " pp") if row["unit"] == "accuracy" else (1.0, "")
    effect, low, high = (scale * float(row[k]) for k in ("effect", "ci_low", "ci_high"))
    if math.isnan(low):
        return f"{effect:+.3g}{unit}"
    return f"{effect:+.3g}{unit} [{low:+.3g}, {high:+.3g}]"


def _judge_once(claim: Claim, index: RunIndex) -> dict[str, Any]:
    if isinstance(claim, Difference):
        return judge_difference(claim, index)
    if isinstance(claim, Best):
        return judge_best(claim, index)
    if isinstance(claim, PairOrder):
        return judge_pair_order(claim, index)
    raise TypeError(f"not a claim: {claim!r}")
