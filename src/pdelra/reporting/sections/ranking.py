"""Table 4: the ranking the theory predicts beside the paper's measured ranking and ours (`table6`)."""

from __future__ import annotations

from pdelra.reporting import style
from pdelra.reporting.io import show_table
from pdelra.reporting.sections import Report


def render(report: Report) -> None:
    t6 = report.table("table6")
    positions = style.with_own(style.VARIANTS[1:], t6["variant"])  # a config's own: no predicted rank
    t4 = t6[t6["variant"].isin(positions)].sort_values("predicted_rank", na_position="last")
    shown = t4.assign(position=t4["variant"].map(style.variant_label))[
        ["position", "predicted_rank", "paper_rank", "rank", "mean"]
    ]
    show_table(
        shown.rename(
            columns={
                "predicted_rank": "predicted rank (Table 4)",
                "paper_rank": "paper measured rank (Table 6)",
                "rank": "our rank",
                "mean": "our average",
            }
        ),
        report.out_dir,
        "table4_ranking",
        "Table 4's predicted ranking of the seven positions, the paper's measured ranking (Table 6) and ours",
        formats={"our rank": "{:.0f}", "our average": style.ACC},
    )
