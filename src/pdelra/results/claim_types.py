"""The vocabulary of claims (`pdelra.results.claims`): what a claim compares (`Cell`, `Pooled`, `Metric`),
the three kinds of claim (`Difference`, `Best`, `PairOrder`), their families and the claims table's columns.
Claims are data: `pdelra.results.catalogue` lists them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING

from pdelra import paper, tasks
from pdelra.results.stats import ALPHA
from pdelra.runs import BASE_SETTING, BASELINE, MAIN_SCALE

if TYPE_CHECKING:
    pass


ACCURACY = "test_accuracy"
# A diverged run counts against its method: at chance accuracy, 1 / classes (the tasks': pdelra.tasks;
# CTA's own tasks: IMDb, SST-2 2, AG News 4).
CHANCE_ACCURACY = {
    **{t.name: t.chance for t in tasks.TASKS.values()},
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
# A completed run is "not distinguishable from chance" when its accuracy is within the 95 % binomial interval
# of chance (or below).
FAILURE_Z = NormalDist().inv_cdf(1 - ALPHA / 2)
# a detail's word for the learned runs alone, where failed runs counted against a cell also decide
LEARNED_ALONE = re.compile(r"the runs that learned alone read (\w+)")

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
    # Each part's claims are the family named as it, labelled by its module (pdelra.parts: FAMILY).
    "own": Family("your own variants against the baseline and the paper's diffusion"),
    "new_tasks": Family("each position's gain over the baseline on the tasks the paper does not have"),
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
    "failed_runs",
    "detail",
)


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


def _claim_cells(claim: Claim) -> list[Cell]:
    groups: list[Cells] = (
        [claim.a, claim.b] if isinstance(claim, Difference)
        else [claim.target, *claim.others] if isinstance(claim, Best)
        else list(claim.cells)
    )  # fmt: skip
    return [c for g in groups for c in (g.cells if isinstance(g, Pooled) else (g,))]
