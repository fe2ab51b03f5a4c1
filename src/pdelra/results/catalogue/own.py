"""Claims for a config's own variants (`variants:` in the workflow config; docs/interfaces.md, "Your own
operator at the seven positions"). There is no paper value to reproduce, so each is asked what the paper asks
of its positions — does it beat the baseline? — on every task it ran (ids `table11_sign_{variant}_{task}`, so
Table 11 and the report's sign grid show it beside the paper's positions) and on the average of the paper's
five tasks when it ran on all of them. Where its operators sit at one of the paper's positions
(runs.csv's `own_position`, `pdelra.paper.position_of`) and the paper's diffusion ran there too, it is also
asked whether it beats that diffusion (ids `own_{variant}_vs_{position}_{task}`, and `own_{variant}_vs_
{position}` on the average). They form their own family, `own`, Holm-adjusted apart from the
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
    """The claims of every own variant in the runs table, for the tasks it ran, in the order the report
    shows them: per task, against the baseline, then against the paper's diffusion at its position. An own
    variant is one the config declared (runs.csv's `own_variant`: its runs' model names operators); any
    other unknown name (a typo) gets no claim, and the claims table warns about it."""
    if runs is None or runs.empty or "own_variant" not in runs:
        return ()
    declared = runs[runs["own_variant"].astype(str).str.lower() == "true"]
    claims: list[C.Claim] = []
    for variant in paper.own_variants(declared["variant"]):
        tasks = [t for t in paper.TASKS if ((runs["variant"] == variant) & (runs["task"] == t)).any()]
        tasks += sorted(set(runs.loc[runs["variant"] == variant, "task"]) - set(paper.TASKS))
        position = _position(declared, variant)
        ran_position = set() if position is None else set(runs.loc[runs["variant"] == position, "task"])
        if set(paper.TASKS) <= set(tasks):
            claims.append(_gain(f"own_{variant}_gain", variant, BASELINE, paper.TASKS))
            if set(paper.TASKS) <= ran_position:
                claims.append(_gain(f"own_{variant}_vs_{position}", variant, position, paper.TASKS))
        for task in tasks:
            claims.append(_gain(f"table11_sign_{variant}_{task}", variant, BASELINE, (task,)))
            if position is not None and task in ran_position:
                claims.append(_gain(f"own_{variant}_vs_{position}_{task}", variant, position, (task,)))
    return tuple(claims)


def _position(declared: pd.DataFrame, variant: str) -> str | None:
    """The paper's position the variant's operators occupy (runs.csv's `own_position`), if one."""
    if "own_position" not in declared:
        return None
    found = declared.loc[declared["variant"] == variant, "own_position"].dropna().astype(str)
    found = found[found.isin(paper.POSITIONS)]
    return found.iloc[0] if len(found) else None


def _gain(claim_id: str, variant: str, other: str, tasks: tuple[str, ...]) -> C.Difference:
    """`variant` beats `other` (the baseline, or the paper's diffusion at the same position) on `tasks`."""
    where = "the LRA average" if tasks == paper.TASKS else paper.TASK_LABELS.get(tasks[0], tasks[0])
    label = paper.variant_label(variant)
    if other == BASELINE:
        # Table 11's words for a per-task sign; the LRA average as the paper's gains are stated
        claim = (
            f"{label} vs baseline on {where}: gain"
            if len(tasks) == 1
            else f"{label} beats the baseline on {where}"
        )
    else:
        claim = (
            f"{label} beats the paper's diffusion at its position ({paper.variant_label(other)}) on {where}"
        )
    metric = C.Metric() if tasks == paper.TASKS else C.Metric(tasks=tasks)
    return C.Difference(claim_id, claim, SOURCE, FAMILY, C.Cell(variant), C.Cell(other), math.nan,
                        metric=metric, direction=+1)  # fmt: skip
