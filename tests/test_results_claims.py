"""The claims engine on constructed runs where the right answer is known, and its error rates by simulation.

The simulations draw null runs as the design makes them: a per-seed effect shared by every configuration of
a task (same seed, same initialisation and data order) plus per-run noise. They call the results functions
directly (no files), so a few hundred replications take seconds. The rates they measure are quoted in
`pdelra.results.claims`' docstring and the report's method section.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_claims_reach import draw_runs

from pdelra import paper
from pdelra.results import claims as C
from pdelra.results import stats
from pdelra.results.catalogue import all_claims, physqk

SEEDS = 5
SEED_SD = 0.005  # the shared per-seed effect of a task (accuracy)
NOISE_SD = 0.005  # per-run noise


def grid_runs(mean, rng: np.random.Generator, seeds: int = SEEDS, noise: float = NOISE_SD) -> pd.DataFrame:
    """Runs of the paper's grids (tests/test_claims_reach.py's `draw_runs`): accuracy = mean(task, variant,
    scale) + a per-(task, seed) effect + per-run noise; step times all equal."""
    return draw_runs(mean, rng, seeds, noise, null=True)


def by_id(frame: pd.DataFrame) -> dict[str, pd.Series]:
    return {row["claim_id"]: row for _, row in frame.iterrows()}


# ----------------------------------------------------------------------------------------------------------
# Constructed cases with a known answer
# ----------------------------------------------------------------------------------------------------------
def test_a_scrambled_ranking_is_not_reproduced() -> None:
    """After Embedding first, After Attention last, the middle five reversed (2 pp gaps, 0.3 pp noise, 10 of
    21 pairs out of order): Kendall's τ with a bootstrap called this "reproduced"."""
    middle = list(paper.POSITIONS[1:-1])[::-1]
    rank = {"after_embedding": 0, **{v: i + 1 for i, v in enumerate(middle)}, "after_attention": 6, "none": 3}
    runs = grid_runs(lambda t, v, s: 0.6 - 0.02 * rank[v], np.random.default_rng(0), noise=0.003)
    claims = by_id(C.evaluate(runs, claims=all_claims()))
    order = claims["position_order"]
    assert order["verdict"] == "contradicted"
    # Only the pairs the paper separates by more than 1 pp are judged: those the construction reverses.
    place = {v: i for i, v in enumerate(sorted(paper.POSITIONS, key=lambda v: -paper.TABLE6[v]))}
    separable_reversed = sum(
        abs(paper.TABLE6[a] - paper.TABLE6[b]) > C.EQUIVALENCE_MARGIN and rank[a] > rank[b]
        for a in paper.POSITIONS
        for b in paper.POSITIONS
        if place[a] < place[b]
    )
    assert separable_reversed > 0 and f"{separable_reversed} reversed (" in order["detail"]
    assert claims["after_embedding_best"]["verdict"] == "reproduced"  # first is right
    assert claims["after_attention_worst"]["verdict"] == "reproduced"  # last is right
    assert "position_ranking_theory" not in claims  # Table 4's order is Table 6's: one claim, not two


def test_the_paper_order_with_clear_gaps_is_reproduced() -> None:
    rank = {v: i for i, v in enumerate(sorted(paper.POSITIONS, key=lambda v: -paper.TABLE6[v]))} | {"none": 3}
    runs = grid_runs(lambda t, v, s: 0.6 - 0.02 * rank[v], np.random.default_rng(1), noise=0.003)
    order = by_id(C.evaluate(runs, claims=all_claims()))["position_order"]
    assert order["verdict"] == "reproduced"
    assert order["effect"] == pytest.approx(1.0)


def test_multiscale_is_an_intersection_union_test_against_each_scale() -> None:
    """Multi beats h1 and h2 clearly but not h4: not reproduced, whichever scale has the best mean."""
    gain = {"h1": 0.0, "h2": 0.0, "h4": 0.019, "multi": 0.02}
    runs = grid_runs(lambda t, v, s: 0.4 + gain[s], np.random.default_rng(2), noise=0.002)
    claims = by_id(C.evaluate(runs, claims=all_claims()))
    for variant in paper.TABLE12:
        row = claims[f"multiscale_gain_{variant}"]
        assert row["verdict_unadjusted"] == "inconclusive", row["detail"]
        assert "intersection–union over 3" in row["method"]
    all_clear = grid_runs(
        lambda t, v, s: 0.4 + (0.02 if s == "multi" else 0.0), np.random.default_rng(3), noise=0.002
    )
    assert by_id(C.evaluate(all_clear, claims=all_claims()))["multiscale_gain"]["verdict"] == "reproduced"


def test_size_is_judged_apart_from_direction() -> None:
    assert C.size_word(0.022, -0.011, 0.006) == "smaller than claimed"  # the ListOps small study's case
    assert C.size_word(0.022, 0.01, 0.03) == "as claimed"
    assert C.size_word(0.022, 0.03, 0.05) == "larger than claimed"
    assert C.size_word(-0.025, -0.01, -0.001) == "smaller than claimed"
    assert C.size_word(-0.025, -0.05, -0.03) == "larger than claimed"
    assert C.size_word(0.0, 0.002, 0.01) == "larger than claimed"
    assert C.size_word(math.nan, 0.0, 1.0) == ""
    assert C.size_word(-0.072, 0.496, 0.514) == "opposite sign"  # the review's: −7.2 vs +50.5 [49.6, 51.4]
    assert C.size_word(0.022, -0.03, -0.01) == "opposite sign"


