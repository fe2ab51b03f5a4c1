"""Claims for a config's own variants (`variants:` in the workflow config; docs/interfaces.md, "Your own
operator at the seven positions"). There is no paper value to reproduce, so each is asked what the paper asks
of its positions — does it beat the baseline? — on every task it ran (ids `table11_sign_{variant}_{task}`, so
Table 11 and the report's sign grid show it beside the paper's positions) and on the average of the paper's
five tasks when it ran on all of them. They form their own family, `own`, Holm-adjusted apart from the
paper's claims, whose adjustment stays as it was."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pdelra import paper
from pdelra.results import claims as C
from pdelra.runs import BASELINE

if TYPE_CHECKING:
    import pandas as pd

FAMILY = "own"
SOURCE = "your own variant (config `variants:`)"


def own_variant_claims(runs: pd.DataFrame | None) -> tuple[C.Claim, ...]:
    """The claims of every own variant in the runs table, for the tasks it ran. An own variant is one the
    config declared (runs.csv's `own_variant`: its runs' model names operators); any other unknown name
    (a typo) gets no claim, and the claims table warns about it."""
    if runs is None or runs.empty or "own_variant" not in runs:
        return ()
    declared = runs[runs["own_variant"].astype(str).str.lower() == "true"]
    base = C.Cell(BASELINE)
    claims: list[C.Claim] = []
    for variant in paper.own_variants(declared["variant"]):
        tasks = [t for t in paper.TASKS if ((runs["variant"] == variant) & (runs["task"] == t)).any()]
        tasks += sorted(set(runs.loc[runs["variant"] == variant, "task"]) - set(paper.TASKS))
        label = paper.variant_label(variant)
        if set(paper.TASKS) <= set(tasks):
            claims.append(
                C.Difference(
                    f"own_{variant}_gain",
                    f"{label} beats the baseline on the LRA average",
                    SOURCE,
                    FAMILY,
                    C.Cell(variant),
                    base,
                    math.nan,
                    direction=+1,
                )
            )
        claims += [
            C.Difference(
                f"table11_sign_{variant}_{task}",
                f"{label} vs baseline on {paper.TASK_LABELS.get(task, task)}: gain",
                SOURCE,
                FAMILY,
                C.Cell(variant),
                base,
                math.nan,
                metric=C.Metric(tasks=(task,)),
                direction=+1,
            )
            for task in tasks
        ]
    return tuple(claims)
