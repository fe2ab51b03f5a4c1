"""Table 6 and Figure 3: the LRA average per position, the paper's beside ours (results table `table6`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdelra.reporting import style
from pdelra.reporting.display import say
from pdelra.reporting.io import show_figure, show_table
from pdelra.reporting.sections import Report
from pdelra.runs import BASELINE

if TYPE_CHECKING:
    import pandas as pd


def render(report: Report) -> None:
    t6 = report.table("table6")
    shown = t6.assign(
        position=t6["variant"].map(style.variant_label),
        ours=[style.mean_std(m, s) for m, s in zip(t6["mean"], t6["std"], strict=True)],
    )
    show_table(
        shown[["position", "paper", "ours", "delta", "n"]].rename(columns={"delta": "Δ"}),
        report.out_dir,
        "table6",
        "Table 6: LRA average accuracy per position, paper | ours (mean ± std over seeds) | Δ = ours − paper "
        "(— until every task has a result)",
        formats={"paper": style.ACC, "Δ": style.DELTA},
    )
    _figure3(report, t6)


def _figure3(report: Report, t6: pd.DataFrame) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    if t6["mean"].notna().sum() == 0:
        say("_Figure 3 needs every task for a variant: not run yet._")
        return
    d = t6.sort_values("paper", ascending=True)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    y = np.arange(len(d))
    colours = [style.BASELINE_COLOUR if v == BASELINE else style.ours_colour() for v in d["variant"]]
    ax.barh(y - 0.2, d["mean"].fillna(0), height=0.4, color=colours, label="ours (mean; ± std where n ≥ 2)")
    style.std_bars(ax, y - 0.2, d["mean"], d["std"], d["n"].fillna(0), capsize=3, horizontal=True)
    ax.barh(y + 0.2, d["paper"], height=0.4, color="#f4a582", label="paper (Table 6)")
    ax.set_yticks(y, d["variant"].map(style.variant_label))
    ns = sorted(set(d.loc[d["mean"].notna(), "n"]))
    ax.set_xlabel(f"LRA average test accuracy (ours: n = {', '.join(map(str, ns))} seeds per bar)")
    lo = min(d["mean"].min(skipna=True), d["paper"].min()) - 0.05
    ax.set_xlim(max(0.0, lo), None)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, fontsize="small")
    ax.set_title("Figure 3: LRA average per position (error bars: std over seeds)")
    show_figure(
        fig,
        report.out_dir,
        "figure3_average",
        "Figure 3: LRA average accuracy per position, ours (error bars = std over seeds, none with one "
        "seed) and the paper's; "
        "a position without a result on every task has no bar",
    )
