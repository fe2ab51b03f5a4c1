"""Verdicts under real LRA noise, by simulation: one position noisier than the others (3× and 4× its sd,
at every scale), and one run that diverged or sat at chance. The runs are drawn as in
tests/test_claims_reach.py (the paper's grids, a per-(task, seed) effect, per-run noise; fixed seeds) and go
through `pdelra.results.claims.evaluate`. Run with `-s` to print the rates quoted in docs/measurements.md.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest
from test_claims_reach import SETTINGS, draw_runs, family_errors, mc_bound, paper_truth, simulate

from pdelra import paper
from pdelra.results import claims as C
from pdelra.results import stats
from pdelra.results.catalogue.paper import paper_claims

HETERO_REPLICATIONS = 300
NOISY = "after_embedding"  # in the primary claims and in Table 12, so its multi-scale cells are noisy too


def noisy_coverage(frame: pd.DataFrame) -> tuple[float, int]:
    """(share of the noisy position's Table 11 intervals that hold the truth, 0; how many there are)."""
    noisy = frame[frame["claim_id"].str.startswith(f"table11_sign_{NOISY}_")]
    return float(((noisy["ci_low"] <= 0) & (noisy["ci_high"] >= 0)).mean()), len(noisy)


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
    coverage, intervals = noisy_coverage(frame)
    se = math.sqrt(coverage * (1 - coverage) / intervals)
    print(
        f"\nnull, {NOISY} sd ×{factor:g}, n = {seeds}, sd {100 * noise:g} pp, {HETERO_REPLICATIONS} "
        f"replications: family-wise error\n{fwer.to_string()}\ncoverage of its intervals {coverage:.3f} "
        f"(se {se:.3f}, {intervals} intervals)"
    )
    assert (fwer <= mc_bound(stats.ALPHA, HETERO_REPLICATIONS)).all(), fwer
    assert coverage >= 0.93


FAILURE_REPLICATIONS = 80
FAILURES = (("in_attention", "diverged"), ("none", "at chance"))  # (cell's variant, what happened)


@functools.cache
def with_and_without_a_failure(task: str, variant: str, kind: str) -> pd.DataFrame:
    """Truth = the paper (n = 5, sd 0.5 pp, the real test-set sizes), each replication judged twice on the
    same draws: as drawn, and with seed 0 of `variant` on `task` diverged or at chance."""
    rng = np.random.default_rng(20261204 + sum(map(ord, task + variant)))
    frames = []
    for rep in range(FAILURE_REPLICATIONS):
        runs = draw_runs(paper_truth, rng, 5, 0.005)
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
                failed_runs=failed["failed_runs"].to_numpy(),
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
    claim involving it names the failure, and a baseline at chance never turns a true gain into
    "contradicted". (One diverged In Attention seed on Text made every Text claim inconclusive: After
    Embedding's true +5.5 pp there read "reproduced" in 3.5 % instead of 100 %.)"""
    frame = with_and_without_a_failure(task, variant, kind)
    touched = {c.claim_id for c in paper_claims() if involves(c, task, variant)}

    others = frame[~frame["claim_id"].isin(touched)]
    # Its own test keeps 90 % of its power; after Holm 80 %: the failed cell's own claims, now harder to
    # decide, leave a stricter step-down level to the rest of their family (the adjustment, not the variance).
    checks = (("verdict_unadjusted", "failed_unadjusted", 0.9), ("verdict", "failed", 0.8))
    for before, after, share in checks:
        rates = kept_power(others, before, after, share)
        print(f"\n{variant} {kind} on {task}: claims not involving it, reproduced ({before}) before → after")
        print(rates[rates["before"] > 0].to_string(float_format=lambda x: f"{x:.3f}"))
        assert rates["kept"].all(), rates[~rates["kept"]]
    contradicted = frame.groupby("claim_id")["failed"].apply(lambda v: (v == "contradicted").mean())
    assert (contradicted <= mc_bound(stats.ALPHA / 2, FAILURE_REPLICATIONS)).all()
    word = "not distinguishable from chance" if kind == "at chance" else kind
    label = f"{C.Cell(variant).label()} on {paper.TASK_LABELS[task]}: {word} in 1 of 5 seeds (seed 0)"
    mine = frame[frame["claim_id"].isin(touched)]
    assert len(mine) and mine["failed_runs"].str.contains(label, regex=False).all()
    gains = frame[frame["claim_id"].isin(touched) & (frame["paper_effect"] > C.EQUIVALENCE_MARGIN)]
    if variant == "none":
        assert not (gains["failed"] == "contradicted").any()


def kept_power(frame: pd.DataFrame, before: str, after: str, share: float) -> pd.DataFrame:
    """Per claim: how often it read "reproduced" before and after the failure, on the same draws, and whether
    it kept `share` of that power within 2 Monte Carlo se of the paired difference (√(discordant share / n),
    McNemar's: a failure refits the grid's prior, which moves a claim near its edge either way)."""
    yes_before, yes_after = frame[before] == "reproduced", frame[after] == "reproduced"
    by = frame.assign(b=yes_before, a=yes_after, d=yes_before != yes_after).groupby("claim_id", sort=False)
    rates = by.agg(before=("b", "mean"), after=("a", "mean"), discordant=("d", "mean"), n=("d", "size"))
    se = np.sqrt(rates["discordant"] / rates["n"])
    return rates.assign(kept=rates["after"] >= share * rates["before"] - 2 * se).drop(columns="n")
