"""How many seeds each claim needs before the GPU time is spent: `pdelra plan --power CONFIG [--tables DIR]`.

The claims planned are those of the config's cells: the paper's claims whose every cell it runs (the others
are listed as not planned) and its own variants' (`pdelra.results.catalogue.own`). Each is judged, as
`pdelra.results.claims` would judge it, on the values the plan assumes (`planned_runs`: the paper's own
numbers, Table 10 per task and Table 12 for ListOps' scales; an own variant at the paper's diffusion at the
position its operators occupy, else at the baseline) with an assumed noise per run, alike in every cell: a
pilot's run-to-run variance where at least three cells of the task's main grid have one (`--tables`: its
runs.csv; the mean of those cells' variances, `pdelra.results.design`), else the paper's Table 15 spread
(`TABLE15_SD`: the root mean square of its four ListOps stds, 0.43 pp; a spread over seeds, so it includes
the seed effect the paired design removes, and errs on the side of more seeds). A claim whose cells lie
outside the task's grid (an own variant's), or whose task the pilot's grid does not measure, takes the
pilot's own spread of that comparison, as the claims table measures it, or says why the pilot has none.
What comes out per claim is the spread of one seed's value of its effect, the seeds for 80 % power at the
effect aimed at (`pdelra.results.power`) and the smallest effect the config's seeds detect, at its planned
level: inside a Holm family, the directional claims expected to be decided first (largest effect per unit
of spread) meet α / m, the next α / (m − 1), and so on; the no-difference claims, decided last and each
needing every other one, meet α / (their number). Each comparison's df follow the variance model: moderated
toward the grid from 5 seeds on as far as cells of equal spreads borrow on average (`design.expected_df`),
its cells' own below and the baseline's own always (`DegreesOfFreedom`). The power at the config's seeds of
the paper's claims is not that formula's but the claims engine's own rate on tables drawn at the planned
values and noise (`simulated_power`): it includes the engine's random df and Holm's step-down, where a claim
decided late reaches its level only after the claims before it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pdelra import paper
from pdelra.results import claims as C
from pdelra.results import power
from pdelra.results.catalogue.own import FAMILY as OWN_FAMILY
from pdelra.results.catalogue.own import own_variant_claims
from pdelra.results.catalogue.paper import paper_claims
from pdelra.results.design import MIN_REFERENCE
from pdelra.results.stats import ALPHA
from pdelra.runs import BASELINE, MAIN_SCALE, SCALE_ORDER

if TYPE_CHECKING:
    import pandas as pd

TABLE15_SD = math.sqrt(sum(sd**2 for _, sd in paper.TABLE15.values()) / len(paper.TABLE15))
PLANNING_SEEDS = 5  # the paper's seeds: the assumed design's df at which a pilot-free spread is stated
SEED_CHOICES = (3, 5, 8, 10, 15, 20)  # the seed counts the plan prices
# Replications of `simulated_power`: its Monte Carlo se is at most 3.5 pp (at 50 %), 2.1 pp at 90 %; about
# 0.05–0.15 s each for the paper's grids.
POWER_DRAWS = 200


# A planned cell: (task, variant, scale, setting), as `pdelra.planning.experiment.lra_runs` lists them.
PlannedCell = tuple[str, str, str, str]


def paper_cells() -> list[PlannedCell]:
    """The paper's grids: the baseline and seven positions on five tasks, and ListOps' scales."""
    return [
        (task, variant, scale, C.BASE_SETTING)
        for task in paper.TASKS
        for variant in (BASELINE, *paper.POSITIONS)
        for scale in (SCALE_ORDER if task == "listops" and variant in paper.TABLE12 else (MAIN_SCALE,))
    ]


def own_positions(config: Mapping[str, Any]) -> dict[str, str | None]:
    """{own variant: the paper's position its operators occupy, or None} of a config's `variants:`."""
    return {name: paper.position_of(keys) for name, keys in (config.get("variants") or {}).items()}


def planned_runs(
    cells: Iterable[PlannedCell], own: Mapping[str, str | None] | None = None, seeds: int = PLANNING_SEEDS
) -> pd.DataFrame:
    """Planned cells as a runs table at the values the plan assumes, every seed alike (the noise is assumed
    separately): the paper's (Table 10; Table 12 for ListOps' scales); an own variant (`own`) at the
    paper's diffusion at the position its operators occupy, else at the baseline: no effect of its own is
    assumed. Cells the paper has no number for (another setting, a related system) are left out."""
    import pandas as pd

    own = own or {}
    rows = []
    for task, variant, scale, setting in sorted(set(cells)):
        like = (own[variant] or BASELINE) if variant in own else variant
        if scale == MAIN_SCALE:
            value = paper.TABLE10.get(like, {}).get(task)
        else:
            value = paper.TABLE12.get(like, {}).get(scale) if task == "listops" else None
        if value is None or setting != C.BASE_SETTING:
            continue
        cost = paper.TABLE14.get((like, scale), {}).get("time_overhead_pct", 0.0)
        rows += [
            {"task": task, "variant": variant, "scale": scale, "setting": setting, "seed": s,
             "status": C.COMPLETED, C.ACCURACY: value, "median_step_time_s": 1 + cost / 100,
             "own_variant": variant in own, "own_position": own.get(variant)}
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
            key=lambda r: -min(0.0 if math.isnan(g) else abs(g) / sd for g, sd, _ in r["_terms"]),
        )
        for k, r in enumerate(directional):
            levels[r["claim_id"]] = ALPHA / (len(members) - k)
        for r in equivalence:
            levels[r["claim_id"]] = ALPHA / len(equivalence)
    return levels


class PowerPlan(NamedTuple):
    """`seeds_table`'s answer: one row per planned claim, and the paper's claims the plan does not run."""

    table: pd.DataFrame
    unplanned: list[str]


# A claim's comparisons for power: (effect aimed at, sd of one seed's value, df), their correlation and the
# TOST margin (NaN for a directional claim), as `pdelra.results.power.claim_power` takes them.
Terms = tuple[list[tuple[float, float, power.DegreesOfFreedom]], Any, float]


def seeds_table(
    pilot: pd.DataFrame | None = None,
    seeds: int = PLANNING_SEEDS,
    cells: Iterable[PlannedCell] | None = None,
    own: Mapping[str, str | None] | None = None,
    effect: float | None = None,
    draws: int = POWER_DRAWS,
) -> PowerPlan:
    """Per accuracy claim of the planned cells (`cells`: a config's; None: the paper's grids) and of its own
    variants (`own`, `pdelra.results.catalogue.own`): family, the effect aimed at and why (`aim`: the
    paper's; for an own variant, `effect` where the user names one, else the pilot's where its 95 % interval
    is clear of 0, else the paper's diffusion at its position; a pilot's effect whose interval holds 0 is
    shown, not aimed at: a 2-seed pilot's noisy effect asked for > 200 seeds), where the spread comes
    from, the spread of one seed's value of the effect, the planned level, the power at `seeds`, the seeds
    for 80 % power and the smallest effect `seeds` decide with 80 % power. The spread: the assumed noise of
    the task (`assumed_noise`), or, with a pilot, for a claim whose cells are outside the task's grid (an own
    variant) or whose task the pilot's grid does not measure, the pilot's own spread of that comparison, as
    the claims table measures it; when the pilot cannot give one, the row says why."""
    import pandas as pd

    noise = assumed_noise(pilot)
    planned = planned_runs(paper_cells() if cells is None else cells, own)
    index = C.RunIndex(planned)
    index.assume_noise({task: variance for task, (variance, _) in noise.items()})
    pilot_index = C.RunIndex(pilot) if pilot is not None and len(pilot) else None
    rows: list[dict[str, Any]] = []
    unplanned: list[str] = []
    claims: list[C.Claim] = []
    for claim in (*paper_claims(), *own_variant_claims(planned)):
        if claim.metric.column != C.ACCURACY:
            continue  # step times: no assumed spread to plan with
        row = C.judge(claim, index)
        if row["verdict_unadjusted"] == "not run":
            unplanned.append(claim.claim_id)
            continue
        in_grid = _terms(row)  # None: its cells lie outside the task's grid (an own variant's)
        terms = in_grid or _assumed_difference(claim, row, noise)
        sources = sorted({noise[t][1] for t in claim.metric.tasks if t in noise})
        graded = in_grid is not None and all(src.startswith("pilot") for src in sources)
        aim = "the paper's" if not math.isnan(claim.paper_effect) else "the paper's diffusion at its position"
        if pilot_index is not None and not graded:
            measured, why, pilot_row = _pilot_terms(claim, pilot_index)
            if measured is not None:
                terms, sources = measured, [f"pilot (this comparison, {why})"]
                if math.isnan(claim.paper_effect):
                    aim, terms = _pilot_aim(pilot_row, terms)
            else:
                sources = [f"{'; '.join(sources)} (the pilot: {why})"]
        if terms is None:
            continue
        claims.append(claim)
        if effect is not None and claim.family == OWN_FAMILY:  # the effect the user cares about
            terms = ([(effect, sd, dof) for _, sd, dof in terms[0]], terms[1], terms[2])
            aim = "named (--effect / power_effect)"
        rows.append(
            {
                "claim_id": claim.claim_id,
                "family": claim.family,
                "effect_aimed_at": claim.paper_effect
                if not math.isnan(claim.paper_effect)
                else terms[0][0][0],
                "aim": aim,
                "spread_from": "; ".join(sources),
                "sd_per_seed": max(t[1] for t in terms[0]),
                "_terms": terms[0],
                "_correlation": terms[1],
                "_margin": terms[2],
            }
        )
    frame = pd.DataFrame(rows)
    levels = planned_levels(rows)
    frame["level"] = frame["claim_id"].map(levels)
    planned_power = [
        power.claim_power(r["_terms"], r["_correlation"], r["_margin"], seeds, levels[r["claim_id"]])
        for r in rows
    ]
    at_seeds = (
        planned
        if seeds == PLANNING_SEEDS
        else planned_runs(paper_cells() if cells is None else cells, own, seeds)
    )
    simulated = simulated_power(at_seeds, noise, [c for c in claims if c.family != OWN_FAMILY], draws)
    frame[f"power_at_{seeds}"] = [
        (simulated.get(r["claim_id"], p) if r["family"] != OWN_FAMILY else p) if _aims(r) else math.nan
        for (p, _), r in zip(planned_power, rows, strict=True)
    ]
    frame["seeds_for_80"] = [n for _, n in planned_power]
    frame[f"detectable_at_{seeds}"] = [_detectable(r, seeds, levels[r["claim_id"]]) for r in rows]
    return PowerPlan(frame.drop(columns=["_terms", "_correlation", "_margin"]), unplanned)


def simulated_power(
    planned: pd.DataFrame,
    noise: Mapping[str, tuple[float, str]],
    claims: Sequence[C.Claim],
    draws: int = POWER_DRAWS,
) -> dict[str, float]:
    """How often each claim reads "reproduced", Holm-adjusted, when the truth is the planned runs and each run
    has its task's assumed variance: the claims engine itself (`pdelra.results.claims.evaluate`) on `draws`
    tables drawn so, with a fixed seed. The engine's df are random (each cell's moderated variance borrows as
    far as its spread agrees with its grid's) and Holm's step-down lets a claim decided late reach its level
    only after the claims before it: an analytic power at the claim's planned level and the df of full
    borrowing was 7–17 pp above the engine's rate at 5 seeds. A seed's shared effect is left out: the paired
    design removes it."""
    import numpy as np

    if planned.empty or not claims:
        return {}
    rng = np.random.default_rng(20261207)
    sd = planned["task"].map(lambda t: math.sqrt(noise[t][0]) if t in noise else 0.0).to_numpy()
    found: dict[str, float] = {}
    for _ in range(draws):
        runs = planned.assign(**{C.ACCURACY: planned[C.ACCURACY] + rng.normal(0.0, 1.0, len(planned)) * sd})
        judged = C.evaluate(runs, claims=claims, power=False)
        for claim_id, verdict in zip(judged["claim_id"], judged["verdict"], strict=True):
            found[claim_id] = found.get(claim_id, 0.0) + (verdict == "reproduced") / draws
    return found


def _terms(row: Mapping[str, Any]) -> Terms | None:
    """A judged row's comparisons with a spread, or None when it has none."""
    terms = [t for t in row.get("_terms") or [] if not math.isnan(t[1]) and t[1] > 0]
    if not terms:
        return None
    correlation = row.get("_correlation")
    correlation = correlation if isinstance(correlation, list) and len(correlation) == len(terms) else None
    margin = row.get("_margin", math.nan)
    return terms, correlation, math.nan if margin is None else float(margin)


