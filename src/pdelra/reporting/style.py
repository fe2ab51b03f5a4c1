"""How the report and its landing page show things: the paper's labels and order, the verdict colours, the
number formats and the figures' theme. Formatting only: every number shown comes from a CSV of
`pdelra aggregate` (`pdelra.results`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pdelra import paper
from pdelra.reporting.io import MISSING
from pdelra.runs import SCALE_ORDER

# ----------------------------------------------------------------------------------------------------
# Labels and order, from the paper
# ----------------------------------------------------------------------------------------------------
VARIANT_LABELS = paper.VARIANT_LABELS
TASK_LABELS = paper.TASK_LABELS
SCALE_LABELS = dict(
    zip(SCALE_ORDER, ("Fast (h=1)", "Medium (h=2)", "Slow (h=4)", "Multi-scale"), strict=True)
)
STENCIL_LABELS = {"unit": "eq. 6 (unit)", "inverse_h2": "eq. 11 (1/h²)", "paper": "paper Table 16"}
TASKS = paper.TASKS  # the paper's task order (Table 10's columns)
VARIANTS = tuple(paper.TABLE10)  # the baseline, then the seven positions in Table 10's order
AVERAGE = "average"


def variant_label(variant: str) -> str:
    """The paper's label, or a config's own variant's name (paper.variant_label)."""
    return paper.variant_label(variant)


def with_own(order: Iterable[str], present: Iterable[str]) -> list[str]:
    """`order` (the paper's variants a table shows), then the config's own variants among `present`: every
    variant that ran is shown, under its config name when the paper has none (paper.own_variants)."""
    return [*order, *paper.own_variants(present)]


def task_label(task: str) -> str:
    return "Average" if task == AVERAGE else TASK_LABELS.get(task, task)


def scale_label(scale: str) -> str:
    return SCALE_LABELS.get(scale, scale)


# ----------------------------------------------------------------------------------------------------
# Verdicts (report and landing page)
# ----------------------------------------------------------------------------------------------------
VERDICT_COLOURS = {
    "reproduced": "#1a9850",
    "contradicted": "#d73027",
    "inconclusive": "#fdae61",
    "not run": "#bdbdbd",
}
NO_VERDICT_COLOUR = "#ffffff"


def verdict_colour(verdict: Any) -> str:
    return VERDICT_COLOURS.get(verdict, NO_VERDICT_COLOUR) if isinstance(verdict, str) else NO_VERDICT_COLOUR


# ----------------------------------------------------------------------------------------------------
# Numbers
# ----------------------------------------------------------------------------------------------------
ACC = "{:.4f}"  # an accuracy
DELTA = "{:+.4f}"  # a difference of accuracies
PCT = "{:+.1f}"  # an overhead or relative gain in %
CORR = "{:+.2f}"  # a correlation
RATIO = "{:.2f}"


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: Any, fmt: str = ACC) -> str:
    return MISSING if missing(value) else fmt.format(value)


def mean_std(mean: Any, std: Any, fmt: str = ACC) -> str:
    """ "mean ± std" ("mean" alone for one seed; "—" without a mean)."""
    if missing(mean):
        return MISSING
    return fmt.format(mean) if missing(std) else f"{fmt.format(mean)} ± {fmt.format(std)}"


def with_ci(value: Any, low: Any, high: Any, fmt: str = DELTA) -> str:
    """ "x [lo, hi]" ("x" alone without an interval; "—" without a value)."""
    if missing(value):
        return MISSING
    if missing(low) or missing(high):
        return fmt.format(value)
    return f"{fmt.format(value)} [{fmt.format(low)}, {fmt.format(high)}]"


def effect(value: Any) -> str:
    """A claim's effect: accuracy differences and τ to 4 decimals, percentage points to 2."""
    if missing(value):
        return MISSING
    return f"{value:+.4f}" if abs(value) < 1 else f"{value:+.2f}"


def ours_paper(ours: str, theirs: Any, fmt: str = DELTA) -> str:
    """A cell "ours (paper)"."""
    return f"{ours} ({number(theirs, fmt)})"


# ----------------------------------------------------------------------------------------------------
# Figures
# ----------------------------------------------------------------------------------------------------
BASELINE_COLOUR = "#7f7f7f"
PAPER_COLOUR = "crimson"
PAPER_MARKER = "D"


def std_bars(
    ax: Any, x: Any, y: Any, std: Any, n: Any, *, capsize: float = 2, horizontal: bool = False
) -> bool:
    """± std error bars on the values y at positions x (along x when `horizontal`: bars drawn with barh),
    drawn only where n ≥ 2: the std of one seed is no spread, and a zero-length bar with caps would say "no
    variation" (the figures say so in their key or caption). Returns whether a value went without a bar."""
    import numpy as np

    x, y, std, n = (np.asarray(a, dtype=float) for a in (x, y, std, n))
    drawn = np.isfinite(y) & np.isfinite(std) & (n >= 2)
    if drawn.any():
        at, value, err = x[drawn], y[drawn], std[drawn]
        points = (value, at) if horizontal else (at, value)
        bars = {"xerr": err} if horizontal else {"yerr": err}
        ax.errorbar(*points, **bars, fmt="none", ecolor="black", capsize=capsize)
    return bool((np.isfinite(y) & ~drawn).any())


def ours_colour() -> Any:
    import seaborn as sns

    return sns.color_palette("deep")[0]


def apply_theme() -> None:
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
