"""The verdict rule and its intervals on constructed runs whose answer is known."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd
import pytest
from scipy import stats

from pdelra import claims, paper
from pdelra.claims import (
    CLAIM_COLUMNS,
    Best,
    BestSingleScale,
    Cell,
    Difference,
    Metric,
    Ranking,
    all_claims,
    difference_interval,
    evaluate,
    verdict,
)

LISTOPS = Metric(tasks=("listops",))


def runs(
    rows: Iterable[tuple[str, str, str, int, float | None]], status: dict[tuple, str] | None = None
) -> pd.DataFrame:
    """runs.csv rows from (task, variant, scale, seed, accuracy); `status` marks (variant, seed) otherwise."""
    status = status or {}
    return pd.DataFrame(
        [
            {
                "task": t,
                "variant": v,
                "scale": s,
                "setting": "base",
                "seed": seed,
                "status": status.get((v, seed), "completed"),
                "test_accuracy": None if status.get((v, seed)) == "diverged" else acc,
                "median_step_time_s": 0.1,
            }
            for t, v, s, seed, acc in rows
        ]
    )


def gain_claim(paper_effect: float = 0.04) -> Difference:
    return Difference(
        "gain", "A beats B", "test", Cell("after_embedding"), Cell("none"), paper_effect, LISTOPS
    )


def pair(base: list[float], diffs: list[float]) -> pd.DataFrame:
    rows = []
    for seed, (b, d) in enumerate(zip(base, diffs, strict=True)):
        rows += [("listops", "none", "h1", seed, b), ("listops", "after_embedding", "h1", seed, b + d)]
    return runs(rows)


# ----------------------------------------------------------------------------------------------------
def test_paired_t_interval_matches_the_textbook_formula() -> None:
    iv = difference_interval({0: 0.44, 1: 0.55, 2: 0.66}, {0: 0.40, 1: 0.50, 2: 0.60})
    half = stats.t.ppf(0.975, 2) * 0.01 / math.sqrt(3)  # differences 0.04, 0.05, 0.06: sd 0.01
    assert iv.method == "paired t" and iv.n == 3
    assert iv.effect == pytest.approx(0.05)
    assert (iv.low, iv.high) == pytest.approx((0.05 - half, 0.05 + half))


def test_pairing_removes_the_seed_effect_welch_does_not() -> None:
    # Seeds differ a lot (0.3 … 0.7) but A is always 0.05 above B: paired → tight; unpaired → wide.
    a = {s: 0.3 + 0.1 * s + 0.05 + 0.001 * (-1) ** s for s in range(5)}
    b = {s: 0.3 + 0.1 * s for s in range(5)}
    paired = difference_interval(a, b)
    welch = difference_interval(a, {s + 10: v for s, v in b.items()})  # no shared seeds
    assert paired.method == "paired t" and welch.method == "Welch t"
    assert paired.low > 0 and welch.low < 0 < welch.high


def test_clear_win_is_reproduced_with_the_paper_value_inside() -> None:
    row = evaluate(pair([0.30, 0.35, 0.40, 0.33, 0.37], [0.041, 0.039, 0.042, 0.038, 0.040]), [gain_claim()])
    r = row.iloc[0]
    assert list(row.columns) == list(CLAIM_COLUMNS)
    assert r["verdict"] == "reproduced" and r["n"] == 5 and r["paper_in_ci"] == True  # noqa: E712
    assert r["effect"] == pytest.approx(0.04)


def test_clear_win_of_a_different_size_is_reproduced_but_the_magnitude_column_says_no() -> None:
    r = evaluate(pair([0.30, 0.35, 0.40], [0.010, 0.011, 0.012]), [gain_claim()]).iloc[0]
    assert r["verdict"] == "reproduced" and not r["paper_in_ci"]


def test_clear_loss_contradicts_a_claimed_gain_and_reproduces_a_claimed_loss() -> None:
    data = pair([0.30, 0.35, 0.40], [-0.03, -0.031, -0.029])
    assert evaluate(data, [gain_claim(0.04)]).iloc[0]["verdict"] == "contradicted"
    assert evaluate(data, [gain_claim(-0.0245)]).iloc[0]["verdict"] == "reproduced"


def test_overlapping_seeds_are_inconclusive() -> None:
    r = evaluate(pair([0.30, 0.35, 0.40, 0.33], [0.02, -0.02, 0.03, -0.025]), [gain_claim()]).iloc[0]
    assert r["verdict"] == "inconclusive" and r["ci_low"] < 0 < r["ci_high"]


def test_a_grid_with_missing_cells_is_not_run_and_names_the_gap() -> None:
    data = runs([("listops", "none", "h1", s, 0.3) for s in range(3)])
    r = evaluate(data, [gain_claim()]).iloc[0]
    assert r["verdict"] == "not run" and r["n"] == 0 and math.isnan(r["effect"])
    assert "After Embedding: no run on listops" in r["detail"]
    # A claim over several tasks is not run while one task is missing, even if the others are complete.
    two = Difference(
        "g", "x", "t", Cell("after_embedding"), Cell("none"), 0.04, Metric(tasks=("listops", "text"))
    )
    both = pd.concat([pair([0.3, 0.4, 0.5], [0.05] * 3), runs([("text", "none", "h1", 0, 0.6)])])
    assert evaluate(both, [two]).iloc[0]["verdict"] == "not run"


def test_diverged_runs_are_left_out_counted_and_can_make_a_claim_inconclusive() -> None:
    rows = []
    for seed in range(3):
        rows += [
            ("listops", "none", "h1", seed, 0.30 + 0.01 * seed),
            ("listops", "after_embedding", "h1", seed, 0.35),
        ]
    some = evaluate(runs(rows, {("after_embedding", 2): "diverged"}), [gain_claim()]).iloc[0]
    assert some["n"] == 2 and some["n_excluded"] == 1 and "not completed" in some["detail"]
    most = evaluate(
        runs(rows, {("after_embedding", 1): "diverged", ("after_embedding", 2): "diverged"}), [gain_claim()]
    )
    assert most.iloc[0]["verdict"] == "inconclusive" and most.iloc[0]["n_excluded"] == 2


def test_a_single_seed_is_inconclusive_not_a_verdict() -> None:
    r = evaluate(pair([0.30], [0.2]), [gain_claim()]).iloc[0]
    assert (
        r["verdict"] == "inconclusive" and r["effect"] == pytest.approx(0.2) and r["method"] == "none (n < 2)"
    )


@pytest.mark.parametrize(
    ("expected", "low", "high", "n", "word"),
    [
        (1, 0.01, 0.05, 5, "reproduced"),
        (1, -0.05, -0.01, 5, "contradicted"),
        (1, -0.01, 0.05, 5, "inconclusive"),
        (-1, -0.05, -0.01, 5, "reproduced"),
        (-1, 0.01, 0.05, 5, "contradicted"),
        (0, -0.005, 0.008, 5, "reproduced"),  # inside ± 0.01
        (0, 0.02, 0.05, 5, "contradicted"),
        (0, -0.005, 0.02, 5, "inconclusive"),
        (1, 0.01, 0.05, 1, "inconclusive"),
        (1, math.nan, math.nan, 0, "inconclusive"),
    ],
)
def test_verdict_rule(expected: int, low: float, high: float, n: int, word: str) -> None:
    assert verdict(expected, low, high, n) == word
    assert verdict(expected, low, high, n, missing=True) == "not run"


def test_no_difference_claims_use_equivalence() -> None:
    claim = gain_claim(0.0)
    assert claim.expected == 0
    tight = evaluate(pair([0.3, 0.4, 0.5, 0.45], [0.001, -0.002, 0.0, 0.001]), [claim]).iloc[0]
    assert tight["verdict"] == "reproduced"
    far = evaluate(pair([0.3, 0.4, 0.5, 0.45], [0.05, 0.051, 0.049, 0.05]), [claim]).iloc[0]
    assert far["verdict"] == "contradicted"


def best_runs(target_gap: float, noise: list[float]) -> pd.DataFrame:
    rows = []
    for seed, e in enumerate(noise):
        rows.append(("listops", "after_embedding", "h1", seed, 0.40 + e))
        rows.append(("listops", "after_mlp", "h1", seed, 0.40 - target_gap + e))
        rows.append(("listops", "after_attention", "h1", seed, 0.30 + e))
    return runs(rows)


BEST = Best(
    "best", "x", "t", Cell("after_embedding"), (Cell("after_mlp"), Cell("after_attention")), 0.03, LISTOPS
)


def test_best_is_reproduced_when_it_beats_every_other_and_contradicted_when_one_is_clearly_better() -> None:
    win = evaluate(best_runs(0.03, [0.0, 0.01, -0.01, 0.005]), [BEST]).iloc[0]
    assert win["verdict"] == "reproduced" and win["effect"] == pytest.approx(0.03)
    assert "runner-up: After MLP" in win["detail"]
    lose = evaluate(best_runs(-0.05, [0.0, 0.01, -0.01, 0.005]), [BEST]).iloc[0]
    assert lose["verdict"] == "contradicted" and lose["effect"] == pytest.approx(-0.05)
    data = best_runs(0.0, [0.0, 0.01, -0.01, 0.005])
    data.loc[data["variant"] == "after_mlp", "test_accuracy"] += [0.01, -0.01, 0.005, -0.004]
    assert evaluate(data, [BEST]).iloc[0]["verdict"] == "inconclusive"


def ranking_runs(order: list[str], noise: float) -> pd.DataFrame:
    rows = []
    for seed in range(5):
        for i, v in enumerate(order):
            rows.append(("listops", v, "h1", seed, 0.5 - 0.02 * i + noise * ((seed * 7 + i * 3) % 5 - 2)))
    return runs(rows)


RANK = Ranking(
    "rank", "x", "t", tuple(Cell(v) for v in paper.POSITIONS), paper.TABLE4_PREDICTED_RANK, 1.0, LISTOPS
)


def test_ranking_tau_and_its_bootstrap_interval() -> None:
    same = evaluate(ranking_runs(list(paper.POSITIONS), 0.001), [RANK]).iloc[0]
    assert same["effect"] == pytest.approx(1.0) and same["verdict"] == "reproduced" and same["n"] == 5
    reverse = evaluate(ranking_runs(list(reversed(paper.POSITIONS)), 0.001), [RANK]).iloc[0]
    assert reverse["effect"] == pytest.approx(-1.0) and reverse["verdict"] == "contradicted"
    noisy = evaluate(ranking_runs(list(paper.POSITIONS), 0.05), [RANK]).iloc[0]
    assert noisy["ci_low"] < noisy["effect"] <= noisy["ci_high"]


def test_multiscale_claim_compares_with_the_best_single_scale_chosen_on_our_runs() -> None:
    rows = []
    for seed in range(4):
        e = 0.002 * seed
        rows += [
            ("listops", "after_mlp", "h1", seed, 0.39 + e),
            ("listops", "after_mlp", "h2", seed, 0.41 + e),
            ("listops", "after_mlp", "h4", seed, 0.38 + e),
            ("listops", "after_mlp", "multi", seed, 0.42 + e + 0.001 * (-1) ** seed),
        ]
    claim = Difference(
        "m", "x", "t", Cell("after_mlp", "multi"), BestSingleScale("after_mlp"), 0.008, LISTOPS, 1
    )
    r = evaluate(runs(rows), [claim]).iloc[0]
    assert r["verdict"] == "reproduced" and r["effect"] == pytest.approx(0.01)
    assert "best single scale: h2" in r["detail"]


def test_cost_overhead_is_per_seed_relative_to_the_baseline() -> None:
    rows = []
    for seed in range(3):
        for v, t in (("none", 0.100), ("after_embedding", 0.105), ("after_mlp", 0.112)):
            step = t * (1 + 0.1 * seed)  # seeds differ in speed; the overhead ratio does not
            rows.append(
                {
                    "task": "listops",
                    "variant": v,
                    "scale": "h1",
                    "setting": "base",
                    "seed": seed,
                    "status": "completed",
                    "test_accuracy": 0.4,
                    "median_step_time_s": step,
                }
            )
    cost = Metric("median_step_time_s", ("listops",), Cell("none"), higher_is_better=False)
    claim = Best("c", "x", "t", Cell("after_embedding"), (Cell("after_mlp"),), 7.2, cost)
    r = evaluate(pd.DataFrame(rows), [claim]).iloc[0]
    assert r["effect"] == pytest.approx(7.0) and r["verdict"] == "reproduced"  # 12 % − 5 % overhead


def test_the_paper_claims_have_the_stable_ids_and_paper_values() -> None:
    by_id = {c.claim_id: c for c in all_claims()}
    for needed in (
        "after_embedding_gain",
        "after_attention_loss",
        "after_embedding_best",
        "position_ranking",
        "multiscale_gain_after_embedding",
        "multiscale_gain_after_mlp",
        "multiscale_gain_between_layers",
    ):
        assert needed in by_id
    assert by_id["after_embedding_gain"].paper_effect == pytest.approx(0.0407)
    assert by_id["after_attention_loss"].paper_effect == pytest.approx(-0.0245)
    assert by_id["multiscale_gain_after_embedding"].paper_effect == pytest.approx(0.0090)
    assert len([i for i in by_id if i.startswith("table11_sign_")]) == 35
    assert claims.CLAIMS[0].claim_id == "after_embedding_gain"


def test_paper_table11_is_table10_minus_the_baseline() -> None:
    for variant, per_task in paper.TABLE11.items():
        for task, cell in per_task.items():
            delta = paper.TABLE10[variant][task] - paper.TABLE10["none"][task]
            assert cell["delta"] == pytest.approx(delta, abs=1.5e-4), (variant, task)
            assert cell["relative_pct"] == pytest.approx(100 * delta / paper.TABLE10["none"][task], abs=0.02)
