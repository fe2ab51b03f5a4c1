"""pdelra.results.diagnostics on constructed tables whose answers are known: the Simpson case, a real
within-task relation, the family-wise false-"yes" rate under the null, the α normalisation and the bound."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from pdelra.results import diagnostics as rd
from pdelra.results import stats
from pdelra.results.diagnostics import COLUMNS

TASKS = ["listops", "text", "retrieval", "pathfinder", "image"]
POSITIONS = [
    "after_embedding",
    "after_mlp",
    "between_layers",
    "before_layernorm",
    "in_attention",
    "across_heads",
    "after_attention",
]


def tables(cells: dict[tuple[str, str, int], dict[str, float]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(diagnostics.csv, runs.csv) for runs (task, variant, seed) → {commutator, alpha, branch, reduction,
    gain}: one trained row per run (block 0) whose α-normalised commutator is `commutator`, and a baseline
    run per (task, seed) at accuracy 0.5 so that the run's accuracy is 0.5 + gain."""
    rows, runs = [], []
    for (task, variant, seed), c in cells.items():
        base = {"task": task, "variant": variant, "scale": "h1", "setting": "base", "seed": seed, "block": 0}
        alpha = c.get("alpha", 0.1)
        rows.append(
            base
            | {
                "operator": "encoder.blocks.0.x",
                "kind": "trained",
                "position": "x",
                "alpha_mean": alpha,
                "n_examples": 8,
                "n_logit_examples": 2,
                "commutator": c["commutator"] * alpha,
                "commutator_branch": c.get("branch", c["commutator"]) * alpha,
                "rel_roughness_in": 2.0,
                "rel_roughness_out": 2.0 * (1 - c.get("reduction", 0.5)),
            }
        )
        runs.append(base | {"status": "completed", "test_accuracy": 0.5 + c["gain"]})
    for task, seed in {(t, s) for t, _, s in cells}:
        runs.append(
            {"task": task, "variant": "none", "scale": "h1", "setting": "base", "seed": seed}
            | {"status": "completed", "test_accuracy": 0.5}
        )
    return pd.DataFrame(rows).reindex(columns=list(COLUMNS)), pd.DataFrame(runs)


def _unrelated_ranks(n: int) -> list[int]:
    """A permutation of range(n) with Spearman ρ exactly 0 against range(n): no relation at all."""
    for order in itertools.permutations(range(n)):
        if scipy.stats.spearmanr(range(n), order).statistic == 0:
            return list(order)
    raise AssertionError("no rank-uncorrelated permutation")


def simpson(seeds: int = 3) -> dict[tuple[str, str, int], dict[str, float]]:
    """No relation inside any task (within-task Spearman ρ = 0 exactly for every predictor); tasks with
    larger commutators (and less roughness reduction) have lower mean gains."""
    order = _unrelated_ranks(len(POSITIONS))
    cells = {}
    for t, task in enumerate(TASKS):
        for i, variant in enumerate(POSITIONS):
            for seed in range(seeds):  # seed noise that leaves every cell's rank in its task unchanged
                cells[(task, variant, seed)] = {
                    "commutator": 1.0 + t + 0.1 * i + 0.001 * seed,
                    "branch": 2.0 + t + 0.1 * i,
                    "reduction": 0.5 - 0.05 * t - 0.005 * i,
                    "gain": -0.02 * t + 0.001 * order[i] + 0.0001 * seed,
                }
    return cells


def test_the_simpson_case_is_no_evidence_although_the_pooled_correlation_says_yes() -> None:
    diagnostics, runs = tables(simpson())
    points = rd.mechanism_points(diagnostics, runs)
    assert len(points) == len(TASKS) * len(POSITIONS) and (points["seeds"] == 3).all()
    pooled = scipy.stats.spearmanr(points["commutator_per_alpha"], points["gain"])
    assert pooled.statistic < -0.8 and pooled.pvalue < 1e-8  # what the old independent-points test read
    test = rd.mechanism_test(points).set_index("predictor")
    for predictor in rd.PREDICTORS:
        assert test.loc[predictor, "verdict"] == "inconclusive", predictor
        assert test.loc[predictor, "verdict_unadjusted"] == "inconclusive", predictor
        assert test.loc[predictor, "answer"].startswith("no evidence")
    assert test.loc["commutator_per_alpha", "tasks"] == len(TASKS)
    assert test.loc["commutator_per_alpha", "statistic"] == pytest.approx(0, abs=1e-12)


def _naive_joint_permutations(x: np.ndarray, y: np.ndarray, strata: np.ndarray, labels: np.ndarray):
    """The joint label permutation test written out plainly: for every permutation of the labels, move each
    label's y to its image in every stratum, Spearman ρ per stratum (scipy), averaged."""
    import itertools

    from scipy.stats import spearmanr

    names = list(dict.fromkeys(labels.tolist()))
    groups = list(dict.fromkeys(strata.tolist()))

    def statistic(mapping: dict) -> float:
        rhos = []
        for g in groups:
            i = np.flatnonzero(strata == g)
            own = {labels[j]: y[j] for j in i}
            moved = [own[mapping[labels[j]]] for j in i]
            rhos.append(spearmanr(x[i], moved).statistic)
        return float(np.mean(rhos))

    null = np.array([statistic(dict(zip(names, p, strict=True))) for p in itertools.permutations(names)])
    observed = null[0]
    return observed, float(np.mean(null >= observed - 1e-12)), float(np.mean(null <= observed + 1e-12))


