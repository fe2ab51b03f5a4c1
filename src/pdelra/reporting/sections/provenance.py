"""Provenance: what the runs are (provenance_summary), the data each task was trained on (provenance_data),
the runs per cell (runs_per_cell) and the runs that did not complete (runs.csv)."""

from __future__ import annotations

import datetime as dt

from pdelra.reporting import style
from pdelra.reporting.display import say
from pdelra.reporting.io import save_table, show_table
from pdelra.reporting.sections import Report
from pdelra.runs import BASE_SETTING, COMPLETED, MAIN_SCALE


def render(report: Report) -> None:
    summary = report.table("provenance_summary")
    built = f"report built {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
    partial = " — **partial report** (the grid is still running)" if report.partial else ""
    say(f"- **Experiment** `{report.experiment}`; {built}{partial}")
    if summary.empty:
        say("_No runs yet._")
        return
    show_table(summary, caption="The runs behind every number of this report")
    data = report.table("provenance_data")
    show_table(
        data.rename(columns={"data_hash": "data manifest hash (first 16 hex)", "n_hashes": "distinct"}),
        report.out_dir,
        "provenance_data",
        "Data manifest hash per task (sha256 of the processed data's manifest)",
    )
    _runs_per_cell(report)
    runs = report.table("runs")
    problems = runs[runs["status"] != COMPLETED]
    if len(problems):
        say("Runs that did not complete (left out of every mean, counted in `n_runs` and `n_excluded`):")
        show_table(problems[["task", "variant", "scale", "setting", "seed", "status"]])


def _runs_per_cell(report: Report) -> None:
    cells = report.table("runs_per_cell")
    save_table(
        cells,
        report.out_dir,
        "runs_per_cell",
        "Number of runs and completed runs per cell (task, variant, scale, setting)",
    )
    at_h1 = cells[(cells["setting"] == BASE_SETTING) & (cells["scale"] == MAIN_SCALE)]
    at_h1 = at_h1.assign(cell=at_h1["completed"].astype(str) + "/" + at_h1["runs"].astype(str))
    wide = at_h1.pivot(index="variant", columns="task", values="cell")
    wide = wide.reindex(
        index=[v for v in style.with_own(style.VARIANT_LABELS, wide.index) if v in wide.index],
        columns=[t for t in style.TASKS if t in wide.columns],
    )
    wide = wide.rename(index=style.variant_label, columns=style.task_label)
    say("Completed / total runs per cell at h = 1 (all cells: `tables/runs_per_cell.csv`):")
    show_table(wide.reset_index(names="variant"))
