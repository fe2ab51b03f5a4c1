"""The engine that judges every claim: the claims' types and the rule for each (the claims themselves are
data in `pdelra.results.catalogue`, one module per system).

A claim compares *cells* of the grid — a cell is (variant, scale, setting) — through a per-seed value:
test accuracy (averaged over the claim's tasks when there are several, as the paper's LRA average is), a
step-time overhead over the baseline in percent, or a language model's test loss. Kinds:

- `Difference(a, b)`: mean over seeds of value(a) − value(b), with the sign the paper reports; a paper Δ
  within ± `EQUIVALENCE_MARGIN` (1 pp; the one threshold for "no difference") is a no-difference claim.
- `Best(target, others)`: the target beats every other cell (`lowest=True`: every other beats it).
- `PairOrder(cells, paper_values)`: the cells come in the paper's order, pair by pair.
- threshold claims (PhysQK-AD's per-layer values against a published number), built by
  `catalogue.physqk.lm_claims`.

Procedures (95 %, i.e. `ALPHA` = 5 % two-sided, 2.5 % per direction; `pdelra.results.stats`):
- **Accuracy differences: each cell's own variance, moderated toward its grid** (`pdelra.results.design`).
  Seeds are blocks shared by every cell of a task's grid (the same seed gives the same initialisation stream
  and data order). Each cell's run-to-run variance is measured against the mean of the other cells of its
  grid at the same seed, which removes the seed's effect: an exact χ² on seeds − 1 df whatever the other
  cells' variances. With 5 seeds or more, it borrows from its grid by empirical Bayes (the limma moderated
  variance, Smyth 2004) as far as its own spread agrees with the grid's: a cell whose spread the grid makes
  surprising keeps its own. A difference of cells (or of means of cells, averaged over tasks) is then a t
  statistic over the seeds its cells share, with Welch–Satterthwaite's df. So a noisier position has the
  standard error of its own noise, not the task's average, and no verdict depends on a pre-test for equal
  variances (which has no power at 3–5 seeds). Only the cells a claim compares enter its variance: a task's
  main grid (the baseline and the seven positions at h1) and its scale grid (ListOps' multi-scale cells) are
  measured apart, so the multi-scale cells never touch a single-scale claim. Cells in no grid (another
  setting, a related system's or a config's own variant) and metrics other than accuracy (step-time
  overheads, losses, perplexities) are compared by the paired t-test over the seeds both cells completed
  (scipy `ttest_rel`), Welch's t below 2 shared seeds, none below 2 seeds a side; the method column says
  which and why.
- **A failed run is a finding, not noise.** A run that diverged, or completed at chance (its accuracy within
  the 95 % binomial interval of 1 / classes on its test set: "not distinguishable from chance"), answers a
  question of its own: does its cell learn reliably? Each cell's failures are listed on both pages, and every
  claim row names the failed runs of its cells and how it read them (`failed_runs`). How well a cell does
  when it learns is judged on its learned runs: a failed run is left out of its cell's values and of every
  other cell's reference, so it widens no other claim's variance. Then, comparison by comparison:
  - a failure counts against the cell that failed. Where the claim is about that cell and favours it (it
    helps, it is best, it is no different), its failed runs are also counted at chance, and the comparison is
    decided only where both readings agree: a failure never helps the claim about its own cell, and a cell
    failing in some seeds is never "reproduced" on its other seeds alone;
  - a cell with no run that learned sits where its failures put it: its failed runs are counted at chance and
    that reading is the row's. So a cell at chance in every seed *contradicts* a claim that it helps, with
    the failure's effect and interval in the row, and a ranking places it there;
  - a failure of the cell compared with (the baseline, another position in a ranking), or of a cell the
    claim says is worse, costs its seed and nothing more: read at chance it could only move the estimate the
    claim's way, or it is that cell's own finding. A diverged baseline seed does not silence its task.
- **No p-value is ever 0**: a test accuracy lives on a grid of 1 / n_test (`n_test` from metrics.json). Each
  cell's variance is floored at the grid's resolution, (1 / n_test)² / 12, a true lower bound (the binomial
  variance is an upper bound for runs on a fixed test set, not a floor); only a spread on one df (two seeds),
  where a tie decides, is guarded by the binomial variance. A paired test likewise; with neither (a loss, a
  perplexity) and no spread, there is no test: inconclusive.
- **The baseline keeps its own noise**: it enters every comparison of its task, so it borrows nothing from
  its grid (a noisy baseline whose spread happens to look typical would narrow all seven comparisons at once).
  A config's own variant, or a related system's run on the LRA, is measured beside the task's grid and borrows
  from it as the positions do, without entering it.
- **Directional claims**: `reproduced` when the 95 % interval excludes 0 on the paper's side, `contradicted`
  on the other side. **No-difference claims** (a paper Δ within ± `EQUIVALENCE_MARGIN`, 1 pp; for perplexity
  1 % of our own reference cell's level) test agreement with the paper's own value, and say so ("within ±1 pp
  of the paper's +0.83 pp"): TOST around it, `reproduced` when the interval lies inside paper ± margin,
  `contradicted` when entirely outside. (Around 0, a paper Δ of +0.83 pp could almost never be confirmed
  within ±1 pp.)
- `Best` is an **intersection–union test**: `reproduced` only when every pairwise test favours the target
  (no correction is needed: all must reject); `contradicted` when some other cell is significantly better,
  Bonferroni over the k comparisons. So "multi-scale beats its best single scale" is tested against each
  single scale, not against one picked by its mean on the same runs.
- `PairOrder` is the order **at the resolution the data support**: only the pairs whose paper gap exceeds
  the margin (12 of the 21 pairs of Table 6) are judged. `reproduced` when each is significantly in the
  paper's order (an intersection–union test), `contradicted` when one of them is significantly reversed
  (Bonferroni over them). A pair the paper separates by less than the margin (0.08, 0.16, 0.25 pp …) is left
  out of the verdict, as the claim's words say; the detail names those reversed here. The effect is
  (separable pairs in order − reversed) / separable pairs; below 2 seeds, with no test, the pairs are
  counted by their means (untested, and said so).
- Two rows of one run are refused; a task or variant no claim names is said in the log and in the detail of
  the claims that did not run; missing seeds and rows without a seed are noted in the detail. Cost claims
  compare runs of one device type; mixed devices: inconclusive, with a note.

Multiplicity. The abstract's three claims, `after_embedding_gain` (+4.1 pp), `after_attention_loss`
(−2.5 pp) and `multiscale_gain` (multi-scale beats every single scale, averaged over the three positions of
Table 12), form the **primary** family: Holm over the three, so that under the complete null no more than
5 % of studies call any of them (each alone at 5 % gave 10.7 %). Every other claim belongs to a family
(`ranking`, `table11`, `multiscale`, `cost`, `cta`, `cta_official`, `lm`, `diagnostics`) and is
Holm-adjusted within it: `verdict` is the adjusted word, `verdict_unadjusted` the word at the nominal level,
`p_value` and `p_adjusted` beside them. A claim's p-value is that of the test behind its word, on the
two-sided scale (`p_value` < 5 % ⇔ `verdict_unadjusted` is `reproduced` or `contradicted`; an undecided
claim reports the smaller of its "reproduced" and "contradicted" p-values, both ≥ 5 %).

Size is a separate answer (`size`): `as claimed` when the paper's value lies inside our 95 % interval,
`smaller than claimed` / `larger than claimed` when the interval lies entirely on one side of it (in
magnitude; for a paper value of 0 any excluded value is larger), `opposite sign` when it lies entirely on the
other side of 0; empty without a paper value or interval.

What would decide a claim (`pdelra.results.power`): at its own level (`power_level`: Holm's step for it,
α/(m − k + 1) for the k-th smallest p of a family of m), `detectable_effect` is the true effect decided
with 80 % power at our n and spread, `power_at_paper` the power at the paper's effect, `seeds_needed` the
seeds for 80 % power at it (at our own effect where the paper gives none). Several comparisons that must
all succeed have a joint power through the correlation their shared cells give. The level assumes every
claim with a smaller p was decided, so for a family's no-difference claims, decided last, it is optimistic.
`pdelra plan --power` gives the same before any run, from a pilot or Table 15.

The error rates and power these rules give are measured by simulation (tests/test_claims_reach.py,
tests/test_claims_noise.py); the figures are in docs/measurements.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pdelra import paper
from pdelra.results import power, stats

# The engine's public face: the vocabulary, the index, the judging (one module each), re-exported here.
from pdelra.results.claim_types import (
    ACCURACY,
    CHANCE_ACCURACY,
    CLAIM_COLUMNS,
    COST_UNIT,
    EQUIVALENCE_MARGIN,
    FAMILIES,
    LEARNED_ALONE,
    VERDICTS,
    Best,
    Cell,
    Claim,
    Difference,
    Metric,
    PairOrder,
    Pooled,
    _claim_cells,
    direction_word,
    expected_direction,
)
from pdelra.results.judge import COUNTED, COUNTED_AGAINST, _join, _judged, _row, judge, size_word
from pdelra.results.run_index import RunIndex, _isnan, seed_values
from pdelra.results.stats import ALPHA
from pdelra.runs import BASE_SETTING, COMPLETED

if TYPE_CHECKING:
    import pandas as pd


__all__ = [  # what other modules read from `claims`, besides what it defines
    "ACCURACY", "BASE_SETTING", "CHANCE_ACCURACY", "CLAIM_COLUMNS", "COMPLETED", "COST_UNIT",
    "EQUIVALENCE_MARGIN", "FAMILIES", "VERDICTS", "Best", "Cell", "Claim", "Difference", "Metric",
    "PairOrder", "Pooled", "RunIndex", "_claim_cells", "_judged", "_row", "adjust", "direction_word",
    "evaluate", "expected_direction", "headline", "judge", "methods_markdown", "seed_values", "size_word",
    "what_would_decide",
]  # fmt: skip

log = logging.getLogger(__name__)


def methods_markdown() -> str:
    """The procedures, their levels and measured error rates, as stated in this module's docstring (the
    report's method section shows this text: one statement, not a copy)."""
    doc = __doc__ or ""
    return doc[doc.index("Procedures") :].strip()


