"""The operator-theory diagnostics — display only.

`render(report)` reads, through `report.table`, the tables `pdelra.results.diagnostics.summarise` made
(written by `pdelra aggregate`) and shows, computing no statistic:
- figure `diagnostics_roughness_depth` (table `diagnostics_depth`): relative roughness of the residual stream
  through depth, per position, one panel per task (the paper's task order);
- figures `diagnostics_commutator` / `diagnostics_commutator_branch` (table `diagnostics_per_block`): the
  trained commutator per unit α and the probe's commutator per position and block;
- tables `diagnostics_per_position`, `diagnostics_bound` (the compositional bound) and
  `diagnostics_mechanism`, and figure `diagnostics_mechanism` (table `diagnostics_points`);
- a line naming the runs `pdelra diagnose` skipped and why (table `diagnostics_skipped`).
Figures use the `base` setting and the main scale (h1) when present. Without the tables: "not run". The
notebook prints the section's heading.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from pdelra.paper import TASK_LABELS, TASKS, VARIANT_LABELS
from pdelra.reporting.display import say
from pdelra.reporting.io import show_figure, show_table
from pdelra.reporting.sections import Report
from pdelra.runs import BASE_SETTING, MAIN_SCALE

if TYPE_CHECKING:
    import pandas as pd

PROBE = "probe diffusion (α = 0.1, h = 1)"
SKIPPED_NAMED = 10  # skipped runs named in the section's line; the rest are counted (the CSV has them all)
KINDS = {"trained": "trained diffusion", "probe": PROBE}
# figure name → (commutator column of the trained rows, of the probe rows, colour-bar label)
COMMUTATOR_FIGURES = {
    "diagnostics_commutator": ("commutator_per_alpha", "commutator", "‖D(M(x)) − M(D(x))‖ / ‖M(x)‖"),
    "diagnostics_commutator_branch": (
        "commutator_branch_per_alpha",
        "commutator_branch",
        "‖D(A(x)) − A(D(x))‖ / ‖A(x)‖",
    ),
}
PREDICTOR_LABELS = {
    "commutator_per_alpha": "commutator per unit α",
    "commutator_branch_per_alpha": "branch commutator per unit α",
    "roughness_reduction": "roughness reduction",
}

COMMUTATOR_NOTE = (
    "**What the commutator can and cannot tell.** ‖D(M(x)) − M(D(x))‖/‖M(x)‖ compares diffusing after a "
    "block's attention sub-layer M with diffusing before it, both applied to the stream x entering that "
    "block. It is zero exactly when the order does not matter, so a large value says that the same D "
    "placed before or after this attention gives different representations: the paper's non-"
    'commutativity. It does not say which order is better, and it is not a measurement of "before '
    'attention" versus "after attention" as trained: it is computed on the block input for every position'
    " (a model trained with D after attention is probed in both orders, like one trained with D before "
    "it), so it compares two hypothetical placements at one point. It grows with α (to first order [D, M]"
    " = α[Δ, M]), so the trained commutator is shown per unit α, and the probe uses the same α = 0.1 in "
    "every run. Whether it explains the accuracy gains is a separate, statistical question: the mechanism"
    " test below."
)
AMPLIFICATION_NOTE = (
    "**Method note (deviation): the downstream amplification.** The revised paper bounds an insertion's "
    "effect by roughness × downstream amplification but gives no way to compute the amplification. Here it "
    "is the largest singular value of the Jacobian of the logits with respect to the operator's output, "
    "computed exactly per example (one backward pass per class; not a power iteration) on the first "
    "validation examples of the fixed diagnostics batch (`pdelra diagnose --amplification-examples`), at the "
    "trained model's own forward pass. It is a local gain at that point — a lower bound on the Lipschitz "
    "constant of the rest of the network over any region containing it, not a global Lipschitz bound — so "
    "the composed bound amplification × β√E(x) is a first-order statement: the table shows how often the "
    "measured logit change (D replaced by the identity; the probe inserted) stayed below it."
)


# ----------------------------------------------------------------------------------------------------------
# Labels and selection (no statistics)


def _variant(v: str) -> str:
    return VARIANT_LABELS.get(v, v)


def _task(t: str) -> str:
    return TASK_LABELS.get(t, t)


def _task_order(tasks: Any) -> list[str]:
    present = set(tasks)
    return [t for t in TASKS if t in present] + sorted(present - set(TASKS))


def _variant_order(variants: Any) -> list[str]:
    order = list(VARIANT_LABELS)
    return sorted(set(variants), key=lambda v: (order.index(v) if v in order else len(order), v))


def _main_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of the base setting at the main scale (h1) when the table has it."""
    frame = frame[frame["setting"] == BASE_SETTING]
    if MAIN_SCALE in set(frame["scale"]):
        frame = frame[frame["scale"] == MAIN_SCALE]
    return frame