def test_one_threshold_decides_no_difference() -> None:
    """A paper Δ of −0.0028 is inside the ±1 pp equivalence margin: a no-difference claim, not a loss."""
    claims = {c.claim_id: c for c in all_claims()}
    assert claims["table11_sign_after_mlp_text"].expected == 0
    # The words say what TOST tests: agreement with the paper's own value, not a difference of 0.
    assert claims["table11_sign_after_mlp_text"].claim.endswith("within ±1 pp of the paper's -0.28 pp")
    assert claims["table11_sign_after_embedding_listops"].expected == 1  # +2.22 pp
    assert claims["table11_sign_after_attention_pathfinder"].expected == -1


def test_claims_are_the_papers_own() -> None:
    ids = {c.claim_id for c in all_claims()}
    assert "cost_after_embedding_cheapest" not in ids  # Table 14 lists three configurations, not seven
    assert {"cost_after_embedding_below_after_mlp", "cost_multiscale_above_single"} <= ids
    primary = {c.claim_id for c in all_claims() if c.family == "primary"}
    assert primary == {"after_embedding_gain", "after_attention_loss", "multiscale_gain"}
    assert {c.family for c in all_claims()} <= set(C.FAMILIES)


def test_adjusted_verdict_sits_beside_the_unadjusted_one() -> None:
    """Two table11 claims each at p = 0.03: reproduced unadjusted, inconclusive after Holm (0.06); the
    primary claims are one Holm family too (a lone one at p = 0.03 keeps its word)."""
    rows = pd.DataFrame(
        [
            {"claim_id": "a", "family": "table11", "p_value": 0.03, "verdict_unadjusted": "reproduced"},
            {"claim_id": "b", "family": "table11", "p_value": 0.03, "verdict_unadjusted": "reproduced"},
            {"claim_id": "c", "family": "primary", "p_value": 0.03, "verdict_unadjusted": "reproduced"},
            {"claim_id": "d", "family": "table11", "p_value": math.nan, "verdict_unadjusted": "not run"},
        ]
    )
    for column in C.CLAIM_COLUMNS:
        if column not in rows:
            rows[column] = math.nan
    out = C.adjust(rows).set_index("claim_id")
    assert out.loc["a", "p_adjusted"] == pytest.approx(0.06)
    assert out.loc["a", "verdict"] == "inconclusive" and out.loc["a", "verdict_unadjusted"] == "reproduced"
    assert (
        out.loc["c", "verdict"] == "reproduced"
        and out.loc["c", "adjustment"] == "Holm within the 3 primary claims"
    )
    assert out.loc["d", "verdict"] == "not run"


def test_missing_cells_are_not_run_and_diverged_runs_are_judged_with_and_without() -> None:
    runs = grid_runs(lambda t, v, s: 0.7, np.random.default_rng(4))
    runs = runs[~((runs["variant"] == "after_mlp") & (runs["task"] == "image"))].copy()
    runs.loc[(runs["variant"] == "after_embedding") & (runs["seed"] == 0), "status"] = "diverged"
    runs.loc[(runs["variant"] == "after_embedding") & (runs["seed"] == 0), "test_accuracy"] = math.nan
    claims = by_id(C.evaluate(runs, claims=all_claims()))
    assert claims["after_embedding_best"]["verdict"] == "not run"
    assert "After MLP on Image" in claims["after_embedding_best"]["detail"]
    gain = claims["after_embedding_gain"]
    # The learned runs: seeds 1–4, no effect; with the diverged seed at chance (0.1 on ListOps and Image,
    # 0.5 elsewhere: 0.6 and 0.2 below the runs' 0.7), the mean drops by (0.6 · 2 + 0.2 · 3) / 5 / SEEDS.
    assert gain["n"] == SEEDS - 1 and gain["n_excluded"] == 0
    assert gain["effect"] == pytest.approx(0.0, abs=0.005)
    assert gain["failed_runs"].startswith(
        "After Embedding on ListOps, Text, Retrieval, PathFinder, Image: diverged in 1 of 5 seeds (seed 0) — "
    )
    counted = gain["detail"].split("with the failed runs counted against it: ")[1]
    assert float(counted.split(" pp")[0]) == pytest.approx(-100 * (0.6 * 2 + 0.2 * 3) / 5 / SEEDS, abs=0.5)
    assert "decided where the learned runs and the failures counted agree" in gain["method"]


# ----------------------------------------------------------------------------------------------------------
# Error rates by simulation
# ----------------------------------------------------------------------------------------------------------
def _monte_carlo_bound(nominal: float, trials: int, k: float = 3.0) -> float:
    return nominal + k * math.sqrt(nominal * (1 - nominal) / trials)


