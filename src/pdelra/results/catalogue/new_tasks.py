"""Claims on the tasks the paper does not have (a task of your own, registered in pdelra.tasks with no
`paper` key). There is no paper value to reproduce, so each position or variant that ran on such a task is
asked what Table 11 asks of the paper's: does it beat the baseline there? (ids
`table11_sign_{variant}_{task}`, as for the paper's tasks). A config's own variant is left to its own family
(`pdelra.results.catalogue.own`, which asks the same on every task it ran). They form their own family,
`new_tasks`, Holm-adjusted apart from the paper's claims, whose adjustment stays as it was."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pdelra import paper
from pdelra.results import claims as C
from pdelra.runs import BASELINE

if TYPE_CHECKING:
    import pandas as pd

FAMILY = "new_tasks"
SOURCE = "a task the paper does not have (pdelra.tasks)"


def new_task_claims(runs: pd.DataFrame | None) -> tuple[C.Claim, ...]:
    """Per task the paper lacks (in the runs table's order of first appearance), per variant that ran on it
    beside the baseline (the paper's positions first, in Table 5's order): the variant beats the baseline."""
    if runs is None or runs.empty or "task" not in runs:
        return ()
    own = set()
    if "own_variant" in runs:
        own = set(runs.loc[runs["own_variant"].astype(str).str.lower() == "true", "variant"])
    claims: list[C.Claim] = []
    for task in dict.fromkeys(runs["task"]):
        if task in paper.TASKS:
            continue
        ran = set(runs.loc[runs["task"] == task, "variant"])
        if BASELINE not in ran:
            continue
        others = sorted(ran - {BASELINE} - own, key=lambda v: (_rank(v), v))
        for variant in others:
            label = f"{paper.variant_label(variant)} vs baseline on {paper.TASK_LABELS.get(task, task)}: gain"
            claims.append(
                C.Difference(f"table11_sign_{variant}_{task}", label, SOURCE, FAMILY, C.Cell(variant),
                             C.Cell(BASELINE), math.nan, metric=C.Metric(tasks=(task,)), direction=+1)
            )  # fmt: skip
    return tuple(claims)


def _rank(variant: str) -> int:
    return paper.POSITIONS.index(variant) if variant in paper.POSITIONS else len(paper.POSITIONS)