# ----------------------------------------------------------------------------------------------------
# The claims table: every claim, adjusted within its family
# ----------------------------------------------------------------------------------------------------
def adjust(rows: pd.DataFrame, *, power: bool = True) -> pd.DataFrame:
    """Holm within each family (the primary claims are one family of three): sets `p_adjusted`,
    `adjustment`, `verdict`; adds `size`, `paper_in_ci` and the power columns; orders the columns as
    `CLAIM_COLUMNS`. Ties in p-values keep the claims' order (a stable sort), so the table is the same
    however the runs were listed."""
    frame = rows.copy().reset_index(drop=True)
    p_values = frame["p_value"].astype(float).to_numpy()
    adjusted, levels = p_values.copy(), np.full(len(frame), ALPHA)
    adjustment = np.full(len(frame), "", dtype=object)
    for family, where in frame.groupby("family", sort=False).indices.items():
        adjusted[where] = stats.holm(p_values[where].tolist())
        levels[where] = holm_levels(p_values[where].tolist())
        what = "the 3 primary claims" if family == "primary" else f"'{family}' ({len(where)} claims)"
        adjustment[where] = f"Holm within {what}"
    frame["p_adjusted"], frame["power_level"], frame["adjustment"] = adjusted, levels, adjustment
    decided = frame["verdict_unadjusted"].isin(["reproduced", "contradicted"])
    keep = decided & (frame["p_adjusted"] < ALPHA)
    frame["verdict"] = frame["verdict_unadjusted"].where(~decided | keep, "inconclusive")
    bounds = list(zip(frame["paper_effect"], frame["ci_low"], frame["ci_high"], strict=True))
    frame["size"] = [size_word(p, lo, hi) for p, lo, hi in bounds]
    frame["paper_in_ci"] = [
        None if _isnan(p) or _isnan(lo) or _isnan(hi) else bool(lo <= p <= hi) for p, lo, hi in bounds
    ]
    columns = ("detectable_effect", "power_at_paper", "seeds_needed")
    powers = [_power_columns(row) for row in frame.to_dict("records")] if power else []
    for i, column in enumerate(columns):
        frame[column] = [p[i] for p in powers] if power else math.nan
    return frame[list(CLAIM_COLUMNS)].reset_index(drop=True)


