"""Judging one claim (the method section of `pdelra.results.claims`): its estimate, interval, unadjusted
verdict, p-values and the terms its power columns come from, and how each failed run of its cells was read
(`read_failures`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.results import stats
from pdelra.results.claim_types import (
    ACCURACY,
    COST_UNIT,
    PAIR_ORDER_UNIT,
    Best,
    Cell,
    Cells,
    Claim,
    Difference,
    Metric,
    PairOrder,
    Pooled,
)
from pdelra.results.compare import (
    Comparison,
    _excluded,
    compare,
)
from pdelra.results.run_index import (
    RunIndex,
    SeedValues,
    _isnan,
    failure_words,
    seed_values,
)
from pdelra.results.stats import ALPHA

if TYPE_CHECKING:
    pass


# ----------------------------------------------------------------------------------------------------
# Failed runs: how each reading of a comparison reads them
# ----------------------------------------------------------------------------------------------------
SET_ASIDE = "set aside"
COUNTED = "counted at chance (no run of it learned)"
COUNTED_AGAINST = "set aside, and counted against it at chance: decided only where both readings agree"


@dataclass
class Read:
    """One comparison as its failed runs are read (`read_failures`): `shown`, the reading whose estimate the
    row shows (the learned runs; the failed runs counted where no run learned); `readings`, every reading
    that must agree for a decision (an intersection–union test: each direction's p is their largest);
    `failed`, per failed (task, cell), its failures in words and how it was read."""

    shown: Comparison
    readings: list[Comparison]
    failed: dict[tuple[str, Cell], tuple[str, str]] = field(default_factory=dict)

    @property
    def p_greater(self) -> float:
        return _largest(r.est.p_greater for r in self.readings)

    @property
    def p_less(self) -> float:
        return _largest(r.est.p_less for r in self.readings)


def _largest(values: Iterable[float]) -> float:
    found = list(values)
    return math.nan if any(math.isnan(p) for p in found) else max(found)


def _failed_cells(index: RunIndex, cells: Cells, metric: Metric) -> dict[tuple[str, Cell], SeedValues]:
    """The (task, cell) of `cells` with failed runs on the metric (accuracy only)."""
    if metric.column != ACCURACY:
        return {}
    parts = cells.cells if isinstance(cells, Pooled) else (cells,)
    found = {(t, c): index.cell(c, t, metric.column) for c in parts for t in metric.tasks}
    return {k: v for k, v in found.items() if v is not None and v.failed}


def read_failures(
    index: RunIndex, a: Cells, b: Cells, metric: Metric, sign: float = 1.0, against: bool = False
) -> Read:
    """sign·(a − b) read two ways when its cells have failed runs (diverged, or not distinguishable from
    chance). The question "how well does it do when it learns" is the learned runs' (each failed run set
    aside: one seed fewer per failed run). A failure counts against the cell that failed: with `against`
    (a is the cell the claim is about, and the claim favours it), a's failed runs are also counted at chance,
    and the comparison is decided only where both readings agree, so a failure never helps the claim about
    its own cell. Where a side has no run that learned, its failed runs are counted at chance (a cell that
    failed in every seed sits where its failures put it) and that reading is the one shown. A failure of
    the cell compared with (b, or a when the claim does not favour it) costs its seed and nothing more: read
    at chance it could only move the estimate the claim's way, or it is the reference's own finding."""
    failed_a, failed_b = _failed_cells(index, a, metric), _failed_cells(index, b, metric)
    if not (failed_a or failed_b):
        learned = compare(index, a, b, metric, sign)
        return Read(learned, [learned])
    notes = {k: failure_words(v.failed, v.seeds) for k, v in (failed_a | failed_b).items()}
    # A side with fewer than 2 seeds that learned (on every task it averages) is read at its failures.
    unlearned = {
        k
        for side, failed in ((a, failed_a), (b, failed_b))
        if len(seed_values(index, side, metric).values) < 2
        for k in failed
    }
    shown = compare(index.counting(frozenset(unlearned)), a, b, metric, sign)
    readings = [shown]
    how = {k: (note, COUNTED if k in unlearned else SET_ASIDE) for k, note in notes.items()}
    if against and set(failed_a) - unlearned:
        readings.append(compare(index.counting(frozenset(unlearned | set(failed_a))), a, b, metric, sign))
        how |= {k: (notes[k], COUNTED_AGAINST) for k in set(failed_a) - unlearned}
    return Read(shown, readings, how)


# Past this many failed cells a claim's `failed_runs` counts them per task (failures.csv names each).
NAMED_CELLS = 3


def failed_runs_line(reads: Sequence[Read]) -> str:
    """The claims table's `failed_runs`, one line ('' without failures): each failed cell of the claim, the
    tasks where its runs failed alike, and how it was read ("Baseline on PathFinder: diverged in 1 of 5 seeds
    (seed 0) — set aside"); past `NAMED_CELLS` of those, how many per reading and task (a ranking of eight
    cells on a task where none learned would list sixteen)."""
    hows: dict[tuple[str, Cell], list[str]] = {}
    words: dict[tuple[str, Cell], str] = {}
    for read in reads:
        for key, (said, how) in read.failed.items():
            words[key] = said
            if how not in hows.setdefault(key, []):
                hows[key].append(how)
    alike: dict[tuple[Cell, str, str], list[str]] = {}
    for (task, cell), said in words.items():
        alike.setdefault((cell, said, " / ".join(hows[(task, cell)])), []).append(task)
    if len(alike) <= NAMED_CELLS:
        return "; ".join(
            f"{cell.label()} on {', '.join(paper.TASK_LABELS.get(t, t) for t in tasks)}: {said} — {how}"
            for (cell, said, how), tasks in alike.items()
        )
    per_reading: dict[str, dict[str, int]] = {}
    for (task, _), way in hows.items():
        per_task = per_reading.setdefault(" / ".join(way), {})
        per_task[task] = per_task.get(task, 0) + 1
    counts = "; ".join(
        f"{how} — "
        + ", ".join(f"{paper.TASK_LABELS.get(t, t)} {n} cell{'s' * (n > 1)}" for t, n in tasks.items())
        for how, tasks in per_reading.items()
    )
    return f'{len(hows)} failed cells (each under "Runs that did not learn"): {counts}'


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
        "failed_runs": "",
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
    """a − b in the paper's direction (or within its margin). A failure of a, the cell the claim is about,
    counts against it (`read_failures`); one of b costs its seed."""
    against = claim.expected >= 0  # a no-difference claim is about a too: its failure moves it away
    read = read_failures(index, claim.a, claim.b, claim.metric, against=against)
    comparison = read.shown
    excluded = _excluded(index, [claim.a, claim.b], claim.metric)
    if (row := _not_run(claim, [comparison], excluded)) is not None:
        return row
    est = comparison.est
    margin = claim.margin
    if claim.relative_margin is not None:  # perplexity: a margin relative to our own reference level
        margin = claim.relative_margin * abs(comparison.reference)
    centre = 0.0 if _isnan(claim.paper_effect) or claim.expected != 0 else claim.paper_effect
    judged = _judged(est, claim.expected, margin, est.method, centre)
    if len(read.readings) > 1:  # every reading must decide it the same way
        ways = [_both_ways(r.est, claim.expected, margin, centre) for r in read.readings]
        p_reproduced, p_contradicted = (_largest(p) for p in zip(*ways, strict=True))
        learned_word = judged["verdict_unadjusted"]
        p_value, word = _verdict(p_reproduced, p_contradicted)
        judged |= {"verdict_unadjusted": word, "p_value": p_value, "_p": (p_reproduced, p_contradicted)}
        counted = read.readings[-1]
        judged["method"] += "; failed runs: decided where the learned runs and the failures counted agree"
        counted_words = f"with the failed runs counted against it: {_estimate_words(counted.est, claim)}"
        read_note = f"{counted_words}; the runs that learned alone read {learned_word}"
    else:
        read_note = ""
    mixed = _mixed_devices(claim, [comparison])
    if mixed:
        judged |= {"verdict_unadjusted": "inconclusive", "p_value": math.nan, "_p": (math.nan, math.nan)}
    gap = claim.paper_effect if claim.expected != 0 else 0.0
    return _row(
        claim,
        **judged,
        n_excluded=excluded,
        failed_runs=failed_runs_line([read]),
        detail=_join(mixed, _few_seeds_note(est), read_note, *comparison.notes, _excluded_note(excluded)),
        _margin=margin if claim.expected == 0 else math.nan,
        _terms=[(gap, comparison.sd1, comparison.dof)],  # for `adjust`'s power columns
    )


def judge_best(claim: Best, index: RunIndex) -> dict[str, Any]:
    """Intersection–union test for `reproduced`; Bonferroni over the k comparisons for `contradicted`.
    The effect and interval shown are those of the closest competitor (the smallest mean margin; ties go
    to the competitor listed first). A failure of the target counts against it when the claim favours it
    (best, not lowest); one of another cell costs its seed, or, where that cell has no run that learned,
    places it at its failures (`read_failures`)."""
    # Orient every comparison so that > 0 favours the claim (higher is better, unless the metric is a cost;
    # `lowest` turns it round once more).
    sign = (1.0 if claim.metric.higher_is_better else -1.0) * (-1.0 if claim.lowest else 1.0)
    against = sign > 0
    reads = [
        (cells, read_failures(index, claim.target, cells, claim.metric, sign, against))
        for cells in claim.others
    ]
    comparisons = [(cells, r.shown) for cells, r in reads]
    excluded = _excluded(index, [claim.target, *claim.others], claim.metric)
    if (row := _not_run(claim, [c for _, c in comparisons], excluded)) is not None:
        return row
    k = len(comparisons)
    closest_cells, closest = min(
        comparisons, key=lambda c: round(c[1].est.effect, 12) if not math.isnan(c[1].est.effect) else math.inf
    )
    ests = [c.est for _, c in comparisons]
    p_all = [stats.two_sided(r.p_greater) for _, r in reads]  # each on the two-sided scale
    p_any = [stats.two_sided(r.p_less) for _, r in reads]
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
        failed_runs=failed_runs_line([r for _, r in reads]),
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
    # Each pair is about both its cells; the one the paper places higher has its failures counted against it.
    reads = [read_failures(index, cells[i], cells[j], claim.metric, sign, True) for i, j in pairs]
    comparisons = [r.shown for r in reads]
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
    failed_runs = failed_runs_line(reads)
    if any(math.isnan(r.p_greater) for r in reads):
        # No test below 2 seeds; the effect is still read from the means (untested), so one seed shows ours.
        signs = [e.effect for e, s in zip(ests, separable, strict=True) if s and not math.isnan(e.effect)]
        by_means = (sum(d > 0 for d in signs) - sum(d < 0 for d in signs)) / m if m and signs else math.nan
        return _row(
            claim,
            effect=by_means,
            n=min(e.n for e in ests),
            verdict_unadjusted="inconclusive",
            method=method,
            n_excluded=excluded,
            failed_runs=failed_runs,
            detail=_join(
                "fewer than 2 usable seeds in some cell: separable pairs counted by their means, untested",
                *notes,
                _excluded_note(excluded),
            ),
        )
    p_order = [stats.two_sided(r.p_greater) for r in reads]
    p_reversed = [stats.two_sided(r.p_less, 2 * max(m, 1)) for r in reads]
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
        failed_runs=failed_runs,
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
    """One claims-table row (before the family adjustment) for `claim` on the runs in `index`. Failed runs
    (diverged, or not distinguishable from chance) are read by the rule of the method section
    (`read_failures`), comparison by comparison: claims that do not involve a failed cell are untouched by
    it, in their estimate and their variance."""
    if isinstance(claim, Difference):
        return judge_difference(claim, index)
    if isinstance(claim, Best):
        return judge_best(claim, index)
    if isinstance(claim, PairOrder):
        return judge_pair_order(claim, index)
    raise TypeError(f"not a claim: {claim!r}")


def _estimate_words(est: stats.Estimate, claim: Claim) -> str:
    """An estimate's effect and interval in the claim's unit (pp for accuracy)."""
    scale, unit = (100.0, " pp") if claim.metric.unit == "accuracy" else (1.0, "")
    effect, low, high = (scale * x for x in (est.effect, est.low, est.high))
    if math.isnan(low):
        return f"{effect:+.3g}{unit}"
    return f"{effect:+.3g}{unit} [{low:+.3g}, {high:+.3g}]"