def _colours(variants: list[str]) -> dict[str, Any]:
    # tab10, then black and grey (the demo diagnoses 11 variants); markers tell any further repeat apart.
    palette = [*sns.color_palette("tab10"), (0.0, 0.0, 0.0), (0.55, 0.55, 0.55)]
    return {variant: palette[i % len(palette)] for i, variant in enumerate(variants)}


MARKERS = "osD^vP*Xhp<>"


def _markers(keys: list[str]) -> dict[str, str]:
    """A marker per key, cycling when there are more keys than markers (the demo diagnoses 11 variants)."""
    return {key: MARKERS[i % len(MARKERS)] for i, key in enumerate(keys)}


# ----------------------------------------------------------------------------------------------------------
# Figures


def figure_roughness(depth: pd.DataFrame) -> Any:
    """Relative roughness by depth per position (colour and marker keyed below), one panel per task; each
    line is the seed mean, its band the range over seeds (drawn from the per-run rows, no statistic kept)."""
    data = _main_rows(depth)
    if data.empty:
        return None
    tasks = _task_order(data["task"])
    variants = _variant_order(data["variant"])
    colours = _colours(variants)
    markers = _markers(variants)
    cols = min(len(tasks), 3)
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.4 * rows + 1.2), squeeze=False, sharey=True)
    for ax, task in zip(axes.flat, tasks, strict=False):
        mine = data[data["task"] == task]
        for v in variants:
            lines = mine[mine["variant"] == v].pivot_table(index="depth", columns="seed", values="roughness")
            if lines.empty:
                continue
            ax.plot(lines.index, lines.mean(axis=1), marker=markers[v], color=colours[v], label=_variant(v))
            if lines.shape[1] > 1:
                ax.fill_between(
                    lines.index, lines.min(axis=1), lines.max(axis=1), color=colours[v], alpha=0.15
                )
        ax.set_title(_task(task), fontsize=12)
        ax.set_xticks(sorted(mine["depth"].unique()))
        ax.tick_params(labelsize=10)
    for ax in list(axes.flat)[len(tasks) :]:
        ax.remove()
    fig.supxlabel("depth: block entered (last: output of the last block)", fontsize=11)
    fig.supylabel("relative roughness E(x)/‖x‖²", fontsize=11)
    handles = [plt.Line2D([], [], color=colours[v], marker=markers[v], label=_variant(v)) for v in variants]
    fig.legend(handles=handles, title="position or system", loc="center right", frameon=False, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - 1.9 / fig.get_figwidth(), 1))  # the key's column on the right
    return fig


def _heatmap(ax: Any, grid: pd.DataFrame, vmax: float) -> Any:
    """grid as a heat map with each cell's value written in it; matplotlib directly (seaborn's heatmap
    redraws the whole figure per call)."""
    values = grid.to_numpy(dtype=float)
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0, vmax=vmax, aspect="auto")
    for (row, col), value in np.ndenumerate(values):
        if np.isfinite(value):
            red, green, blue, _ = image.cmap(image.norm(value))
            colour = "white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black"
            ax.text(col, row, f"{value:.2g}", ha="center", va="center", fontsize=10, color=colour)
    ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns], fontsize=10)
    ax.set_yticks(range(len(grid.index)), [_variant(v) for v in grid.index], fontsize=10)
    ax.tick_params(length=0)
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    return image


