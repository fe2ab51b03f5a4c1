"""Can the verdicts reach the truth? The claims engine by simulation, with the truth set to the paper's own
tables, and under the null.

Runs are drawn as the design makes them: every cell of the paper's grids (5 tasks × the baseline and seven
positions at h1, ListOps' multi-scale cells), a per-(task, seed) effect shared by a task's cells (sd 0.5 pp)
and per-run noise (sd 0.5 or 1 pp; the paper's Table 15 std is 0.35–0.54 pp), at n = 3 or 5 seeds. The
truth is Table 10 (per task) and Table 12 (ListOps' scales); step times carry Table 14's overheads with 2 %
noise. Each replication goes through `pdelra.results.claims.evaluate`, the function `pdelra aggregate` and
`pdelra claims` call. The rates printed here (run with `-s`) are the ones quoted in the claims module's
docstring, the README and the report's method section. Fixed seeds: the figures are reproducible.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest

from pdelra import paper
from pdelra.results import claims as C
from pdelra.results import diagnostics as rd
from pdelra.results import stats
from pdelra.results.catalogue.paper import paper_claims

SEED_SD = 0.005
SETTINGS = ((5, 0.005), (5, 0.01), (3, 0.005), (3, 0.01))  # (seeds, per-run noise sd)
REPLICATIONS = 100  # truth = paper, per setting
NULL_REPLICATIONS = 200
SCALES = ("h1", "h2", "h4", "multi")


def paper_truth(task: str, variant: str, scale: str) -> float:
    if scale != "h1":
        return paper.TABLE12[variant][scale]
    return paper.TABLE10[variant][task]


def null_truth(task: str, variant: str, scale: str) -> float:
    return paper.TABLE10["none"][task]


def step_time(variant: str, scale: str, null: bool) -> float:
    overhead = 0.0 if null else paper.TABLE14.get((variant, scale), {}).get("time_overhead_pct", 0.0)
    return 1.0 + overhead / 100


def draw_runs(
    truth,
    rng: np.random.Generator,
    seeds: int,
    noise: float,
    null: bool = False,
    noisier: tuple[str, float] = ("", 1.0),
) -> pd.DataFrame:
    """One replication's runs table, as `pdelra aggregate` writes it (the columns the claims read). With
    `noisier` (variant, factor), that position's runs, at every scale, have factor × the per-run sd."""
    rows = []
    for task in paper.TASKS:
        seed_effect = rng.normal(0, SEED_SD, seeds)
        for variant in ("none", *paper.POSITIONS):
            multiscale = task == "listops" and variant in paper.TABLE12
            for scale in SCALES if multiscale else ("h1",):
                for seed in range(seeds):
                    rows.append(
                        {
                            "task": task,
                            "variant": variant,
                            "scale": scale,
                            "setting": "base",
                            "seed": seed,
                            "status": "completed",
                            "test_accuracy": truth(task, variant, scale)
                            + seed_effect[seed]
                            + rng.normal(0, noise * (noisier[1] if variant == noisier[0] else 1.0)),
                            "median_step_time_s": step_time(variant, scale, null) * (1 + rng.normal(0, 0.02)),
                            "device": "cuda",
                        }
                    )
    return pd.DataFrame(rows)


@functools.cache
def simulate(
    seeds: int,
    noise: float,
    null: bool,
    replications: int,
    noisier: tuple[str, float] = ("", 1.0),
    power: bool = True,
) -> pd.DataFrame:
    """Every claim's row of every replication (column `rep`), computed once per setting for all tests
    (`power=False`: verdicts only, without the power columns that take most of a table's time)."""
    rng = np.random.default_rng(20261202 + 100 * seeds + int(1000 * noise) + null + int(10 * noisier[1]))
    truth = null_truth if null else paper_truth
    frames = []
    for rep in range(replications):
        runs = draw_runs(truth, rng, seeds, noise, null, noisier)
        frames.append(C.evaluate(runs, claims=paper_claims(), power=power).assign(rep=rep))
    return pd.concat(frames, ignore_index=True)


