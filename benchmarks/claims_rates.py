"""The claims engine's error rates and power by simulation, as one table for docs/measurements.md.

Runs the simulations of tests/test_claims_reach.py and tests/test_claims_noise.py (the same fixed seeds, so
the same figures the tests assert on) and prints each rate with its replications and Monte Carlo se:

    .venv/bin/python benchmarks/claims_rates.py

About 8 minutes on one core.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_claims_noise as noise
import test_claims_reach as reach

from pdelra import paper
from pdelra.results.catalogue.paper import paper_claims


def rate(share: float, trials: int) -> str:
    return f"{100 * share:.1f} % (±{100 * math.sqrt(share * (1 - share) / trials):.1f}, n = {trials})"


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
        fwer = reach.family_errors(reach.simulate(seeds, sd, True, reach.NULL_REPLICATIONS))
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
