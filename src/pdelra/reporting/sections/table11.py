"""Table 11: each position's gain over the baseline per task, paired by seed with its 95 % CI (`table11`),
beside the paper's absolute and relative gains."""

from __future__ import annotations

from pdelra.reporting import style
from pdelra.reporting.display import say
from pdelra.reporting.io import show_table
from pdelra.reporting.sections import Report


def render(report: Report) -> None:
    import pandas as pd

    t11 = report.table("table11")
    positions = style.with_own(style.VARIANTS[1:], t11["variant"])
    out = pd.DataFrame({"position": [style.variant_label(v) for v in positions]})
    for task in style.TASKS:
        cells = t11[t11["task"] == task].set_index("variant").reindex(positions)
        out[style.task_label(task)] = [
            style.ours_paper(style.with_ci(g, lo, hi), p)
            for g, lo, hi, p in zip(
                cells["gain"], cells["ci_low"], cells["ci_high"], cells["paper_gain"], strict=True
            )
        ]
        out[f"{style.task_label(task)} %"] = [
            style.ours_paper(style.number(r, style.PCT), p, style.PCT)
            for r, p in zip(cells["relative_pct"], cells["paper_relative_pct"], strict=True)
        ]
    say(
        "Gain over the baseline in test accuracy, **ours [95 % CI] (paper)**, paired by seed; relative "
        "gain in % of the baseline's accuracy:"
    )
    show_table(
        out,
        report.out_dir,
        "table11",
        "Table 11: gain over the baseline per task, ours (paired by seed, 95 % CI) with the paper's in "
        "brackets, absolute and relative (%)",
    )