def test_the_joint_label_permutation_test_is_the_plain_one() -> None:
    """stats.permutation_of_labels (vectorised, exact) against the test written out with scipy's Spearman,
    also when a stratum lacks a label."""
    rng = np.random.default_rng(6)
    labels = np.tile(["p1", "p2", "p3", "p4", "p5", "p6"], 4)
    strata = np.repeat(["a", "b", "c", "d"], 6)
    x = rng.standard_normal(24)
    y = rng.standard_normal(24) - 0.5 * x  # a relation, so that p is away from both ends
    fast = stats.permutation_of_labels(x, y, strata, labels)
    plain = _naive_joint_permutations(x, y, strata, labels)
    assert fast[3] == math.factorial(6)
    for a, b in zip(fast[:3], plain, strict=True):  # exact: the same numbers
        assert a == pytest.approx(b, abs=1e-9)
    keep = ~((strata == "b") & (labels == "p2"))  # stratum b without p2: its ρ over the five it has
    fast = stats.permutation_of_labels(x[keep], y[keep], strata[keep], labels[keep])
    assert fast[0] == pytest.approx(_naive_partial(x, y, strata, labels, keep), abs=1e-9)


def _naive_partial(x, y, strata, labels, keep) -> float:
    from scipy.stats import spearmanr

    return float(
        np.mean([spearmanr(x[keep & (strata == g)], y[keep & (strata == g)]).statistic for g in "abcd"])
    )


def test_a_real_within_task_relation_is_detected_in_the_predicted_direction() -> None:
    rng = np.random.default_rng(2)
    cells = {}
    for t, task in enumerate(TASKS):
        for variant in POSITIONS:
            c = rng.uniform(0.5, 2.0)
            for seed in range(3):  # gain falls with the commutator inside each task, beside a task effect
                cells[(task, variant, seed)] = {
                    "commutator": c,
                    "branch": rng.uniform(0.5, 2.0),  # unrelated
                    "reduction": 0.1 * c,  # more reduction with more commutator: a loss, against the theory
                    "gain": 0.05 * t - 0.02 * c + 0.001 * rng.standard_normal(),
                }
    test = rd.mechanism_test(rd.mechanism_points(*tables(cells))).set_index("predictor")
    row = test.loc["commutator_per_alpha"]
    assert row["statistic"] < -0.8 and row["p_one_sided"] < 0.001
    assert row["verdict"] == row["verdict_unadjusted"] == "reproduced" and row["answer"].startswith("yes")
    assert row["p_adjusted"] == pytest.approx(min(1.0, 3 * row["p_value"]), rel=1e-9)  # Holm, smallest p
    assert test.loc["roughness_reduction", "verdict"] == "contradicted"
    assert test.loc["commutator_branch_per_alpha", "verdict"] == "inconclusive"


def test_the_family_wise_false_yes_rate_under_the_null_stays_at_the_level() -> None:
    """No within-task relation for any predictor, strong task effects: over 200 replications, a "yes" for
    any of the three predictors after Holm happens at most 5 % + 2 Monte Carlo standard errors."""
    rng = np.random.default_rng(3)
    replications, yes = 200, 0
    for _ in range(replications):
        rows = []
        for task in TASKS:
            effect = rng.standard_normal()  # shared by the task's predictors and gain: a Simpson trap
            for variant in POSITIONS:
                rows.append(
                    {"task": task, "variant": variant, "scale": "h1", "seeds": 1}
                    | {p: effect + rng.standard_normal() for p in rd.PREDICTORS}
                    | {"gain": -effect + rng.standard_normal()}
                )
        test = rd.mechanism_test(pd.DataFrame(rows), resamples=199, seed=int(rng.integers(1 << 31)))
        yes += (test["verdict"] == "reproduced").any()
    bound = stats.ALPHA + 2 * math.sqrt(stats.ALPHA * (1 - stats.ALPHA) / replications)
    assert yes / replications <= bound


def test_the_commutator_is_normalised_by_alpha() -> None:
    """Two positions whose Laplacian–attention commutator is the same but whose trained α differs by 2×: the
    raw commutator doubles, the normalised one does not."""
    cells = {
        ("listops", "after_mlp", 0): {"commutator": 3.0, "alpha": 0.1, "gain": 0.0},
        ("listops", "after_attention", 0): {"commutator": 3.0, "alpha": 0.2, "gain": 0.0},
    }
    table = rd.per_position(tables(cells)[0]).set_index("variant")
    assert table.loc["after_attention", "commutator"] == pytest.approx(
        2 * table.loc["after_mlp", "commutator"]
    )
    assert table.loc["after_attention", "commutator_per_alpha"] == pytest.approx(3.0)
    assert table.loc["after_mlp", "commutator_per_alpha"] == pytest.approx(3.0)


