"""Can the verdicts reach the truth? The claims engine by simulation, with the truth set to the paper's own
tables, and under the null.

Runs are drawn as the design makes them: every cell of the paper's grids (5 tasks × the baseline and seven
positions at h1, ListOps' multi-scale cells), a per-(task, seed) effect shared by a task's cells (sd 0.5 pp)
and per-run noise (sd 0.5 or 1 pp; the paper's Table 15 std is 0.35–0.54 pp), at n = 3 or 5 seeds. The
truth is Table 10 (per task) and Table 12 (ListOps' scales); step times carry Table 14's overheads with 2 %
noise; each table carries the real tasks' test-set sizes (`n_test`), as runs.csv does. Each replication
goes through `pdelra.results.claims.evaluate`, the function `pdelra aggregate` and
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
# The test-set sizes of the real LRA tasks: every table drawn here is shaped like a real one (the floor and
# the at-chance rule read n_test).
N_TEST = {"listops": 2000, "text": 25000, "retrieval": 17437, "pathfinder": 20000, "image": 10000}
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
    own: tuple[tuple[str, float], ...] = (),
) -> pd.DataFrame:
    """One replication's runs table, as `pdelra aggregate` writes it (the columns the claims read). With
    `noisier` (variant, factor), that position's runs, at every scale, have factor × the per-run sd. With
    `own` ((name, gain), …), a config's own variants run beside the grid at the baseline's truth + gain."""
    rows = []
    gains = dict(own)
    for task in paper.TASKS:
        seed_effect = rng.normal(0, SEED_SD, seeds)
        for variant in ("none", *paper.POSITIONS, *gains):
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
                            "test_accuracy": truth(task, "none" if variant in gains else variant, scale)
                            + gains.get(variant, 0.0)
                            + seed_effect[seed]
                            + rng.normal(0, noise * (noisier[1] if variant == noisier[0] else 1.0)),
                            "median_step_time_s": step_time(variant, scale, null) * (1 + rng.normal(0, 0.02)),
                            "device": "cuda",
                            "n_test": N_TEST[task],
                        }
                        | ({"own_variant": variant in gains} if gains else {})
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
    fwer = family_errors(simulate(seeds, noise, True, NULL_REPLICATIONS, power=False))  # verdicts only
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