def figure_commutator(blocks: pd.DataFrame, trained_column: str, probe_column: str) -> Any:
    """Per task (columns, the paper's order): the trained commutator per unit α (top) and the probe's
    (bottom) per position and block. The panels of a row share one set of positions and blocks (the union
    over tasks; a cell a task did not measure is blank), so a position sits at the same height in every
    panel of the row; positions without a value anywhere in a row are left out, not drawn empty."""
    data = _main_rows(blocks)
    tasks = _task_order(data["task"])
    panels = []  # (row, task, grid)
    for row, (kind, column) in enumerate((("trained", trained_column), ("probe", probe_column))):
        cells = data[(data["kind"] == kind) & data[column].notna()]
        variants, block_ids = _variant_order(cells["variant"]), sorted(cells["block"].unique())
        for task in tasks:
            mine = cells[cells["task"] == task]
            if len(mine):
                grid = mine.pivot_table(index="variant", columns="block", values=column)
                panels.append((row, task, grid.reindex(index=variants, columns=block_ids)))
    rows_present = sorted({r for r, _, _ in panels})
    if not panels:
        return None
    height = max(len(g) for _, _, g in panels)
    width = max(len(g.columns) for _, _, g in panels)
    fig, axes = plt.subplots(
        len(rows_present),
        len(tasks),
        figsize=(
            1.0 * width * len(tasks) + 2.2 * len(tasks) + 1.5,
            (0.45 * height + 1.8) * len(rows_present),
        ),
        squeeze=False,
        layout="constrained",  # titles, tick labels and colour bars never run into the next row
    )
    for r, row in enumerate(rows_present):
        mine = [(t, g) for rr, t, g in panels if rr == row]
        vmax = max(float(g.max().max()) for _, g in mine) or 1.0
        image = None
        for c, task in enumerate(tasks):
            ax = axes[r][c]
            grid = next((g for t, g in mine if t == task), None)
            if grid is None:
                ax.axis("off")
                ax.text(0.5, 0.5, f"{_task(task)}: not run", ha="center", va="center", fontsize=10)
                continue
            labelled = image is not None  # positions are named on the row's first drawn panel only
            image = _heatmap(ax, grid, vmax)
            kind = "trained" if row == 0 else "probe"
            title = "trained D, per unit α" if kind == "trained" else "probe D (α = 0.1)"
            ax.set_title(f"{_task(task)}: {title}", fontsize=11)
            ax.set_xlabel("block", fontsize=10)
            if labelled:
                ax.set_yticklabels([])  # the row's panels share their positions (see the docstring)
        if image is not None:
            # A short key: the full quantity is in the caption (a long label outgrows a short row).
            key = "per unit α" if row == 0 else "probe, α = 0.1"
            fig.colorbar(image, ax=list(axes[r]), label=key, fraction=0.025, pad=0.01)
    return fig


def figure_mechanism(points: pd.DataFrame, test: pd.DataFrame) -> Any:
    """Per predictor: each (task, position) as its deviation from the task's mean (predictor and gain: the
    within-task view the test reads), coloured by task, marker by position; keys below the panels."""
    predictors = [p for p in PREDICTOR_LABELS if f"{p}_within" in points.columns]
    tasks = _task_order(points["task"])
    variants = _variant_order(points["variant"])
    colours = dict(zip(tasks, plt.get_cmap("tab10").colors, strict=False))
    markers = _markers(variants)
    fig, axes = plt.subplots(1, len(predictors), figsize=(4.8 * len(predictors), 4.6), squeeze=False)
    verdicts = test.set_index("predictor")
    for ax, predictor in zip(axes[0], predictors, strict=True):
        for p in points.itertuples(index=False):
            x, y = getattr(p, f"{predictor}_within"), 100 * p.gain_within
            if not (math.isnan(x) or math.isnan(y)):
                ax.scatter(x, y, color=colours[p.task], marker=markers[p.variant], s=40, alpha=0.85)
        ax.axhline(0, color="grey", lw=0.8)
        ax.axvline(0, color="grey", lw=0.8)
        row = verdicts.loc[predictor] if predictor in verdicts.index else None
        answer = "not run" if row is None else str(row["answer"])
        stat = (
            ""
            if row is None or math.isnan(row["statistic"])
            else f"within-task ρ = {row['statistic']:+.2f}\n"
        )
        ax.set_title(f"{stat}{answer}", fontsize=10, wrap=True)
        ax.set_xlabel(f"{PREDICTOR_LABELS[predictor]} − task mean", fontsize=11)
        ax.tick_params(labelsize=10)
    axes[0][0].set_ylabel("gain − task mean (points)", fontsize=11)
    task_keys = [plt.Line2D([], [], ls="", marker="o", color=colours[t], label=_task(t)) for t in tasks]
    variant_keys = [
        plt.Line2D([], [], ls="", marker=markers[v], color="black", label=_variant(v)) for v in variants
    ]
    fig.legend(handles=task_keys, title="task (colour)", loc="lower left", ncol=len(tasks), frameon=False,
               fontsize=9, bbox_to_anchor=(0.0, 0.0))  # fmt: skip
    fig.legend(handles=variant_keys, title="position (marker)", loc="lower right", ncol=4, frameon=False,
               fontsize=9, bbox_to_anchor=(1.0, 0.0))  # fmt: skip
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig


# ----------------------------------------------------------------------------------------------------------
# Tables as shown (labels and headers; the CSVs keep the raw columns)

PER_POSITION_HEADERS = {
    "task": "Task",
    "variant": "Position",
    "scale": "Scale",
    "setting": "Setting",
    "alpha_mean": "mean α",
    "commutator": "commutator",
    "commutator_per_alpha": "commutator / α",
    "probe_commutator": "probe commutator",
    "roughness_reduction": "roughness reduction",
    "bound_ratio": "‖D(x)−x‖ / bound",
    "seeds": "seeds",
}
BOUND_HEADERS = {
    "task": "Task",
    "variant": "Position",
    "kind": "D",
    "position": "insertion point",
    "amplification": "amplification σ",
    "logit_change": "‖Δ logits‖",
    "amplified_perturbation": "σ·‖D(x)−x‖",
    "composed_bound": "σ·β√E (bound)",
    "ratio": "‖Δ logits‖ / bound",
    "held_share": "held (share)",
    "examples": "examples",
}
MECHANISM_HEADERS = {
    "description": "Predictor",
    "expected_sign": "expected sign",
    "points": "points",
    "tasks": "tasks",
    "statistic": "within-task ρ",
    "p_value": "p",
    "p_adjusted": "p (Holm)",
    "verdict_unadjusted": "unadjusted",
    "verdict": "verdict (Holm)",
}


def _shown(frame: pd.DataFrame, headers: dict[str, str]) -> pd.DataFrame:
    """The columns `headers` names, paper labels for tasks and positions, readable headers."""
    out = frame[[c for c in headers if c in frame.columns]].copy()
    order = [c for c in ("task", "variant") if c in out]
    if order:  # the paper's order of tasks and positions, not the alphabet's
        tasks, variants = _task_order(out.get("task", [])), _variant_order(out.get("variant", []))
        rank = {"task": tasks.index, "variant": variants.index}
        out = out.sort_values(order, key=lambda col: col.map(rank[col.name]), kind="stable")
    if "task" in out:
        out["task"] = out["task"].map(_task)
    if "variant" in out:
        out["variant"] = out["variant"].map(_variant)
    if "kind" in out:
        out["kind"] = out["kind"].map(lambda k: "trained" if k == "trained" else "probe (α = 0.1)")
    return out.rename(columns=headers)


def skipped_line(skipped: pd.DataFrame) -> str | None:
    """The runs diagnose skipped as one line, each with its reason (the first SKIPPED_NAMED, the others
    counted); None when it skipped none."""
    if skipped.empty:
        return None
    named = [
        f"{_task(r.task)}, {_variant(r.variant)} ({r.scale}, {r.setting}, seed {r.seed}): {r.reason}"
        for r in skipped.head(SKIPPED_NAMED).itertuples(index=False)
    ]
    more = len(skipped) - len(named)
    rest = f"; and {more} more (every one in the table `diagnostics_skipped`)" if more else ""
    runs = f"{len(skipped)} run" if len(skipped) == 1 else f"{len(skipped)} runs"
    return f"**Not diagnosed** ({runs}, left out of every diagnostic): {'; '.join(named)}{rest}."


# ----------------------------------------------------------------------------------------------------------
# The section