def test_too_few_positions_or_no_runs_give_rows_that_say_not_run() -> None:
    cells = {("text", v, 0): {"commutator": 1.0 + i, "gain": 0.01 * i} for i, v in enumerate(POSITIONS[:2])}
    diagnostics, runs = tables(cells)
    test = rd.mechanism_test(rd.mechanism_points(diagnostics, runs))
    assert (test["verdict"] == "not run").all() and test["p_value"].isna().all()
    assert test["answer"].str.startswith("not run").all()
    claims = rd.mechanism_claims(diagnostics, None)
    assert (claims["verdict_unadjusted"] == "not run").all() and len(claims) == len(rd.PREDICTORS)


def test_mechanism_claims_are_claims_shaped_with_p_on_the_two_sided_scale() -> None:
    diagnostics, runs = tables(simpson())
    claims = rd.mechanism_claims(diagnostics, runs, resamples=999)
    for column in (
        "claim_id",
        "claim",
        "source",
        "family",
        "effect",
        "p_value",
        "verdict_unadjusted",
        "n",
        "method",
        "detail",
    ):
        assert column in claims.columns
    assert set(claims["family"]) == {"diagnostics"} and set(claims["source"]) == {"revised abstract"}
    assert claims["claim_id"].is_unique and (claims["n"] == len(TASKS) * len(POSITIONS)).all()
    test = rd.mechanism_test(rd.mechanism_points(diagnostics, runs), resamples=999)
    np.testing.assert_allclose(claims["p_value"], np.minimum(1, 2 * test["p_one_sided"]))
    assert ((claims["p_value"] < stats.ALPHA) == (claims["verdict_unadjusted"] == "reproduced")).all()


def test_points_pair_each_seed_with_its_own_baseline_and_skip_failed_runs_and_other_settings() -> None:
    cells = {("text", v, s): {"commutator": 1.0 + i, "gain": 0.01 * i + s} for i, v in enumerate(POSITIONS)
             for s in range(2)}  # fmt: skip
    diagnostics, runs = tables(cells)
    runs.loc[(runs["variant"] == "none") & (runs["seed"] == 1), "test_accuracy"] = 1.5  # seed 1's baseline
    runs.loc[(runs["variant"] == "after_mlp") & (runs["seed"] == 0), "status"] = "diverged"
    other = diagnostics.assign(setting="steps2", commutator=99.0)
    points = rd.mechanism_points(pd.concat([diagnostics, other]), runs).set_index("variant")
    # Gain of seed s: 0.5 + 0.01 i + s − baseline(s) = 0.01 i for both seeds.
    assert points.loc["in_attention", "gain"] == pytest.approx(0.04)
    assert points.loc["after_mlp", "seeds"] == 1 and points.loc["in_attention", "seeds"] == 2
    assert points.loc["in_attention", "commutator_per_alpha"] == pytest.approx(5.0)


def test_bound_check_weights_examples_and_says_whether_the_bound_held() -> None:
    base = {"task": "text", "variant": "after_mlp", "scale": "h1", "setting": "base", "kind": "trained"}
    base |= {"position": "mlp_output", "perturbation": 1.0, "bound": 2.0, "amplification": 3.0}
    rows = [
        base | {"seed": 0, "block": 0, "n_logit_examples": 3, "composed_held": 1.0, "logit_change": 1.0},
        base | {"seed": 0, "block": 1, "n_logit_examples": 1, "composed_held": 0.0, "logit_change": 9.0},
        base | {"seed": 1, "block": 0, "n_logit_examples": 4, "composed_held": 1.0, "logit_change": 2.0},
    ]
    frame = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    frame["composed_bound"] = 6.0
    frame["composed_ratio"] = frame["logit_change"] / 6.0
    row = rd.bound_check(frame).iloc[0]
    assert row["held_share"] == pytest.approx(7 / 8) and not row["held"]
    assert row["examples"] == 8 and row["runs"] == 2 and row["logit_change"] == pytest.approx(4.0)
    assert row["ratio"] == pytest.approx(4 / 6)
    held = rd.bound_check(frame[frame["composed_held"] == 1]).iloc[0]
    assert held["held"] and held["held_share"] == 1


def test_summarise_names_every_table() -> None:
    diagnostics, runs = tables(simpson(seeds=1))
    out = rd.summarise(diagnostics, runs)
    assert set(out) == {
        "diagnostics_per_position",
        "diagnostics_per_block",
        "diagnostics_depth",
        "diagnostics_bound",
        "diagnostics_points",
        "diagnostics_mechanism",
        "diagnostics_skipped",
    }
    assert len(out["diagnostics_mechanism"]) == len(rd.PREDICTORS)
    assert len(out["diagnostics_points"]) == len(TASKS) * len(POSITIONS)


def test_summarise_of_an_empty_diagnostics_table_gives_empty_tables_and_not_run_rows() -> None:
    out = rd.summarise(pd.DataFrame(columns=list(COLUMNS)), None)
    assert all(frame.empty for name, frame in out.items() if name != "diagnostics_mechanism")
    assert (out["diagnostics_mechanism"]["verdict"] == "not run").all()