def holm_levels(p_values: Sequence[float]) -> list[float]:
    """The level each test meets in Holm's step-down when every smaller p was rejected: α / (m − k + 1)
    for the k-th smallest (NaNs last): the claim's own adjusted level, at which its power is stated."""
    order = sorted(range(len(p_values)), key=lambda i: (math.isnan(p_values[i]), p_values[i]))
    levels = [ALPHA] * len(p_values)
    for k, i in enumerate(order):
        levels[i] = ALPHA / (len(p_values) - k)
    return levels


def _power_columns(row: Mapping[str, Any]) -> tuple[float, float, float]:
    """(detectable effect at our n, power at the paper's effect, seeds for 80 % power at it), all at the
    claim's Holm level (`pdelra.results.power`). Several comparisons that must all succeed (a 'best' or an
    order claim) have a joint power, from their correlation through shared cells (`power.power_all`); the
    detectable effect is that of the comparison with the widest spread. Without a paper value (CTA's
    claims), the seeds are those for our own observed effect. NaN where the claim has no t-based spread
    (permutation tests, threshold claims).
    """
    terms = row.get("_terms")
    if not isinstance(terms, list) or not terms or _isnan(row.get("n")):
        return math.nan, math.nan, math.nan
    level, n = float(row["power_level"]), int(row["n"])
    usable = [(g, sd, dof) for g, sd, dof in terms if not _isnan(sd) and sd > 0]
    if not usable:
        return math.nan, math.nan, math.nan
    widest = max(usable, key=lambda t: t[1] / math.sqrt(max(t[2].at(n), 1e-9)))
    detectable = power.detectable_effect(widest[1], n, widest[2], level)
    if row.get("unit") == "accuracy" and detectable > 1:
        detectable = math.nan  # no accuracy difference (at most 1) is detectable at this n
    aim = [(g if not _isnan(g) else float(row["effect"]), sd, dof) for g, sd, dof in usable]
    correlation = row.get("_correlation")  # a list, or NaN in a row that has none
    correlation = correlation if isinstance(correlation, list) and len(usable) == len(terms) else None
    margin = row.get("_margin")
    at_paper, seeds = power.claim_power(
        aim, correlation, math.nan if _isnan(margin) else float(margin), n, level
    )
    if any(_isnan(g) for g, _, _ in usable):
        at_paper = math.nan  # no paper value: the power "at the paper's effect" does not exist
    return detectable, at_paper, seeds