def _assumed_difference(
    claim: C.Claim, row: Mapping[str, Any], noise: Mapping[str, tuple[float, str]]
) -> Terms | None:
    """An own variant's difference of two cells outside the grid (its planned runs have no spread): a
    paired difference of two cells with the task's assumed variance each, averaged over its tasks, aimed at
    the planned effect."""
    if not isinstance(claim, C.Difference) or any(t not in noise for t in claim.metric.tasks):
        return None
    tasks = claim.metric.tasks
    sd = math.sqrt(sum(2 * noise[t][0] for t in tasks)) / len(tasks)
    return [(float(row["effect"]), sd, power.DegreesOfFreedom(1.0))], None, math.nan


def _pilot_terms(claim: C.Claim, pilot: C.RunIndex) -> tuple[Terms | None, str, Mapping[str, Any]]:
    """The claim's comparisons as the pilot measures them (aimed at the paper's effect, or the pilot's own
    where the paper has none, as the claims table does), and how many seeds; or None and why not; and the
    pilot's row of the claim."""
    row = C.judge(claim, pilot)
    if row["verdict_unadjusted"] == "not run":
        return None, "no run of a cell it compares", row
    n = int(row["n"])
    if n < 2:
        return None, f"{n} usable seed(s), a spread needs 2", row
    terms = _terms(row)
    if terms is None:
        return None, f"no spread over its {n} seeds", row
    aimed = [(g if not math.isnan(g) else float(row["effect"]), sd, dof) for g, sd, dof in terms[0]]
    return (aimed, terms[1], terms[2]), f"{n} seeds", row


