"""Tables 7/12 and Figures 8, 9, 10: multi-scale diffusion on ListOps (`table12`: accuracy per position and
scale, the gain over the baseline and the best single scale, each computed once in `pdelra.results`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdelra.reporting import style
from pdelra.reporting.display import say
from pdelra.reporting.io import save_table, show_figure, show_table
from pdelra.reporting.sections import Report
from pdelra.reporting.sections.figures import ours_beside_paper_heatmaps
from pdelra.runs import SCALE_ORDER

if TYPE_CHECKING:
    import pandas as pd


def render(report: Report) -> None:
    import pandas as pd

    t12 = report.table("table12")
    save_table(
        t12,
        report.out_dir,
        "table12_comparison",
        "Table 12 long form: ListOps accuracy per position and scale, paper, ours, Δ, gains over the "
        "baseline and the best single scale",
        formats={
            c: style.DELTA for c in ("delta", "gain_over_baseline", "paper_gain_over_baseline", "multi_gain")
        },
    )
    positions = list(dict.fromkeys(t12["variant"]))
    t7 = pd.DataFrame({"position": [style.variant_label(v) for v in positions]})
    for scale in SCALE_ORDER:
        d = t12[t12["scale"] == scale].set_index("variant").reindex(positions)
        t7[style.scale_label(scale)] = [
            style.ours_paper(style.mean_std(m, s), p, style.ACC)
            for m, s, p in zip(d["mean"], d["std"], d["paper"], strict=True)
        ]
    multi = t12[t12["scale"] == "multi"].set_index("variant").reindex(positions)
    t7["multi-scale − best single scale (paper)"] = [
        style.ours_paper(_over(gain, best), _over(paper_gain, paper_best), "{}")
        for gain, best, paper_gain, paper_best in zip(
            multi["multi_gain"],
            multi["best_single_scale"],
            multi["paper_multi_gain"],
            multi["paper_best_single_scale"],
            strict=True,
        )
    ]
    say("Table 7 / 12: ListOps accuracy per scale, **ours (paper)**:")
    show_table(
        t7,
        report.out_dir,
        "table7",
        "Table 7/12: ListOps test accuracy per position and diffusion scale, ours (mean ± std) with the "
        "paper's in brackets, and the multi-scale gain over the best single scale",
    )
    if t12["mean"].notna().sum() == 0:
        say("_No multi-scale runs yet: Figures 8–10 not drawn._")
        return
    _figure8(report, t12, positions)
    _figure9_10(report, t12, positions)


def _figure8(report: Report, t12: pd.DataFrame, positions: list[str]) -> None:
    ours, theirs = (
        t12.pivot(index="variant", columns="scale", values=column)
        .reindex(index=positions, columns=list(SCALE_ORDER))
        .rename(index=style.variant_label, columns=style.scale_label)
        for column in ("mean", "paper")
    )
    fig = ours_beside_paper_heatmaps(
        ours, theirs, "paper (Table 12)", "Figure 8: multi-scale ablation on ListOps", figsize=(11, 3.4)
    )
    show_figure(
        fig,
        report.out_dir,
        "figure8_multiscale_heatmap",
        "Figure 8: ListOps accuracy per position and diffusion scale, ours beside the paper's",
    )


def _figure9_10(report: Report, t12: pd.DataFrame, positions: list[str]) -> None:
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    width = 0.2
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    palette = sns.color_palette("deep", len(SCALE_ORDER))
    for i, scale in enumerate(SCALE_ORDER):
        d = t12[t12["scale"] == scale].set_index("variant").reindex(positions)
        x = np.arange(len(positions)) + (i - 1.5) * width
        for ax, ours, theirs in (
            (axes[0], "gain_over_baseline", "paper_gain_over_baseline"),
            (axes[1], "mean", "paper"),
        ):
            ax.bar(x, d[ours].fillna(0), width, color=palette[i])
            style.std_bars(ax, x, d[ours], d["std"], d["n"].fillna(0))
            ax.scatter(x, d[theirs], marker=style.PAPER_MARKER, color=style.PAPER_COLOUR, s=16, zorder=3)
    axes[0].axhline(0, color="black", linewidth=0.8)
    axes[0].set_ylabel("gain over the baseline (accuracy)")
    axes[0].set_title("Figure 9: improvement over the baseline (ListOps)")
    axes[1].set_ylabel("test accuracy")
    lo = np.nanmin(np.concatenate([t12["mean"].to_numpy(float), t12["paper"].to_numpy(float)]))
    axes[1].set_ylim(max(0.0, lo - 0.05), None)
    axes[1].set_title("Figure 10: accuracy per position and scale (ListOps)")
    for ax in axes:
        labels = [style.variant_label(v) for v in positions]  # slanted: seven labels overlap when level
        ax.set_xticks(np.arange(len(positions)), labels, rotation=30, ha="right", fontsize="small")
    key = [Patch(color=palette[i], label=style.scale_label(s)) for i, s in enumerate(SCALE_ORDER)]
    key.append(
        Line2D([], [], marker=style.PAPER_MARKER, color=style.PAPER_COLOUR, linestyle="none", label="paper")
    )
    fig.tight_layout()
    # One key for both panels, under them: inside, it covered the paper's diamonds.
    fig.legend(handles=key, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(key), fontsize="small")
    show_figure(
        fig,
        report.out_dir,
        "figure9_10_multiscale",
        "Figures 9 and 10: ListOps gain over the baseline and accuracy per position and scale (bars: mean; "
        "error bars: ± std over seeds, none where a bar has one seed; diamonds: paper)",
    )


def _over(gain: float, best: object) -> str:
    """ "+0.0090 over Slow (h=4)": the multi-scale gain over the best single scale."""
    if style.missing(gain) or not isinstance(best, str):
        return style.MISSING
    return f"{style.number(gain, style.DELTA)} over {style.scale_label(best)}"
