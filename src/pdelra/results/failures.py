"""Whether each cell learns: its failed runs, a finding of its own (failures.csv, on both report pages).

A run failed when it diverged, or completed with a test accuracy not distinguishable from chance on its test
set (`pdelra.results.run_index.at_chance`). How well a cell does when it learns is the claims' question
(`pdelra.results.claims`, which names in each row the failed runs it set aside or counted); this table
answers the other one, cell by cell, for every cell with a failed run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdelra import paper
from pdelra.results.claim_types import ACCURACY, Cell
from pdelra.results.run_index import AT_CHANCE_WORD, DIVERGED_WORD, RunIndex, failure_note

if TYPE_CHECKING:
    import pandas as pd

FAILURE_COLUMNS = ("task", "variant", "scale", "setting", "runs", "diverged", "at_chance", "finding")


def failures_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, cell) with a failed run: its runs, how many diverged, how many sat at chance, and
    the finding in words ("After MLP on PathFinder: not distinguishable from chance in 5 of 5 seeds (…)");
    tasks in the paper's order, then the cells in the order the runs table lists them."""
    import pandas as pd

    index = RunIndex(runs)
    rows = []
    for task, variant, scale, setting in index.run_keys():
        cell = Cell(variant, scale, setting)
        found = index.cell(cell, task, ACCURACY)
        if found is None or not found.failed:
            continue
        whys = list(found.failed.values())
        rows.append(
            {
                "task": task,
                "variant": variant,
                "scale": scale,
                "setting": setting,
                "runs": found.seeds,
                "diverged": whys.count(DIVERGED_WORD),
                "at_chance": whys.count(AT_CHANCE_WORD),
                "finding": failure_note(cell, task, found.failed, found.seeds),
            }
        )
    order = {task: i for i, task in enumerate(paper.TASKS)}
    frame = pd.DataFrame(rows, columns=list(FAILURE_COLUMNS))
    return frame.sort_values("task", key=lambda t: t.map(lambda x: order.get(x, len(order))), kind="stable")