def _pilot_aim(row: Mapping[str, Any], terms: Terms) -> tuple[str, Terms]:
    """An own claim's aim from its pilot: the pilot's effect where its 95 % interval is clear of 0; else none
    (the effect is shown in `aim`, and `--effect` names one): a noisy pilot's effect is no plan."""
    effect, low, high = (100 * float(row[k]) for k in ("effect", "ci_low", "ci_high"))
    shown = f"the pilot's {effect:+.2f} pp [{low:+.2f}, {high:+.2f}]"
    if low > 0 or high < 0:
        return shown, terms
    unaimed = [(math.nan, sd, dof) for _, sd, dof in terms[0]]
    return f"none: {shown} holds 0, name one (--effect)", (unaimed, terms[1], terms[2])


def _aims(row: Mapping[str, Any]) -> bool:
    """Whether a power at an effect exists: an effect to aim at (not 0 for a directional claim)."""
    return not math.isnan(row["_margin"]) or all(g != 0 and not math.isnan(g) for g, _, _ in row["_terms"])


def _detectable(row: Mapping[str, Any], seeds: int, level: float) -> float:
    """The smallest true effect `seeds` decide with 80 % power (of the widest comparison); NaN above 1
    (accuracy) or for a no-difference claim."""
    if not math.isnan(row["_margin"]):
        return math.nan
    _, sd, dof = max(row["_terms"], key=lambda t: t[1])
    found = power.detectable_effect(sd, seeds, dof, level)
    return found if found <= 1 else math.nan


def choices(
    table: pd.DataFrame,
    hours_per_seed: float | None,
    counts: Sequence[int] = SEED_CHOICES,
    unit: str = "GPU-hours",
) -> pd.DataFrame:
    """Per seed count: how many claims reach 80 % power (primary ones apart) and the device time (`unit`)
    it costs."""
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
                f"{unit} (training)": math.nan if hours_per_seed is None else hours_per_seed * n,
            }
            for n in counts
        ]
    )
