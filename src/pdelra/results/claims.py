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
  the 95 % binomial interval of 1 / classes on its test set: "failed to learn"), is named in the detail of
  every claim of its cell ("In Attention on Text: diverged in 1 of 5 seeds") and left out of its cell's values
  and of every other cell's reference, so it widens no other claim's variance. A claim involving a failed cell
  is judged twice: on the runs that learned (its estimate, interval and power), and with every failed run
  counted (a diverged one at chance accuracy) by paired t-tests over the claim's own cells. It is decided only
  when both decide it the same way (each direction's p-value is the larger of the two); the detail gives both.
  So a failure counts against its method, and a baseline that failed to learn cannot make a gain.
- **No p-value is ever 0**: a test accuracy lives on a grid of 1 / n_test (`n_test` from metrics.json). Each
  cell's variance is floored at the grid's resolution, and on fewer than 4 df at the binomial variance
  p(1 − p) / n_test; a paired test likewise; with neither (a loss, a perplexity) and no spread, there is no
  test: inconclusive.
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
  (separable pairs in order − reversed) / separable pairs.
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

import copy
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from pdelra import paper
from pdelra.errors import UserError
from pdelra.results import power, stats
from pdelra.results.design import GRIDS, CellKey, GridNoise, assume, grid_noise, satterthwaite
from pdelra.results.power import DegreesOfFreedom
from pdelra.results.stats import ALPHA
from pdelra.runs import BASE_SETTING, BASELINE, COMPLETED, DIVERGED, MAIN_SCALE

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

ACCURACY = "test_accuracy"
# A diverged run counts against its method: at chance accuracy, 1 / classes (ListOps and Image: 10 classes;
# Text, Retrieval, Pathfinder: 2; CTA's own tasks: IMDb, SST-2 2, AG News 4).
CHANCE_ACCURACY = {
    "listops": 0.1,
    "text": 0.5,
    "retrieval": 0.5,
    "pathfinder": 0.5,
    "image": 0.1,
    "imdb": 0.5,
    "imdb_char": 0.5,
    "sst2": 0.5,
    "agnews": 0.25,
}
COST_UNIT = "pp of step time"
# The cells of a task's grids (`pdelra.results.design`): the baseline and the seven positions.
DESIGN_VARIANTS = frozenset((BASELINE, *paper.POSITIONS))
# A paper Δ within this margin is "no difference", and a no-difference claim is reproduced when our 95 %
# interval lies inside it: one threshold for both (1 percentage point of accuracy).
EQUIVALENCE_MARGIN = 0.01
# A completed run "failed to learn" when its accuracy is within the 95 % binomial interval of chance (or
# below).
FAILURE_Z = NormalDist().inv_cdf(1 - ALPHA / 2)
FAILED_NOTE = re.compile(r": (diverged|failed to learn) in \d+ of \d+ seeds")  # a failure's note in a detail

VERDICTS = ("reproduced", "contradicted", "inconclusive", "not run")
SIZES = ("as claimed", "smaller than claimed", "larger than claimed", "opposite sign")


@dataclass(frozen=True)
class Family:
    """A family of claims, Holm-adjusted together: its label on the pages, and whether its claims are the
    paper's headline (shown one by one; the others are summed up in one line each, or, a config's own
    variants, shown apart before them)."""

    label: str
    headline: bool = False


FAMILIES: dict[str, Family] = {
    "primary": Family("the abstract's three claims", headline=True),
    "ranking": Family("the ranking of the positions", headline=True),
    "table11": Family("Table 11, sign of each position's gain over the baseline per task"),
    "multiscale": Family("the multi-scale gains", headline=True),
    "cost": Family("the cost of each position", headline=True),
    "cta": Family("Continuous-Time Attention (our reading of its abstract)"),
    "lm": Family("PhysQK-AD's language model"),
    "diagnostics": Family("the mechanism diagnostics"),
    "cta_official": Family("Continuous-Time Attention's own experiments"),
    "own": Family("your own variants against the baseline and the paper's diffusion"),
}
CLAIM_COLUMNS = (
    "claim_id",
    "claim",
    "source",
    "family",
    "kind",
    "unit",
    "paper_effect",
    "effect",
    "ci_low",
    "ci_high",
    "n",
    "verdict",
    "verdict_unadjusted",
    "p_value",
    "p_adjusted",
    "adjustment",
    "size",
    "paper_in_ci",
    "power_level",
    "detectable_effect",
    "power_at_paper",
    "seeds_needed",
    "method",
    "n_excluded",
    "detail",
)


def methods_markdown() -> str:
    """The procedures, their levels and measured error rates, as stated in this module's docstring (the
    report's method section shows this text: one statement, not a copy)."""
    doc = __doc__ or ""
    return doc[doc.index("Procedures") :].strip()


# ----------------------------------------------------------------------------------------------------
# Claims as data
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One configuration of the grid: variant at a diffusion scale under a grid setting."""

    variant: str
    scale: str = MAIN_SCALE
    setting: str = BASE_SETTING

    def label(self) -> str:
        name = paper.VARIANT_LABELS.get(self.variant, self.variant)
        extra = [
            s
            for s in (self.scale if self.scale != MAIN_SCALE else "", self.setting)
            if s and s != BASE_SETTING
        ]
        return f"{name} ({', '.join(extra)})" if extra else name


@dataclass(frozen=True)
class Pooled:
    """The per-seed mean of several cells (e.g. multi-scale over the three positions of Table 12)."""

    cells: tuple[Cell, ...]
    name: str

    def label(self) -> str:
        return self.name


Cells = Cell | Pooled


@dataclass(frozen=True)
class Metric:
    """The per-seed value: `column` of the runs table averaged over `tasks`; with `overhead_vs`, the
    overhead 100·(x / x_ref − 1) in percent over that cell on the same task and seed."""

    column: str = "test_accuracy"
    tasks: tuple[str, ...] = paper.TASKS
    overhead_vs: Cell | None = None
    higher_is_better: bool = True
    unit: str = "accuracy"


@dataclass(frozen=True)
class Difference:
    claim_id: str
    claim: str
    source: str
    family: str
    a: Cells
    b: Cells
    paper_effect: float
    metric: Metric = field(default_factory=Metric)
    direction: int | None = None  # None: from paper_effect (0 when within ± margin)
    margin: float = EQUIVALENCE_MARGIN
    relative_margin: float | None = None  # the margin as a share of our reference cell's level (perplexity)

    kind = "difference"

    @property
    def expected(self) -> int:
        if self.direction is not None:
            return self.direction
        return expected_direction(self.paper_effect, self.margin)


@dataclass(frozen=True)
class Best:
    """`target` beats each of `others` (with `lowest`, each of `others` beats the target)."""

    claim_id: str
    claim: str
    source: str
    family: str
    target: Cells
    others: tuple[Cells, ...]
    paper_effect: float
    metric: Metric = field(default_factory=Metric)
    lowest: bool = False
    gaps: tuple[float, ...] = ()  # the paper's margin over each of `others` (for power); default paper_effect

    kind = "best"

    def paper_gaps(self) -> tuple[float, ...]:
        return self.gaps or (self.paper_effect,) * len(self.others)


PAIR_ORDER_UNIT = "(pairs in order − reversed) / pairs"


@dataclass(frozen=True)
class PairOrder:
    """`cells` are listed in the paper's order, best first; every pair is a one-sided comparison."""

    claim_id: str
    claim: str
    source: str
    family: str
    cells: tuple[Cell, ...]
    paper_values: tuple[float, ...]  # the paper's value of each cell: which pairs it separates
    metric: Metric = field(default_factory=Metric)
    margin: float = EQUIVALENCE_MARGIN
    relative_margin: float | None = None

    kind = "pair order"
    paper_effect = 1.0  # every separable pair in order

    def margin_for(self, reference: float) -> float:
        """Pairs whose paper gap lies within this are not separable (relative margins: of our level)."""
        return self.margin if self.relative_margin is None else self.relative_margin * abs(reference)


Claim = Difference | Best | PairOrder


def expected_direction(paper_effect: float, margin: float = EQUIVALENCE_MARGIN) -> int:
    """+1 / −1: the paper reports a gain / loss; 0: |Δ| within the margin, a no-difference claim."""
    return 0 if abs(paper_effect) <= margin else (1 if paper_effect > 0 else -1)


def direction_word(delta: float) -> str:
    """The claim's words for a paper Δ (accuracy): a gain, a loss, or — within the margin — what TOST tests:
    agreement with the paper's own value, not a difference of 0."""
    e = expected_direction(delta)
    if e == 0:
        return f"within ±{100 * EQUIVALENCE_MARGIN:g} pp of the paper's {100 * delta:+.2f} pp"
    return "gain" if e > 0 else "loss"


# ----------------------------------------------------------------------------------------------------
# The runs, indexed once
# ----------------------------------------------------------------------------------------------------
class ClaimsInputError(UserError, ValueError):
    """A runs table the claims cannot be judged on; the message names the rows."""


@dataclass
class SeedValues:
    """Per-seed values of one cell (or pooled cells) on the metric's tasks: `values` (seed → value) for
    seeds usable on every task, `missing` (what has no run at all), `excluded` (runs that exist but count
    nowhere), `notes` (what a reader must know: failed runs, missing seeds), the `devices` the runs ran on and
    `failed` (seed → why, for the runs that diverged or failed to learn: left out of `values`)."""

    values: dict[int, float]
    missing: list[str]
    excluded: int
    notes: list[str] = field(default_factory=list)
    devices: set[str] = field(default_factory=set)
    epoch_budgets: set[int] = field(default_factory=set)  # runs.csv's max_epochs of the runs used
    failed: dict[int, str] = field(default_factory=dict)


def failed_to_learn(accuracy: float, task: str, n_test: float) -> bool:
    """A completed run that sits at chance: its test accuracy at or below the upper end of the 95 % binomial
    interval around 1 / classes on its test set (unknown without n_test: then never)."""
    if task not in CHANCE_ACCURACY or _isnan(n_test) or n_test <= 0:
        return False
    p0 = CHANCE_ACCURACY[task]
    return accuracy <= p0 + FAILURE_Z * math.sqrt(p0 * (1 - p0) / n_test)


class RunIndex:
    """The runs table indexed once by (task, variant, scale, setting): every claim reads cells from here.

    Refused: two rows of one run (task, variant, scale, setting, seed). Left out with a note: rows without
    a seed. A run that failed — diverged, or completed at chance (`failed_to_learn`) — is a finding, not
    noise: it is left out of its cell's values and named in the notes, and the accuracy claims of its cell
    are judged with and without it (`judge`); other metrics leave a diverged run out (its step time and loss
    mean nothing)."""

    def __init__(self, runs: pd.DataFrame | None):
        self._rows: dict[tuple[str, str, str, str], list[tuple[int, str, dict[str, Any]]]] = {}
        self.notes: dict[tuple[str, str, str, str], list[str]] = {}
        self._n_test: dict[str, float] = {}
        self._noise: dict[tuple[str, str, str], GridNoise] = {}
        self._assumed: dict[str, float] = {}
        self._cells: dict[tuple[Cell, str, str], SeedValues | None] = {}
        self.failures = False  # `with_failures()`: failed runs counted (at chance when diverged)
        self._multiscale: dict[str, set[str]] = {}  # task → the positions it ran at several scales
        if runs is None or not len(runs):
            return
        records = runs.to_dict("records")
        seen: set[tuple[str, str, str, str, int]] = set()
        twice: list[str] = []
        n_test: dict[str, list[float]] = {}
        for record in records:
            key = (
                str(record["task"]),
                str(record["variant"]),
                str(record["scale"]),
                str(record.get("setting", BASE_SETTING)),
            )
            if _isnan(record.get("seed")):
                self.notes.setdefault(key, []).append("a run without a seed left out")
                continue
            seed = int(record["seed"])
            if (*key, seed) in seen:
                twice.append("/".join(key) + f"/seed{seed}")
            seen.add((*key, seed))
            self._rows.setdefault(key, []).append((seed, str(record["status"]), record))
            if not _isnan(record.get("n_test")):
                n_test.setdefault(key[0], []).append(float(record["n_test"]))
        if twice:
            raise ClaimsInputError(
                f"the runs table lists {len(twice)} run(s) more than once: {', '.join(twice[:5])}"
                + (" …" if len(twice) > 5 else "")
                + "; each (task, variant, scale, setting, seed) must appear once (aggregate refuses them too)"
            )
        self._n_test = {task: float(np.median(v)) for task, v in n_test.items()}
        for task, variant, scale, setting in self._rows:
            if setting == BASE_SETTING and scale != MAIN_SCALE and variant in DESIGN_VARIANTS:
                self._multiscale.setdefault(task, set()).add(variant)

    def with_failures(self) -> RunIndex:
        """The same runs, with every failed run counted (a diverged one at chance accuracy): the view in which
        a claim involving a failed cell is judged a second time."""
        other = copy.copy(self)
        other.failures, other._cells, other._noise = True, {}, {}
        return other

    def names(self) -> tuple[set[str], set[str]]:
        """(tasks, variants) that have runs."""
        return {k[0] for k in self._rows}, {k[1] for k in self._rows}

    def cell(self, cell: Cell, task: str, column: str) -> SeedValues | None:
        """The cell's runs on one task (see `SeedValues`), or None when the cell has no run; read once (a
        claims table reads each cell for many comparisons)."""
        if (cell, task, column) not in self._cells:
            self._cells[(cell, task, column)] = self._read_cell(cell, task, column)
        return self._cells[(cell, task, column)]

    def _read_cell(self, cell: Cell, task: str, column: str) -> SeedValues | None:
        key = (task, cell.variant, cell.scale, cell.setting)
        rows = self._rows.get(key)
        if not rows:
            return None
        values: dict[int, float] = {}
        failed: dict[int, str] = {}
        accuracy = column == ACCURACY and task in CHANCE_ACCURACY
        n_test = self._n_test.get(task, math.nan)
        for seed, status, record in rows:
            value = record.get(column)
            if status == COMPLETED and not _isnan(value):
                if accuracy and failed_to_learn(float(value), task, record.get("n_test", n_test)):
                    failed[seed] = "failed to learn"
                    if self.failures:
                        values[seed] = float(value)
                else:
                    values[seed] = float(value)
            elif status == DIVERGED and accuracy:
                failed[seed] = "diverged"
                if self.failures:
                    values[seed] = CHANCE_ACCURACY[task]
        notes = list(self.notes.get(key, []))
        if failed:
            where = f"{cell.label()} on {paper.TASK_LABELS.get(task, task)}"
            for why in ("diverged", "failed to learn"):
                if n := sum(w == why for w in failed.values()):
                    notes.append(f"{where}: {why} in {n} of {len(rows)} seeds")  # (FAILED_NOTE reads it)
        used = [r for s, _, r in rows if s in values]
        devices = {str(r.get("device")) for r in used if not _isnan_or_none(r.get("device"))}
        budgets = {int(r["max_epochs"]) for r in used if not _isnan(r.get("max_epochs"))}
        excluded = sum(1 for s, _, _ in rows if s not in values and s not in failed)
        return SeedValues(values, [], excluded, notes, devices, budgets, failed)

    def grid(self, task: str, keys: set[CellKey]) -> str | None:
        """The grid of `task` that holds every cell of `keys` (`pdelra.results.design`): "main" (the baseline
        and the seven positions at h1), "scale" (the positions run at several scales, at every scale), or
        None."""
        return next((g for g in GRIDS if all(self._in_grid(task, k, g) for k in keys)), None)

    def _in_grid(self, task: str, key: CellKey, grid: str) -> bool:
        variant, scale, setting = key
        if setting != BASE_SETTING or variant not in DESIGN_VARIANTS:
            return False
        return scale == MAIN_SCALE if grid == "main" else variant in self._multiscale.get(task, set())

    def noise(self, task: str, grid: str, column: str) -> GridNoise:
        """The per-cell noise of one grid of one task (`pdelra.results.design`), computed once: each cell's
        variance against the grid's other cells, over its usable (learned) runs. Cells outside the grids (a
        related system's, a config's own variant) are compared by their own paired tests, so that adding
        them changes no verdict of the paper's claims."""
        if (task, grid, column) not in self._noise:
            cells: dict[CellKey, dict[int, float]] = {}
            for where, variant, scale, setting in self._rows:
                key = (variant, scale, setting)
                if where != task or not self._in_grid(task, key, grid):
                    continue
                found = self.cell(Cell(*key), task, column)
                if found is not None and found.values:
                    cells[key] = found.values
            noise = grid_noise(cells, self._n_test.get(task, math.nan))
            if task in self._assumed:
                noise = assume(noise, self._assumed[task])
            self._noise[(task, grid, column)] = noise
        return self._noise[(task, grid, column)]

    def assume_noise(self, variances: Mapping[str, float]) -> None:
        """Assume each task's run-to-run variance (every cell alike) instead of measuring it, over the same
        cells and seeds, for planning seeds before any run (`pdelra.results.seeds`). Each cell's assumed
        variance carries its reference's share, 1 / (reference cells), as the measured one does."""
        self._assumed = dict(variances)
        self._noise = {}

    def floor(self, task: str, column: str) -> float:
        """The smallest variance of one run's value on this task (binomial, for accuracy; else 0)."""
        return self.noise(task, "main", column).floor if column == ACCURACY else 0.0


def _isnan(value: Any) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def _isnan_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def seed_values(index: RunIndex, cells: Cells, metric: Metric) -> SeedValues:
    """The per-seed value of a cell (or pooled cells), averaged over the metric's tasks; only seeds usable
    on every task (and every pooled cell). Seeds that some part lacks are named in the notes."""
    parts = cells.cells if isinstance(cells, Pooled) else (cells,)
    per_part: list[tuple[str, dict[int, float]]] = []
    missing: list[str] = []
    notes: list[str] = []
    devices: set[str] = set()
    budgets: set[int] = set()
    excluded = 0
    for cell in parts:
        for task in metric.tasks:
            where = f"{cell.label()} on {paper.TASK_LABELS.get(task, task)}"
            found = index.cell(cell, task, metric.column)
            if found is None:
                missing.append(where)
                continue
            values = found.values
            excluded += found.excluded
            notes += found.notes
            devices |= found.devices
            budgets |= found.epoch_budgets
            if metric.overhead_vs is not None:
                ref = index.cell(metric.overhead_vs, task, metric.column)
                if ref is None:
                    missing.append(f"{metric.overhead_vs.label()} on {paper.TASK_LABELS.get(task, task)}")
                    continue
                devices |= ref.devices
                values = {
                    s: 100.0 * (x / ref.values[s] - 1.0)
                    for s, x in values.items()
                    if ref.values.get(s, 0) > 0
                }
            per_part.append((where, values))
    if missing or not per_part:
        return SeedValues({}, missing, excluded, notes, devices, budgets)
    every = set.union(*(set(v) for _, v in per_part))
    seeds = set.intersection(*(set(v) for _, v in per_part))
    for where, v in per_part:
        if lacking := sorted(every - set(v)):
            notes.append(f"{where} lacks seed(s) {', '.join(map(str, lacking))}")
    values = {s: sum(v[s] for _, v in per_part) / len(per_part) for s in sorted(seeds)}
    return SeedValues(values, [], excluded, notes, devices, budgets)


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
    variance for each (accuracy only, failed runs left out), else the paired t over the seeds a and b share
    (variance floored at the tasks' binomial floor), Welch's t below 2 shared seeds."""
    sa, sb = seed_values(index, a, metric), seed_values(index, b, metric)
    notes = list(dict.fromkeys(sa.notes + sb.notes))
    where = f" on {paper.TASK_LABELS.get(metric.tasks[0], metric.tasks[0])}" if len(metric.tasks) == 1 else ""
    for cells, own, other in ((a, sa, sb), (b, sb, sa)):
        if own.values and (lacking := sorted(set(other.values) - set(own.values))):
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
    if metric.column == ACCURACY and metric.overhead_vs is None and not index.failures:
        per_cell = _per_cell(index, weights, metric)
        if not isinstance(per_cell, str):
            est, dof = per_cell
            return Comparison(est, est.se * math.sqrt(est.n), dof, reference, notes, devices, [])
        notes.append(f"paired t (no per-cell variances: {per_cell})")
    floor = (
        sum(index.floor(t, metric.column) * sum(w * w for w in weights.values()) for t in tasks)
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
        effect += sum(w * float(np.mean([values[k][s] for s in seeds])) for k, w in keys.items()) / len(tasks)
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


# ----------------------------------------------------------------------------------------------------
# The claims table: every claim, adjusted within its family
# ----------------------------------------------------------------------------------------------------
def adjust(rows: pd.DataFrame, *, power: bool = True) -> pd.DataFrame:
    """Holm within each family (the primary claims are one family of three): sets `p_adjusted`,
    `adjustment`, `verdict`; adds `size`, `paper_in_ci` and the power columns; orders the columns as
    `CLAIM_COLUMNS`. Ties in p-values keep the claims' order (a stable sort), so the table is the same
    however the runs were listed."""
    frame = rows.copy()
    frame["p_adjusted"] = frame["p_value"].astype(float)
    frame["power_level"] = ALPHA
    frame["adjustment"] = ""
    for family, group in frame.groupby("family", sort=False):
        p_values = group["p_value"].astype(float).tolist()
        frame.loc[group.index, "p_adjusted"] = stats.holm(p_values)
        frame.loc[group.index, "power_level"] = holm_levels(p_values)
        what = "the 3 primary claims" if family == "primary" else f"'{family}' ({len(group)} claims)"
        frame.loc[group.index, "adjustment"] = f"Holm within {what}"
    decided = frame["verdict_unadjusted"].isin(["reproduced", "contradicted"])
    keep = decided & (frame["p_adjusted"] < ALPHA)
    frame["verdict"] = frame["verdict_unadjusted"].where(~decided | keep, "inconclusive")
    bounds = list(zip(frame["paper_effect"], frame["ci_low"], frame["ci_high"], strict=True))
    frame["size"] = [size_word(p, lo, hi) for p, lo, hi in bounds]
    frame["paper_in_ci"] = [
        None if _isnan(p) or _isnan(lo) or _isnan(hi) else bool(lo <= p <= hi) for p, lo, hi in bounds
    ]
    columns = ("detectable_effect", "power_at_paper", "seeds_needed")
    nan = (math.nan, math.nan, math.nan)
    powers = [_power_columns(row) if power else nan for row in frame.to_dict("records")]
    for i, column in enumerate(columns):
        frame[column] = [p[i] for p in powers]
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


def _claim_cells(claim: Claim) -> list[Cell]:
    groups: list[Cells] = (
        [claim.a, claim.b] if isinstance(claim, Difference)
        else [claim.target, *claim.others] if isinstance(claim, Best)
        else list(claim.cells)
    )  # fmt: skip
    return [c for g in groups for c in (g.cells if isinstance(g, Pooled) else (g,))]


def what_would_decide(claim: Mapping[str, Any]) -> str:
    """For an undecided claim, what would decide it, in words (from its power columns); '' otherwise."""
    if claim.get("verdict") != "inconclusive" or _isnan(claim.get("n")):
        return ""
    n, seeds, at_paper = int(claim["n"]), claim.get("seeds_needed"), claim.get("power_at_paper")
    if n < 2 and claim.get("kind") != "association":
        if FAILED_NOTE.search(str(claim.get("detail", ""))):  # runs ran, but they did not learn
            return f"2 seeds or more whose runs learn ({n} did on all it compares)"
        return f"2 seeds or more to test it ({n} ran)"
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
