"""Table 15 (ListOps mean ± std over seeds) and Table 13 (cross-task correlation across seeds)."""

from __future__ import annotations

from pdelra.reporting import style
from pdelra.reporting.display import say
from pdelra.reporting.io import save_table, show_table
from pdelra.reporting.sections import Report


def _table15(report: Report) -> None:
    t15 = report.table("table15")
    shown = t15.assign(
        position=t15["variant"].map(style.variant_label),
        paper=[style.mean_std(m, s) for m, s in zip(t15["paper_mean"], t15["paper_std"], strict=True)],
        ours=[style.mean_std(m, s) for m, s in zip(t15["mean"], t15["std"], strict=True)],
    )
    show_table(
        shown[["position", "paper", "ours", "n", "delta", "std_ratio"]].rename(
            columns={"delta": "Δ mean", "std_ratio": "std ratio (ours/paper)"}
        ),
        report.out_dir,
        "table15",
        "Table 15: ListOps accuracy mean ± std over seeds, paper | ours | Δ",
        formats={"Δ mean": style.DELTA, "std ratio (ours/paper)": style.RATIO},
    )


def _table13(report: Report) -> None:
    import pandas as pd

    t13 = report.table("table13")
    save_table(
        t13,
        report.out_dir,
        "table13_comparison",
        "Table 13 long form: cross-task Pearson correlation across seeds per variant and task pair, paper "
        "and ours",
        formats={"paper": style.RATIO, "ours": style.CORR, "delta": style.CORR},
    )
    pairs = t13.assign(
        pair=[
            f"{style.task_label(a)} ↔ {style.task_label(b)}"
            for a, b in zip(t13["task_a"], t13["task_b"], strict=True)
        ]
    )
    wide = pd.DataFrame({"pair": list(dict.fromkeys(pairs["pair"]))})
    for variant in dict.fromkeys(pairs["variant"]):
        d = pairs[pairs["variant"] == variant].set_index("pair").reindex(wide["pair"])
        wide[style.variant_label(variant)] = [
            style.ours_paper(style.number(o, style.CORR), p, style.RATIO)
            for o, p in zip(d["ours"], d["paper"], strict=True)
        ]
    say(
        "The paper does not say what it correlates. Ours: the Pearson correlation, **across seeds**, of one "
        "variant's test accuracies on two tasks (needs ≥ 3 seeds complete on both; — otherwise). "
        "**Ours (paper)**:"
    )
    show_table(wide)


def render(report: Report) -> None:
    _table15(report)
    _table13(report)