def family_errors(frame: pd.DataFrame) -> pd.Series:
    """Per family under a null: the share of replications where some claim was decided falsely (a
    no-difference claim's "reproduced" is right under the null, not an error)."""
    decided = frame["verdict"].isin(["reproduced", "contradicted"])
    error = decided & ~((frame["verdict"] == "reproduced") & frame["method"].str.contains("TOST"))
    return frame.assign(error=error).groupby(["family", "rep"])["error"].any().groupby("family").mean()


def mc_bound(nominal: float, trials: int, k: float = 2.0) -> float:
    return nominal + k * math.sqrt(nominal * (1 - nominal) / trials)


def rates(frame: pd.DataFrame) -> pd.DataFrame:
    """Per claim: the rates of each adjusted verdict and the mean predicted power at the paper's effect."""
    by = frame.groupby("claim_id", sort=False)
    out = pd.DataFrame(
        {
            "family": by["family"].first(),
            "paper": by["paper_effect"].first(),
            "reproduced": by["verdict"].apply(lambda v: (v == "reproduced").mean()),
            "contradicted": by["verdict"].apply(lambda v: (v == "contradicted").mean()),
            "predicted": by["power_at_paper"].mean(),
            "seeds_needed": by["seeds_needed"].median(),
        }
    )
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("seeds", "noise"), SETTINGS)
def test_with_the_truth_set_to_the_paper(seeds: int, noise: float) -> None:
    """Every claim's rate of "reproduced" (printed: the closing note's table), false "contradicted" ≤ 2.5 %
    (+ 2 Monte Carlo se) for each claim, and at n = 5, sd 0.5 pp the targets: the primary accuracy claims
    ≥ 95 %, the restated order ≥ 80 %, Table 11's effects of ≥ 2 pp ≥ 80 %."""
    table = rates(simulate(seeds, noise, False, REPLICATIONS))
    with pd.option_context("display.width", 200, "display.max_rows", 100):
        print(f"\ntruth = paper, n = {seeds}, per-run sd {100 * noise:g} pp, {REPLICATIONS} replications")
        print(table.to_string(float_format=lambda x: f"{x:.2f}"))
    assert (table["contradicted"] <= mc_bound(stats.ALPHA / 2, REPLICATIONS)).all(), table[
        table["contradicted"] > mc_bound(stats.ALPHA / 2, REPLICATIONS)
    ]
    if (seeds, noise) == (5, 0.005):
        primary = table[table["family"] == "primary"]
        assert (primary["reproduced"] >= 0.95).all(), primary
        assert table.loc["position_order", "reproduced"] >= 0.80
        big = table[(table["family"] == "table11") & (table["paper"].abs() >= 0.02)]
        assert len(big) >= 8 and (big["reproduced"] >= 0.80).all(), big


@pytest.mark.slow
@pytest.mark.parametrize(("seeds", "noise"), SETTINGS)
def test_predicted_power_of_the_primary_claims_matches_the_simulation(seeds: int, noise: float) -> None:
    """The power column at the paper's effect (mean over replications) is within 10 pp of how often the
    primary claims read "reproduced" when the paper is right."""
    table = rates(simulate(seeds, noise, False, REPLICATIONS))
    primary = table[table["family"] == "primary"]
    print(primary[["reproduced", "predicted"]])
    assert ((primary["predicted"] - primary["reproduced"]).abs() <= 0.10).all(), primary


@pytest.mark.slow
@pytest.mark.parametrize(("seeds", "noise"), SETTINGS[:1] + SETTINGS[3:])
def test_each_family_holds_its_level_under_the_null(seeds: int, noise: float) -> None:
    """Every position equal to the baseline, every step time equal: per family, some claim decided
    (reproduced or contradicted) in ≤ 5 % + 2 Monte Carlo se of the replications."""
    fwer = family_errors(simulate(seeds, noise, True, NULL_REPLICATIONS))
    print(f"\nunder the null, n = {seeds}, sd {100 * noise:g} pp: family-wise error\n{fwer.to_string()}")
    assert (fwer <= mc_bound(stats.ALPHA, NULL_REPLICATIONS)).all(), fwer