def evaluate(
    runs: pd.DataFrame,
    *,
    claims: Sequence[Claim],
    extra_rows: Sequence[Mapping[str, Any]] = (),
    power: bool = True,
) -> pd.DataFrame:
    """The claims table: `claims` judged on `runs` (`pdelra.results.catalogue.all_claims()` in the workflow),
    then `extra_rows` already judged elsewhere (PhysQK-AD's on the LM tables, the diagnostics' mechanism
    claims, CTA's own experiments), all adjusted by family. `power=False` leaves the power columns empty (for
    simulations that measure verdicts only: they are most of the time a table takes).

    A task or variant of the runs table that no claim names (a typo, or a variant of the user's own) is
    said once in the log and in the detail of every claim that did not run."""
    import pandas as pd

    index = RunIndex(runs)
    rows = [judge(c, index) for c in claims]
    unknown = _unnamed(index, claims)
    if unknown:
        log.warning("runs table: %s (no claim names them)", unknown)
        for row in rows:
            if row["verdict_unadjusted"] == "not run":
                row["detail"] = _join(row["detail"], f"the runs table has {unknown}")
    rows += [dict(r) for r in extra_rows]
    frame = pd.DataFrame(rows)
    for column in CLAIM_COLUMNS:
        if column not in frame.columns:
            frame[column] = math.nan if column in ("p_value", "effect", "ci_low", "ci_high") else ""
    return adjust(frame, power=power)