def render(report: Report) -> None:
    """Display the diagnostics section and save its figures and tables. No heading: the notebook prints
    it."""
    out_dir = report.out_dir
    position = report.table("diagnostics_per_position")
    skipped = skipped_line(report.table("diagnostics_skipped"))
    if position.empty:
        if skipped is None:
            say(
                f"*Diagnostics not run: none measured in {report.tables_dir} (the config's "
                "`diagnostics.enabled` is false, or `pdelra diagnose` has not run).*"
            )
        else:
            say("*Diagnostics not run: every run diagnosed was skipped, as follows.*")
            say(skipped)
        return
    say(
        "Measured by `pdelra diagnose` on the first validation examples of each task with each run's "
        "best-validation weights. Roughness is the Dirichlet energy E(x) = Σ‖x_{i+1} − x_i‖² over valid "
        "tokens, shown relative to ‖x‖². M is a block's attention sub-layer on the residual stream, "
        "A = M − I its branch, and D either the run's trained diffusion or a fixed probe D = I + 0.1·Δ₁ "
        "(the same in every run, the baseline included)."
    )
    if skipped is not None:
        say(skipped)
    say(COMMUTATOR_NOTE)
    depth = report.table("diagnostics_depth")
    fig = None if depth.empty else figure_roughness(depth)
    if fig is None:
        say("*diagnostics_roughness_depth: not run (no residual-stream rows).*")
    else:
        show_figure(
            fig,
            out_dir,
            "diagnostics_roughness_depth",
            "Relative roughness E(x)/‖x‖² of the residual stream through depth, per position (base setting, "
            "h1); line: seed mean, band: range over seeds.",
        )
    blocks = report.table("diagnostics_per_block")
    for name, (trained, probe, label) in COMMUTATOR_FIGURES.items():
        fig = None if blocks.empty else figure_commutator(blocks, trained, probe)
        if fig is None:
            say(f"*{name}: not run (no commutator measured).*")
            continue
        show_figure(
            fig,
            out_dir,
            name,
            f"Diffusion–attention commutator {label} per position and block: trained D per unit α (top; "
            "Head Diffusion acts along heads and has none) and the probe α = 0.1 (bottom); seed means (base "
            "setting, h1). The panels of a row share their rows; blank: not measured (no operator in that "
            "block, or the position did not run on that task).",
        )
    show_table(
        _shown(position, PER_POSITION_HEADERS),
        out_dir,
        "diagnostics_per_position",
        "Per position: trained commutator (raw and per unit α), probe commutator, roughness reduction "
        "1 − rel_out/rel_in of the trained operators and ‖D(x) − x‖/bound (≤ 1 by the theory); means over "
        "blocks, then seeds.",
        formats={"seeds": "{:.0f}"},
    )
    say(AMPLIFICATION_NOTE)
    bound = report.table("diagnostics_bound")
    if not bound.empty:
        show_table(
            _shown(_main_rows(bound), BOUND_HEADERS),
            out_dir,
            "diagnostics_bound",
            "The compositional bound: measured change of the logits when D is removed (trained) or inserted "
            "(probe), beside amplification σ × ‖D(x) − x‖ and the composed bound σ × β√E(x); 'held': share "
            "of examples with ‖Δ logits‖ ≤ bound (base setting, h1).",
            formats={"examples": "{:.0f}", "held (share)": "{:.2f}"},
        )
    else:
        say("*Compositional bound: not run (diagnostics measured without the logit effects).*")
    mechanism, points = report.table("diagnostics_mechanism"), report.table("diagnostics_points")
    if mechanism.empty or points.empty:
        say("*Mechanism test not run: no (task, position) points with a baseline run.*")
        return
    show_table(
        _shown(mechanism, MECHANISM_HEADERS),
        out_dir,
        "diagnostics_mechanism",
        "Mechanism test: does the predictor go with the accuracy gain over the baseline within a task? Mean "
        "within-task Spearman ρ over (task, position) seed means; permutation test shuffling positions only "
        "inside each task; p two-sided scale in the theory's direction; Holm over the three predictors.",
        formats={"points": "{:.0f}", "tasks": "{:.0f}"},
    )
    show_figure(
        figure_mechanism(points, mechanism),
        out_dir,
        "diagnostics_mechanism",
        "Mechanism test, the within-task view: each point is one (task, position), predictor and gain as "
        "deviations from the task's mean (what the test compares); title: the verdict after Holm.",
    )