def position_level_points(rng: np.random.Generator) -> pd.DataFrame:
    """Mechanism points where the gain and the predictors are properties of the position, shared by the
    five tasks, and unrelated to each other (plus task effects and small noise)."""
    gain = rng.normal(0, 1, len(paper.POSITIONS))
    predictors = {p: rng.normal(0, 1, len(paper.POSITIONS)) for p in rd.PREDICTORS}
    rows = []
    for task in paper.TASKS:
        shift = rng.normal(0, 1)
        for i, variant in enumerate(paper.POSITIONS):
            rows.append(
                {
                    "task": task,
                    "variant": variant,
                    "scale": "h1",
                    "seeds": 5,
                    "gain": shift + gain[i] + rng.normal(0, 0.3),
                }
                | {p: shift + v[i] + rng.normal(0, 0.3) for p, v in predictors.items()}
            )
    return pd.DataFrame(rows)


def test_the_mechanism_family_holds_its_level_with_position_level_effects() -> None:
    """The review's case: shuffling within tasks called the commutator "reproduced" in 18.7 % (nominal 2.5 %)
    and decided some claim of the family in 41.7 % (nominal 5 %). Permuting positions jointly holds both."""
    rng = np.random.default_rng(41)
    replications, false_yes, decided = 300, 0, 0
    for _ in range(replications):
        test = rd.mechanism_test(position_level_points(rng)).set_index("predictor")
        false_yes += test.loc["commutator_per_alpha", "verdict_unadjusted"] == "reproduced"
        decided += test["verdict"].isin(["reproduced", "contradicted"]).any()
    false_yes, decided = false_yes / replications, decided / replications
    print(f"\nmechanism, position-level null: commutator 'reproduced' unadjusted {false_yes:.3f}, "
          f"family decided after Holm {decided:.3f}")  # fmt: skip
    assert false_yes <= mc_bound(stats.ALPHA / 2, replications)
    assert decided <= mc_bound(stats.ALPHA, replications)


# ----------------------------------------------------------------------------------------------------------
# Real noise: one noisier position, one failed run
# ----------------------------------------------------------------------------------------------------------
HETERO_REPLICATIONS = 300
NOISY = "after_embedding"  # in the primary claims and in Table 12, so its multi-scale cells are noisy too


@pytest.mark.slow
@pytest.mark.parametrize("factor", (3.0, 4.0))
@pytest.mark.parametrize(("seeds", "noise"), SETTINGS)
def test_a_noisier_position_holds_every_familys_level(seeds: int, noise: float, factor: float) -> None:
    """No true effect anywhere; After Embedding's runs (at every scale) have `factor` × the others' sd. A
    variance pooled over the task decided its Table 11 claims falsely in 18–27 % (5 % nominal) and the
    family's error after Holm was 17 %: with per-cell variances every family holds 5 % + 2 Monte Carlo se, and
    the noisy position's 95 % intervals cover the truth (0) in ≥ 93 %."""
    frame = simulate(seeds, noise, True, HETERO_REPLICATIONS, (NOISY, factor), power=False)
    fwer = family_errors(frame)
    noisy = frame[frame["claim_id"].str.startswith(f"table11_sign_{NOISY}_")]
    coverage = float(((noisy["ci_low"] <= 0) & (noisy["ci_high"] >= 0)).mean())
    se = math.sqrt(coverage * (1 - coverage) / len(noisy))
    print(
        f"\nnull, {NOISY} sd ×{factor:g}, n = {seeds}, sd {100 * noise:g} pp, {HETERO_REPLICATIONS} "
        f"replications: family-wise error\n{fwer.to_string()}\ncoverage of its intervals {coverage:.3f} "
        f"(se {se:.3f}, {len(noisy)} intervals)"
    )
    assert (fwer <= mc_bound(stats.ALPHA, HETERO_REPLICATIONS)).all(), fwer
    assert coverage >= 0.93


FAILURE_REPLICATIONS = 80
N_TEST = {"listops": 2000, "text": 25000, "retrieval": 17437, "pathfinder": 20000, "image": 10000}
FAILURES = (("in_attention", "diverged"), ("none", "failed to learn"))  # (cell's variant, what happened)