def _unnamed(index: RunIndex, claims: Sequence[Claim]) -> str:
    """'task(s) …; variant(s) …' of the runs that no claim names, or ''."""
    tasks, variants = set(), set()
    for claim in claims:
        tasks |= set(claim.metric.tasks)
        variants |= {c.variant for c in _claim_cells(claim)}
        if claim.metric.overhead_vs is not None:
            variants.add(claim.metric.overhead_vs.variant)
    have_tasks, have_variants = index.names()
    # Names the project knows (a related system's variant or task that no claim of this table reads) are
    # no typo: only the unknown ones are said.
    have_tasks -= set(paper.TASK_LABELS) | set(paper.CTA_OFFICIAL_TASK_LABELS)
    have_variants -= set(paper.VARIANT_LABELS)
    parts = []
    if extra := sorted(have_tasks - tasks):
        parts.append(f"task(s) {', '.join(extra)}")
    if extra := sorted(have_variants - variants):
        parts.append(f"variant(s) {', '.join(extra)}")
    return "; ".join(parts)


def what_would_decide(claim: Mapping[str, Any]) -> str:
    """For an undecided claim, what would decide it, in words (from its power columns); '' otherwise."""
    if claim.get("verdict") != "inconclusive" or _isnan(claim.get("n")):
        return ""
    n, seeds, at_paper = int(claim["n"]), claim.get("seeds_needed"), claim.get("power_at_paper")
    failed = claim.get("failed_runs")
    failed = failed if isinstance(failed, str) else ""  # (read back from claims.csv, an empty cell is NaN)
    if n < 2 and claim.get("kind") != "association":
        if COUNTED in failed:  # a cell with no run that learned was read at its failures
            return f"2 seeds or more whose runs learn (a cell it compares learned in none of its {n})"
        if failed:  # runs ran, but some did not learn
            return f"2 seeds or more whose runs learn ({n} did on all it compares)"
        return f"2 seeds or more to test it ({n} ran)"
    if COUNTED in failed:  # a cell with no run that learned was read at its failures and decided nothing
        return "runs that learn: a cell it compares has none, and its failures alone do not decide it"
    if COUNTED_AGAINST in failed and (learned := LEARNED_ALONE.search(str(claim.get("detail", "")))):
        word = learned.group(1)
        if word in ("reproduced", "contradicted"):
            return (
                f"its runs that learned read {word}, its failed runs counted against it do not: it stays "
                "undecided while they fail; seeds where it learns shrink the failures' weight"
            )
    if _isnan(seeds):
        tested = not (_isnan(claim.get("detectable_effect")) and _isnan(claim.get("p_value")))
        return f"not decidable with {power.MAX_SEEDS} seeds" if tested else ""
    if seeds > n:
        return f"decidable with about {int(seeds)} seeds at the spread observed"
    if not _isnan(at_paper):
        return f"{n} seeds give {at_paper:.0%} power at the paper's effect: ours is smaller"
    return ""


def headline(claims: pd.DataFrame) -> pd.DataFrame:
    """The paper's claims a reader sees first: those of the headline families (`FAMILIES`), without the
    per-cell Table 11 signs."""
    signs = claims["claim_id"].astype(str).str.startswith("table11_sign_")
    first = [name for name, family in FAMILIES.items() if family.headline]
    return claims[claims["family"].isin(first) & ~signs]
