"""Table 10 and Figures 6, 7: test accuracy per position and task beside the paper's
(`table10_comparison`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdelra.reporting import style
from pdelra.reporting.io import save_table, show_figure, show_table
from pdelra.reporting.sections import Report
from pdelra.reporting.sections.figures import ours_beside_paper_heatmaps
from pdelra.runs import BASELINE

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = (*style.TASKS, style.AVERAGE)


def _wide(comparison: pd.DataFrame, values: str) -> pd.DataFrame:
    """variant × task (+ average) of one column, in the paper's order, then a config's own variants."""
    return comparison.pivot(index="variant", columns="task", values=values).reindex(
        index=style.with_own(style.VARIANTS, comparison["variant"]), columns=list(COLUMNS)
    )


def render(report: Report) -> None:
    import pandas as pd

    comp = report.table("table10_comparison")
    cells = comp.assign(cell=[style.mean_std(m, s) for m, s in zip(comp["mean"], comp["std"], strict=True)])
    ours, delta = _wide(cells, "cell"), _wide(comp, "delta")
    out = pd.DataFrame({"position": [style.variant_label(v) for v in ours.index]})
    for task in COLUMNS:
        out[style.task_label(task)] = ours[task].fillna(style.MISSING).to_numpy()
        out[f"Δ {style.task_label(task)}"] = delta[task].to_numpy()
    show_table(
        out,
        report.out_dir,
        "table10",
        "Table 10: test accuracy per task (ours, mean ± std) and Δ = ours − paper; the average only once "
        "every task has a result; the paper's values are in table10_comparison.csv",
        formats={c: style.DELTA for c in out.columns if c.startswith("Δ")},
    )
    save_table(
        comp,
        report.out_dir,
        "table10_comparison",
        "Table 10 long form: paper, our mean, std, n and Δ per variant and task",
        formats={"paper": style.ACC, "mean": style.ACC, "std": style.ACC, "delta": style.DELTA},
    )
    _figure6(report, comp)
    _figure7(report, comp)


def _figure6(report: Report, comp: pd.DataFrame) -> None:
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    per_task = comp[comp["task"] != style.AVERAGE]
    tasks = [t for t in style.TASKS if per_task.loc[per_task["task"] == t, "mean"].notna().any()]
    if not tasks:
        return
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.4 * len(tasks), 4.6), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        d = per_task[per_task["task"] == task].set_index("variant")
        d = d.reindex(style.with_own(style.VARIANTS, d.index))
        x = np.arange(len(d))
        colours = [style.BASELINE_COLOUR if v == BASELINE else style.ours_colour() for v in d.index]
        ax.bar(x, d["mean"].fillna(0), color=colours)
        style.std_bars(ax, x, d["mean"], d["std"], d["n"].fillna(0))
        ax.scatter(x, d["paper"], marker=style.PAPER_MARKER, s=22, color=style.PAPER_COLOUR, zorder=3)
        ax.set_xticks(x, [style.variant_label(v) for v in d.index], rotation=60, ha="right", fontsize="small")
        ax.set_title(style.task_label(task))
        lo = np.nanmin(np.concatenate([d["mean"].to_numpy(float), d["paper"].to_numpy(float)]))
        ax.set_ylim(max(0.0, lo - 0.1), None)
    axes[0][0].set_ylabel("test accuracy")
    key = [
        Patch(color=style.ours_colour(), label="ours (mean; ± std over seeds where n ≥ 2)"),
        Patch(color=style.BASELINE_COLOUR, label="baseline (ours)"),
        Line2D([], [], marker=style.PAPER_MARKER, color=style.PAPER_COLOUR, linestyle="none", label="paper"),
    ]
    fig.suptitle("Figure 6: test accuracy per task")
    fig.tight_layout()
    # The key goes under the panels, where it cannot cover a bar or a diamond.
    fig.legend(handles=key, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize="small")
    show_figure(
        fig,
        report.out_dir,
        "figure6_per_task",
        "Figure 6: test accuracy per task and position, ours (bars: mean; error bars: ± std over seeds, "
        "none where a bar has one seed) with the paper's values (diamonds)",
    )


def _figure7(report: Report, comp: pd.DataFrame) -> None:
    ours, theirs = _wide(comp, "mean"), _wide(comp, "paper")
    if ours.notna().sum().sum() == 0:
        return
    incomplete = ours[style.AVERAGE].isna() & ours.drop(columns=style.AVERAGE).notna().any(axis=1)
    labels = {t: style.task_label(t) for t in COLUMNS}
    ours_labels = labels | ({style.AVERAGE: "Average*"} if incomplete.any() else {})
    note = " (*blank until every task has a result)" if incomplete.any() else ""
    fig = ours_beside_paper_heatmaps(
        ours.rename(index=style.variant_label, columns=ours_labels),
        theirs.rename(index=style.variant_label, columns=labels),
        "paper (Table 10)",
        f"Figure 7: accuracy heatmap (each panel on its own colour scale; warmer = higher){note}",
        figsize=(13, 4.5),
    )
    show_figure(
        fig,
        report.out_dir,
        "figure7_heatmap",
        "Figure 7: accuracy heatmap of every position and task, ours beside the paper's; our average is "
        "blank for a position without a result on every task",
    )
