"""Tables 8 and 9: the configuration actually used beside the paper's (`config_echo`), and the warm-up
against the planned number of steps (`warmup`)."""

from __future__ import annotations

from typing import Any

from pdelra.reporting import style
from pdelra.reporting.display import say
from pdelra.reporting.io import show_table
from pdelra.reporting.sections import Report

FIELD_LABELS = {
    "d_model": "dim",
    "n_layers": "layers",
    "n_heads": "heads",
    "batch_size": "batch",
    "lr": "lr",
    "max_epochs": "epochs",
    "warmup_steps": "warm-up",
    "weight_decay": "weight decay",
}


def _general(value: Any) -> str:
    """Numbers as written in a config (1e-05, 0.003, 128); "—" where the runs do not say."""
    if style.missing(value):
        return style.MISSING
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1:
        return str(int(value))
    return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def render(report: Report) -> None:
    import pandas as pd

    echo = report.table("config_echo")
    if echo.empty:
        say("_No runs yet._")
        return
    rows = []
    for task, d in echo.groupby("task", sort=False):
        row = {"task": style.task_label(task)}
        for field, ours, paper, n in zip(d["field"], d["ours"], d["paper"], d["n_values"], strict=True):
            differs = " (runs differ)" if n > 1 else ""
            row[f"{FIELD_LABELS.get(field, field)} (paper)"] = (
                f"{_general(ours)}{differs} ({_general(paper)})"
            )
        rows.append(row)
    show_table(
        pd.DataFrame(rows),
        report.out_dir,
        "table8_9_config",
        "Tables 8 and 9: the model and training configuration actually used per task, with the paper's "
        "values in brackets",
    )
    warm = report.table("warmup")
    if warm.empty:
        return
    say(
        "Warm-up against the planned number of steps, read from the runs (steps per epoch = ⌈training "
        "examples in the data manifest / batch size⌉, planned = that × max_epochs): where the plan is "
        "shorter than the warm-up, the peak learning rate is never reached."
    )
    shown = warm.assign(
        task=warm["task"].map(style.task_label),
        peak_lr_reached=warm["peak_lr_reached"].map({True: "yes", False: "no"}),
    )
    show_table(
        shown.rename(
            columns={
                "steps_per_epoch": "steps per epoch",
                "planned_steps": "planned steps",
                "warmup_steps": "warm-up steps",
                "peak_lr_reached": "peak lr reached",
                "highest_lr_fraction": "highest lr / peak",
            }
        ),
        report.out_dir,
        "warmup",
        "Planned optimiser steps per task (from the runs' data manifests) against the warm-up length",
        formats={"highest lr / peak": style.RATIO},
    )
