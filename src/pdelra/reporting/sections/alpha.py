"""The learned diffusion coefficients α: per position and scale (`learned_alpha`) and every layer of every
run (alpha.csv)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdelra.reporting import style
from pdelra.reporting.display import say
from pdelra.reporting.io import show_figure, show_table
from pdelra.reporting.sections import Report
from pdelra.runs import BASE_SETTING, COMPLETED, RUN_KEYS, SCALE_ORDER

if TYPE_CHECKING:
    import pandas as pd


def render(report: Report) -> None:
    summary = report.table("learned_alpha")
    if summary.empty:
        say("_No completed run with a diffusion layer yet._")
        return
    shown = summary.assign(
        position=summary["variant"].map(style.variant_label), scale=summary["scale"].map(style.scale_label)
    )
    show_table(
        shown[["position", "scale", "n", "mean", "min", "max", "alpha_init"]].rename(
            columns={"n": "layers × runs", "alpha_init": "initial α"}
        ),
        report.out_dir,
        "learned_alpha",
        "Learned effective α (mean over channels and scales) per position and scale: mean, min, max over "
        "layers and runs, beside the initial α",
    )
    _figure(report, summary)


def _figure(report: Report, summary: pd.DataFrame) -> None:
    import matplotlib.pyplot as plt
    import seaborn as sns

    runs = report.table("runs")
    completed = runs.loc[runs["status"] == COMPLETED, list(RUN_KEYS)]
    alpha = report.table("alpha").merge(completed, on=list(RUN_KEYS))  # the runs `learned_alpha` counts
    points = alpha[(alpha["setting"] == BASE_SETTING) & alpha["variant"].isin(set(summary["variant"]))]
    order = [v for v in style.with_own(style.VARIANTS, points["variant"]) if v in set(points["variant"])]
    scales = [s for s in SCALE_ORDER if s in set(points["scale"])]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    sns.stripplot(
        data=points.assign(scale=points["scale"].map(style.scale_label)),
        x="variant",
        y="mean",
        hue="scale",
        order=order,
        hue_order=[style.scale_label(s) for s in scales],
        dodge=True,
        jitter=0.15,
        ax=ax,
    )
    for value in sorted(set(summary["alpha_init"].dropna())):
        ax.axhline(value, color="grey", linestyle=":", linewidth=1)
    ax.set_xticks(range(len(order)), [style.variant_label(v) for v in order], rotation=30, ha="right")
    # Short label: the long one ran into the tick labels.
    ax.set_ylabel("learned α")
    ax.set_xlabel("")
    ax.legend(title="scale", fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("Learned α per layer and run (mean over channels; dotted: initial α)", fontsize="medium")
    show_figure(
        fig,
        report.out_dir,
        "learned_alpha",
        "Learned diffusion coefficient α per position (one point per layer and run, mean over channels; "
        "dotted: initial value)",
    )