def test_simulation_interval_coverage_of_the_paired_t() -> None:
    """The 95 % paired t-interval covers the true difference at its nominal rate at n = 5 (the percentile
    bootstrap it replaces missed on each side 5–7 % of the time)."""
    rng = np.random.default_rng(5)
    replications, below, above = 600, 0, 0
    for _ in range(replications):
        seed_effect = rng.normal(0, SEED_SD, SEEDS)
        a = {s: seed_effect[s] + rng.normal(0, NOISE_SD) for s in range(SEEDS)}
        b = {s: seed_effect[s] + rng.normal(0, NOISE_SD) for s in range(SEEDS)}
        est = stats.paired(a, b)
        below += est.high < 0
        above += est.low > 0
    print(f"paired t 95 % interval at n = 5: misses below {below / replications:.4f}, above "
          f"{above / replications:.4f}")  # fmt: skip
    bound = _monte_carlo_bound(stats.ALPHA / 2, replications)
    assert below / replications <= bound and above / replications <= bound


def test_equivalence_needs_the_whole_interval_inside_the_margin() -> None:
    """TOST at 5 %: reproduced exactly when the 95 % paired interval lies inside ± margin (the ListOps small
    study's Head Diffusion, +0.36 pp [−0.49, +1.21], is not inside ± 1 pp)."""
    a = {0: 0.336, 1: 0.330, 2: 0.342, 3: 0.329, 4: 0.335}
    b = {0: 0.331, 1: 0.331, 2: 0.328, 3: 0.330, 4: 0.334}
    est = stats.paired(a, b)
    within, outside = stats.equivalence(est, 0.01)
    assert est.high > 0.01 and within >= stats.ALPHA and outside >= stats.ALPHA  # neither: inconclusive
    narrow = stats.paired(a, {s: v - 0.0005 for s, v in a.items()} | {0: a[0] - 0.0004})
    assert stats.equivalence(narrow, 0.01)[0] < stats.ALPHA  # a tight interval around +0.05 pp
    far = stats.paired(
        {s: v + 0.05 for s, v in b.items()}, {s: v + (0.001 if s % 2 else 0) for s, v in b.items()}
    )
    assert far.low > 0.01 and stats.equivalence(far, 0.01)[1] < stats.ALPHA  # entirely outside: contradicted


def test_simulation_equivalence_at_the_margin() -> None:
    """A true difference of exactly +1 pp (the margin) reads "no difference" at most 2.5 % + MC."""
    rng = np.random.default_rng(13)
    replications, within = 400, 0
    for _ in range(replications):
        seed_effect = rng.normal(0, SEED_SD, SEEDS)
        a = {s: 0.51 + seed_effect[s] + rng.normal(0, NOISE_SD) for s in range(SEEDS)}
        b = {s: 0.50 + seed_effect[s] + rng.normal(0, NOISE_SD) for s in range(SEEDS)}
        within += stats.equivalence(stats.paired(a, b), C.EQUIVALENCE_MARGIN)[0] < stats.ALPHA
    print(f"equivalence at the margin: {within / replications:.4f}")
    assert within / replications <= _monte_carlo_bound(stats.ALPHA / 2, replications)


def test_physqk_ad_claims_on_constructed_lm_runs() -> None:
    """PhysQK-AD 0.1 nats below MHA on every seed, L1 α = 0.44, L2/L3 closed: the seed's claims hold."""
    lm = pd.DataFrame(
        [
            {"task": "lm_text", "variant": v, "scale": "d16", "setting": "base", "seed": s,
             "status": "completed",
             "test_loss_nats": 3.9 - 0.1 * (v == "physqk_ad") + 0.01 * s + 0.002 * ((s + len(v)) % 4)}
            for v in ("mha", "physqk", "physqk_ad")
            for s in range(3)
        ]
    )  # fmt: skip
    alpha = {0: 0.1, 1: 0.44, 2: 0.0005, 3: 0.0002}
    dynamics = pd.DataFrame(
        [
            {"task": "lm_text", "variant": "physqk_ad", "scale": "d16", "setting": "base", "seed": s,
             "step": 10, "epoch": 1, "layer": k, "alpha": a * (1 + 0.02 * ((s + k) % 3)), "eta": 1.0,
             "eff_pe": 1.2 + 0.01 * s}
            for s in range(3)
            for k, a in alpha.items()
        ]
    )  # fmt: skip
    rows = {r["claim_id"]: r for r in physqk.lm_claims(lm, dynamics)}
    assert rows["lm_physqk_ad_vs_mha"]["verdict_unadjusted"] == "reproduced"
    assert rows["lm_l1_most_convective"]["verdict_unadjusted"] == "reproduced"
    assert rows["lm_l1_alpha"]["verdict_unadjusted"] == "reproduced"  # within ± 0.05 of 0.44
    assert rows["lm_closed_layers"]["verdict_unadjusted"] == "reproduced"  # below 0.003
    assert rows["lm_l1_pe_above_1"]["verdict_unadjusted"] == "reproduced"
    assert all(r["family"] == "lm" for r in rows.values())
    assert physqk.lm_claims(lm, None)[-1]["verdict_unadjusted"] == "not run"  # no dynamics: the layer claims
