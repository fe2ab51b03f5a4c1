"""How many seeds each claim needs before the GPU time is spent: `pdelra plan --power CONFIG [--tables DIR]`.

Every paper claim is judged, as `pdelra.results.claims` would judge it, on the paper's own numbers (Table 10
per task, Table 12 for ListOps' scales) with an assumed noise per run, alike in every cell: a pilot's
run-to-run variance where at least three cells of the task's main grid have one (`--tables`: its runs.csv; the
mean of those cells' variances, `pdelra.results.design`), else the
paper's Table 15 spread (`TABLE15_SD`: the root mean square of its four ListOps stds, 0.43 pp; a spread over
seeds, so it includes the seed effect the paired design removes, and errs on the side of more seeds). What
comes out per claim is the spread of one seed's value of its effect and the seeds for 80 % power at the
paper's effect (`pdelra.results.power`) at its planned level: inside a Holm family, the directional claims
expected to be decided first (largest paper effect per unit of spread) meet α / m, the next α / (m − 1), and
so on; the no-difference claims, decided last and each needing every other one, meet α / (their number).
Each comparison's df follow the variance model: moderated toward the grid from 5 seeds on, its cells' own
below (`DegreesOfFreedom`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.results import claims as C
from pdelra.results import power
from pdelra.results.catalogue.paper import paper_claims
from pdelra.results.design import MIN_REFERENCE
from pdelra.results.stats import ALPHA
from pdelra.runs import BASELINE, MAIN_SCALE, SCALE_ORDER

if TYPE_CHECKING:
    import pandas as pd

TABLE15_SD = math.sqrt(sum(sd**2 for _, sd in paper.TABLE15.values()) / len(paper.TABLE15))
PLANNING_SEEDS = 5  # the paper's seeds: the assumed design's df at which a pilot-free spread is stated
SEED_CHOICES = (3, 5, 8, 10, 15, 20)  # the seed counts the plan prices


def paper_runs(seeds: int = PLANNING_SEEDS) -> pd.DataFrame:
    """The paper's grids as a runs table at the paper's values, every seed alike (the effects; the noise is
    assumed separately)."""
    import pandas as pd

    rows = []
    for task in paper.TASKS:
        for variant in (BASELINE, *paper.POSITIONS):
            scales = SCALE_ORDER if task == "listops" and variant in paper.TABLE12 else (MAIN_SCALE,)
            for scale in scales:
                value = paper.TABLE10[variant][task] if scale == MAIN_SCALE else paper.TABLE12[variant][scale]
                cost = paper.TABLE14.get((variant, scale), {}).get("time_overhead_pct", 0.0)
                rows += [
                    {"task": task, "variant": variant, "scale": scale, "setting": C.BASE_SETTING, "seed": s,
                     "status": C.COMPLETED, C.ACCURACY: value, "median_step_time_s": 1 + cost / 100}
                    for s in range(seeds)
                ]  # fmt: skip
    return pd.DataFrame(rows)


def assumed_noise(pilot: pd.DataFrame | None) -> dict[str, tuple[float, str]]:
    """Per task: (variance of one run, where it comes from): the pilot's, the mean of its main grid's cell
    variances (`pdelra.results.design`, less each one's reference share), where at least three of its cells
    have one; else Table 15."""
    noise = {task: (TABLE15_SD**2, "Table 15") for task in paper.TASKS}
    if pilot is not None and len(pilot):
        index = C.RunIndex(pilot)
        for task in paper.TASKS:
            cells = index.noise(task, "main", C.ACCURACY).cells.values()
            if len(cells) > MIN_REFERENCE:
                variance = sum(c.variance / (1 + 1 / c.reference) for c in cells) / len(cells)
                seeds = max(c.own_df for c in cells) + 1
                noise[task] = (variance, f"pilot ({len(cells)} cells × {seeds} seeds)")
    return noise


def planned_levels(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each claim's planned Holm level within its family (see the module's docstring)."""
    levels: dict[str, float] = {}
    for family in dict.fromkeys(r["family"] for r in rows):
        members = [r for r in rows if r["family"] == family]
        equivalence = [r for r in members if not math.isnan(r["_margin"])]
        directional = sorted(
            (r for r in members if math.isnan(r["_margin"])),
            key=lambda r: -min(abs(g) / sd for g, sd, _ in r["_terms"]),
        )
        for k, r in enumerate(directional):
            levels[r["claim_id"]] = ALPHA / (len(members) - k)
        for r in equivalence:
            levels[r["claim_id"]] = ALPHA / len(equivalence)
    return levels


def seeds_table(pilot: pd.DataFrame | None = None, seeds: int = PLANNING_SEEDS) -> pd.DataFrame:
    """Per paper claim with an accuracy effect: family, paper effect, spread source, the spread of one
    seed's value of the effect, planned level, power at `seeds` and the seeds for 80 % power."""
    import pandas as pd

    noise = assumed_noise(pilot)
    index = C.RunIndex(paper_runs(PLANNING_SEEDS))
    index.assume_noise({task: variance for task, (variance, _) in noise.items()})
    rows: list[dict[str, Any]] = []
    for claim in paper_claims():
        if claim.metric.column != C.ACCURACY:
            continue  # step times: no assumed spread to plan with
        row = C.judge(claim, index)
        terms = [t for t in row.get("_terms") or [] if not math.isnan(t[1]) and t[1] > 0]
        if not terms:
            continue
        sources = sorted({noise[t][1] for t in claim.metric.tasks if t in noise})
        rows.append(
            {
                "claim_id": claim.claim_id,
                "family": claim.family,
                "paper_effect": claim.paper_effect,
                "spread_from": "; ".join(sources),
                "sd_per_seed": max(t[1] for t in terms),
                "_terms": terms,
                "_correlation": row.get("_correlation"),
                "_margin": row.get("_margin", math.nan),
            }
        )
    frame = pd.DataFrame(rows)
    levels = planned_levels(rows)
    frame["level"] = frame["claim_id"].map(levels)
    planned = [
        power.claim_power(r["_terms"], r["_correlation"], r["_margin"], seeds, levels[r["claim_id"]])
        for r in rows
    ]
    frame[f"power_at_{seeds}"] = [p for p, _ in planned]
    frame["seeds_for_80"] = [s for _, s in planned]
    return frame.drop(columns=["_terms", "_correlation", "_margin"])


def choices(
    table: pd.DataFrame, hours_per_seed: float | None, counts: Sequence[int] = SEED_CHOICES
) -> pd.DataFrame:
    """Per seed count: how many claims reach 80 % power (primary ones apart) and the GPU-hours it costs."""
    import pandas as pd

    enough = table["seeds_for_80"]
    primary = table["family"] == "primary"
    n_primary = int(primary.sum())
    return pd.DataFrame(
        [
            {
                "seeds": n,
                "primary claims at 80 % power": f"{int(((enough <= n) & primary).sum())} of {n_primary}",
                "all claims at 80 % power": f"{int((enough <= n).sum())} of {len(table)}",
                "GPU-hours (training)": math.nan if hours_per_seed is None else hours_per_seed * n,
            }
            for n in counts
        ]
    )
