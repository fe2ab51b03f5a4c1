"""The claims engine's error rates and power by simulation, as one table for docs/measurements.md.

Runs the simulations of tests/test_claims_reach.py, tests/test_claims_noise.py and
tests/test_claims_failures.py (the same draws and fixed seeds; the failed-run cases with more replications
than the tests) on tables shaped like real ones (the real tasks' n_test), and prints each rate with its
replications and Monte Carlo se:

    .venv/bin/python benchmarks/claims_rates.py

About 15 minutes on one core.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_claims_failures as failures
import test_claims_noise as noise
import test_claims_reach as reach

from pdelra import paper
from pdelra.results.catalogue.paper import paper_claims


def rate(share: float, trials: int) -> str:
    return f"{100 * share:.1f} % (±{100 * math.sqrt(share * (1 - share) / trials):.1f}, n = {trials})"


FAILED_RUN_REPLICATIONS = 400
NULL_REPLICATIONS = 1200


def failed_runs() -> None:
    """The failed-run, noisy-baseline, three-seed and own-variant cases (tests/test_claims_failures.py)."""
    r, null_r = FAILED_RUN_REPLICATIONS, NULL_REPLICATIONS
    print("\n### Failed runs, a noisy baseline, three seeds, an own variant\n")
    print("n = 5 unless said, run sd 0.5 pp, seed sd 0.5 pp, real n_test, truth = the paper unless null.\n")
    print("| case | what | rate |")
    print("| :--- | :--- | :--- |")

    def row(case: str, what: str, frame, claim_id: str, word: str, column: str = "verdict") -> None:
        share = float((frame.loc[frame["claim_id"] == claim_id, column] == word).mean())
        print(f"| {case} | {what} | {rate(share, frame['rep'].nunique())} |")

    clean = failures.simulate("clean", failures.no_change, replications=r)
    mlp5 = failures.simulate(
        "mlp5", failures.at_chance("pathfinder", "after_mlp", (0, 1, 2, 3, 4)), replications=r
    )
    case = "After MLP at chance in 5 of 5 Pathfinder seeds"
    row(case, "its Table 11 claim contradicted", mlp5, "table11_sign_after_mlp_pathfinder", "contradicted")
    row(case, "after_embedding_best reproduced", mlp5, "after_embedding_best", "reproduced")
    row("clean", "after_embedding_best reproduced", clean, "after_embedding_best", "reproduced")
    row(case, "position_order contradicted (After MLP placed at its failures)", mlp5, "position_order",
        "contradicted")  # fmt: skip
    row("clean", "position_order reproduced", clean, "position_order", "reproduced")
    mlp3 = failures.simulate("mlp3", failures.at_chance("pathfinder", "after_mlp", (0, 1, 2)), replications=r)
    row("After MLP at chance in 3 of 5 Pathfinder seeds", "its Table 11 claim reproduced (unadjusted)", mlp3,
        "table11_sign_after_mlp_pathfinder", "reproduced", "verdict_unadjusted")  # fmt: skip
    four = failures.simulate("clean4", failures.no_change, seeds=4, replications=r)
    for task in ("pathfinder", "listops"):
        frame = failures.simulate(f"base0-{task}", failures.diverged(task, "none", 0), replications=r)
        case = f"the baseline's seed 0 diverged on {paper.TASK_LABELS[task]}"
        row(case, "after_attention_loss reproduced", frame, "after_attention_loss", "reproduced")
        lowest = min(
            (
                float((frame.loc[frame["claim_id"] == c, "verdict"] == "reproduced").mean())
                - float((four.loc[four["claim_id"] == c, "verdict"] == "reproduced").mean()),
                c,
            )
            for c in (f"table11_sign_{v}_{task}" for v in paper.POSITIONS)
        )
        print(f"| {case} | Table 11 of the task, reproduced less clean-at-4-seeds, lowest | "
              f"{100 * lowest[0]:+.1f} pp ({lowest[1]}; n = {r} each) |")  # fmt: skip
    noisy = failures.simulate("noisy-baseline", failures.no_change, null=True, noisier=("none", 3.0),
                              replications=null_r)  # fmt: skip
    fwer = reach.family_errors(noisy)
    covered, intervals = failures.baseline_coverage(noisy)
    print(f"| null, the baseline's run sd ×3 | family-wise error, worst family ({fwer.idxmax()}) | "
          f"{rate(fwer.max(), null_r)} |")  # fmt: skip
    print(
        f"| null, the baseline's run sd ×3 | Table 11 family-wise error | {rate(fwer['table11'], null_r)} |"
    )
    print(f"| null, the baseline's run sd ×3 | Table 11's intervals cover 0 | {rate(covered, intervals)} |")
    three = failures.simulate("three", failures.no_change, seeds=3, replications=r)
    row("n = 3", "multiscale_gain reproduced", three, "multiscale_gain", "reproduced")
    what = "After Embedding on ListOps (+2.2 pp) reproduced"
    row("n = 3", what, three, "table11_sign_after_embedding_listops", "reproduced")
    three_null = failures.simulate("three-null", failures.no_change, seeds=3, null=True, replications=null_r)
    fwer = reach.family_errors(three_null)
    print(f"| n = 3, null | family-wise error, worst family ({fwer.idxmax()}) | {rate(fwer.max(), null_r)} |")
    own = failures.simulate("own", failures.no_change, own_gain=failures.OWN_GAIN, replications=r)
    case = "an own variant +1.56 pp over the baseline"
    row(case, "on ListOps, reproduced", own, "table11_sign_mine_listops", "reproduced")
    own_null = failures.simulate("own-null", failures.no_change, own_gain=0.0, replications=null_r)
    fwer = reach.family_errors(own_null[own_null["family"] == "own"])
    print(f"| an own variant, null | its family's family-wise error | {rate(fwer['own'], null_r)} |")


def main() -> None:
    print("### Truth = the paper (Tables 10, 12)\n")
    print("| seeds | run sd | primary (each) | order | Table 11, |Δ| ≥ 2 pp (lowest) | multiscale_gain |")
    print("| ---: | ---: | :--- | :--- | :--- | :--- |")
    for seeds, sd in reach.SETTINGS:
        table = reach.rates(reach.simulate(seeds, sd, False, reach.REPLICATIONS))
        n = reach.REPLICATIONS
        primary = ", ".join(f"{100 * r:.0f} %" for r in table.loc[table["family"] == "primary", "reproduced"])
        big = table[(table["family"] == "table11") & (table["paper"].abs() >= 0.02)]["reproduced"].min()
        order, multi = table.loc["position_order", "reproduced"], table.loc["multiscale_gain", "reproduced"]
        print(
            f"| {seeds} | {100 * sd:g} pp | {primary} (n = {n}) | {rate(order, n)} | {rate(big, n)} "
            f"| {rate(multi, n)} |"
        )
    print("\n### Null, every cell equally noisy: family-wise error after Holm (nominal 5 %)\n")
    for seeds, sd in (reach.SETTINGS[0], reach.SETTINGS[3]):
        fwer = reach.family_errors(reach.simulate(seeds, sd, True, reach.NULL_REPLICATIONS, power=False))
        worst = rate(fwer.max(), reach.NULL_REPLICATIONS)
        print(f"- n = {seeds}, sd {100 * sd:g} pp: worst family {fwer.idxmax()} {worst}")
    print(f"\n### Null, {noise.NOISY} noisier (every scale)\n")
    print("| seeds | run sd | factor | worst family-wise error | coverage of its 95 % intervals |")
    print("| ---: | ---: | ---: | :--- | :--- |")
    for seeds, sd in reach.SETTINGS:
        for factor in (3.0, 4.0):
            frame = reach.simulate(
                seeds, sd, True, noise.HETERO_REPLICATIONS, (noise.NOISY, factor), power=False
            )
            fwer = reach.family_errors(frame)
            worst = rate(fwer.max(), noise.HETERO_REPLICATIONS)
            covered = rate(*noise.noisy_coverage(frame))
            print(f"| {seeds} | {100 * sd:g} pp | ×{factor:g} | {fwer.idxmax()} {worst} | {covered} |")
    print("\n### Truth = the paper, one seed of one cell failed (n = 5, sd 0.5 pp, real test-set sizes)\n")
    print(
        "| task | failed cell | claims not involving it: lowest share of power kept (own test; after Holm) |"
    )
    print("| :--- | :--- | :--- |")
    for task in paper.TASKS:
        for variant, kind in noise.FAILURES:
            frame = noise.with_and_without_a_failure(task, variant, kind)
            touched = {c.claim_id for c in paper_claims() if noise.involves(c, task, variant)}
            others = frame[~frame["claim_id"].isin(touched)]
            shares = []
            for before, after in (("verdict_unadjusted", "failed_unadjusted"), ("verdict", "failed")):
                r = noise.kept_power(others, before, after, 0.9)
                r = r[r["before"] >= 0.5]
                shares.append(f"{(r['after'] / r['before']).min():.2f}")
            label = paper.TASK_LABELS[task]
            print(f"| {label} | {variant} {kind} | {'; '.join(shares)} (claims with power ≥ 50 %) |")


if __name__ == "__main__":
    main()
    failed_runs()
