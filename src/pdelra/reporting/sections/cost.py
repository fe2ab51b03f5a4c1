"""Table 14: the ListOps step-time and memory overhead over the baseline beside the paper's (`table14`), and
the per-seed spread of the step-time overhead of every configuration (`cost_overhead`)."""

from __future__ import annotations

from pdelra.reporting import style
from pdelra.reporting.display import say
from pdelra.reporting.io import show_figure, show_table
from pdelra.reporting.sections import Report

NOISE_NOTE = (
    "Per-run step times of jobs sharing a machine (a CPU demo, a busy node) vary by ±25 % or more between "
    "runs, so an overhead from them can come out negative; the reliable overhead is the interleaved "
    "micro-benchmark (`pdelra bench`, benchmarks/)."
)


def render(report: Report) -> None:
    t14 = report.table("table14")
    configuration = [
        style.variant_label(v) + (" (multi-scale)" if s == "multi" else "")
        for v, s in zip(t14["variant"], t14["scale"], strict=True)
    ]
    shown = t14.assign(
        configuration=configuration,
        ours_time=[
            style.with_ci(m, lo, hi, style.PCT)
            for m, lo, hi in zip(
                t14["time_overhead_pct"],
                t14["time_overhead_ci_low"],
                t14["time_overhead_ci_high"],
                strict=True,
            )
        ],
        step_ms=1000 * t14["median_step_time_s"],
    )
    columns = {
        "configuration": "configuration",
        "paper_time_overhead_pct": "paper time OH %",
        "ours_time": "ours time OH % [95 % CI over seeds]",
        "paper_memory_overhead_pct": "paper memory OH %",
        "memory_overhead_pct": "ours memory OH %",
        "step_ms": "median step (ms)",
        "n": "n",
    }
    show_table(
        shown[list(columns)].rename(columns=columns),
        report.out_dir,
        "table14",
        "Table 14: ListOps step-time and memory overhead over the baseline (%), paper | ours",
        formats={"paper time OH %": style.PCT, "paper memory OH %": style.PCT, "ours memory OH %": style.PCT}
        | {"median step (ms)": "{:.1f}"},
    )
    say(NOISE_NOTE + " Below: the step-time overhead of every configuration on ListOps, paired by seed.")
    _figure(report)


def _figure(report: Report) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    overhead = report.table("cost_overhead")
    if overhead.empty:
        return
    d = overhead.sort_values("mean", ignore_index=True)
    labels = [
        f"{style.variant_label(v)} {style.scale_label(s)}"
        for v, s in zip(d["variant"], d["scale"], strict=True)
    ]
    fig, ax = plt.subplots(figsize=(7.5, 0.35 * len(d) + 1.8))
    y = np.arange(len(d))
    ax.barh(y, d["mean"], color=style.ours_colour())
    style.std_bars(ax, y, d["mean"], d["std"], d["n"].fillna(0), capsize=3, horizontal=True)
    ax.set_yticks(y, labels)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("median step-time overhead over the baseline, same seed (%)")
    ax.set_title("Step-time overhead on ListOps (error bars: std over seeds)")
    show_figure(
        fig,
        report.out_dir,
        "cost_overhead",
        "Step-time overhead of each configuration over the baseline on ListOps: mean over seeds of the "
        "per-seed overhead, error bars = std over seeds (none with one seed); per-run step times on a shared "
        "machine are noisy, so small or negative overheads are within that noise",
    )