@functools.cache
def with_and_without_a_failure(task: str, variant: str, kind: str) -> pd.DataFrame:
    """Truth = the paper (n = 5, sd 0.5 pp, the real test-set sizes), each replication judged twice on the
    same draws: as drawn, and with seed 0 of `variant` on `task` diverged or at chance."""
    rng = np.random.default_rng(20261204 + sum(map(ord, task + variant)))
    frames = []
    for rep in range(FAILURE_REPLICATIONS):
        runs = draw_runs(paper_truth, rng, 5, 0.005).assign(n_test=lambda r: r["task"].map(N_TEST))
        clean = C.evaluate(runs, claims=paper_claims(), power=False)
        cell = (runs["task"] == task) & (runs["variant"] == variant) & (runs["scale"] == "h1")
        hit = cell & (runs["seed"] == 0)
        if kind == "diverged":
            runs.loc[hit, ["status", "test_accuracy"]] = ["diverged", math.nan]
        else:
            runs.loc[hit, "test_accuracy"] = C.CHANCE_ACCURACY[task]
        failed = C.evaluate(runs, claims=paper_claims(), power=False)
        frames.append(
            clean[["claim_id", "family", "paper_effect", "verdict", "verdict_unadjusted"]].assign(
                rep=rep,
                failed=failed["verdict"].to_numpy(),
                failed_unadjusted=failed["verdict_unadjusted"].to_numpy(),
                detail=failed["detail"].to_numpy(),
            )
        )
    return pd.concat(frames, ignore_index=True)


def involves(claim: C.Claim, task: str, variant: str) -> bool:
    return task in claim.metric.tasks and any(
        c.variant == variant and c.scale == "h1" for c in C._claim_cells(claim)
    )


@pytest.mark.slow
@pytest.mark.parametrize(("variant", "kind"), FAILURES)
@pytest.mark.parametrize("task", paper.TASKS)
def test_a_failed_run_costs_only_its_own_cells_claims(task: str, variant: str, kind: str) -> None:
    """One seed of one cell diverged (In Attention) or at chance (the baseline), on each task in turn: every
    claim not involving that cell keeps ≥ 90 % of the power of its test without the failure (same draws;
    ≥ 80 % after Holm), each
    claim involving it names the failure, and a baseline that failed to learn never turns a true gain into
    "contradicted". (One diverged In Attention seed on Text made every Text claim inconclusive: After
    Embedding's true +5.5 pp there read "reproduced" in 3.5 % instead of 100 %.)"""
    frame = with_and_without_a_failure(task, variant, kind)
    touched = {c.claim_id for c in paper_claims() if involves(c, task, variant)}

    def reproduced(column: str) -> tuple[str, object]:
        return column, lambda v: (v == "reproduced").mean()

    rates = frame.groupby("claim_id", sort=False).agg(
        before=reproduced("verdict_unadjusted"),
        after=reproduced("failed_unadjusted"),
        before_holm=reproduced("verdict"),
        after_holm=reproduced("failed"),
        contradicted=("failed", lambda v: (v == "contradicted").mean()),
    )
    others = rates[~rates.index.isin(touched)]
    print(f"\n{variant} {kind} on {task}: claims not involving it, reproduced before → after")
    print(others[others["before"] > 0].to_string(float_format=lambda x: f"{x:.2f}"))

    def kept(before: pd.Series, after: pd.Series, share: float) -> pd.Series:
        # A claim with power keeps `share` of it; one with little (≤ 20 %: a no-difference claim, a 1 pp
        # effect), whose rate a replication or two moves, loses at most 5 points.
        return (after >= share * before) | ((before <= 0.2) & (after >= before - 0.05))

    # Its own test keeps 90 % of its power: the failure enters no other claim's estimate or variance.
    ok = kept(others["before"], others["after"], 0.9)
    assert ok.all(), others[~ok]
    # After Holm, 80 %: the failed cell's own claims, now harder to decide, leave a stricter step-down level
    # to the rest of their family (the adjustment at work, not the failure in their variance).
    ok = kept(others["before_holm"], others["after_holm"], 0.8)
    assert ok.all(), others[~ok]
    label = f"{C.Cell(variant).label()} on {paper.TASK_LABELS[task]}: {kind} in 1 of 5 seeds"
    mine = frame[frame["claim_id"].isin(touched)]
    assert len(mine) and mine["detail"].str.contains(label, regex=False).all()
    gains = frame[frame["claim_id"].isin(touched) & (frame["paper_effect"] > C.EQUIVALENCE_MARGIN)]
    if variant == "none":
        assert not (gains["failed"] == "contradicted").any()
    assert (rates["contradicted"] <= mc_bound(stats.ALPHA / 2, FAILURE_REPLICATIONS)).all()
