"""PhysQK-AD's claims on its language model (family `lm`): ΔEval against MHA, the α-allocation ablation, and
the per-layer picture at the end of training (L1 convective, L2/L3 closed), from lm_runs.csv and
lm_dynamics.csv (`pdelra lm aggregate`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.results import claims as C
from pdelra.results import stats
from pdelra.results.related import final_layers

if TYPE_CHECKING:
    import pandas as pd

# "L1 α ≈ 0.44" of PhysQK-AD read as within ± 0.05.
L1_ALPHA_MARGIN = 0.05


def _threshold_row(
    claim_id: str,
    claim: str,
    paper_effect: float,
    expected: int,
    values: Mapping[int, float],
    threshold: float,
    missing: str,
    margin: float = 0.0,
) -> dict[str, Any]:
    """A per-seed quantity against a published threshold: one-sample t (TOST when expected is 0)."""
    meta = C.Difference(claim_id, claim, "PhysQK-AD abstract", "lm", C.Cell(""), C.Cell(""), paper_effect,
                      metric=C.Metric(unit="per-layer value"), direction=expected, margin=margin)  # fmt: skip
    if missing:
        return C._row(meta, kind="threshold", detail=missing)
    est = stats.paired(dict(values), dict.fromkeys(values, threshold))
    return C._row(
        meta,
        kind="threshold",
        **C._judged(est, expected, margin, "t"),
        detail=f"value − {threshold:g} per seed",
    )


def part_claims(inputs: Mapping[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """The claims of the part `lm` (pdelra.parts) from aggregate's inputs by table name."""
    return lm_claims(inputs.get("lm_runs"), inputs.get("lm_dynamics"))


def lm_claims(lm_runs: pd.DataFrame | None, dynamics: pd.DataFrame | None) -> list[dict[str, Any]]:
    """PhysQK-AD's claims for every (corpus, scale) with LM runs (ids get the corpus and scale when there
    are several)."""
    if lm_runs is None or lm_runs.empty:
        return []
    groups = list(lm_runs.groupby(["task", "scale"]).groups)
    index = C.RunIndex(lm_runs)
    rows: list[dict[str, Any]] = []
    for task, scale in groups:
        suffix = f"_{task}_{scale}" if len(groups) > 1 else ""
        loss = C.Metric(
            column="test_loss_nats", tasks=(task,), higher_is_better=False, unit="nats/token (test loss)"
        )
        ad, mha = C.Cell("physqk_ad", scale), C.Cell("mha", scale)
        claims: list[C.Claim] = [
            C.Difference(
                "lm_physqk_ad_vs_mha" + suffix,
                "PhysQK-AD beats MHA (ΔEval −0.065 nats)",
                "PhysQK-AD abstract",
                "lm",
                ad,
                mha,
                paper.PHYSQK_AD_DELTA["physqk_ad"],
                metric=loss,
                direction=-1,
            ),
            C.Difference(
                "lm_physqk_vs_mha" + suffix,
                "pure-diffusion PhysQK loses to MHA (ΔEval +0.007 nats)",
                "PhysQK-AD abstract",
                "lm",
                C.Cell("physqk", scale),
                mha,
                paper.PHYSQK_AD_DELTA["physqk"],
                metric=loss,
                direction=+1,
            ),
        ]
        allocations = sorted(set(lm_runs[lm_runs["variant"] == "physqk_ad"]["setting"]) - {C.BASE_SETTING})
        claims += [
            C.Difference(
                f"lm_allocation_{setting}{suffix}",
                f"allocation '{setting}' beats joint per-layer α (by 0.43–0.51 nats)",
                "PhysQK-AD abstract",
                "lm",
                C.Cell("physqk_ad", scale, setting),
                ad,
                -sum(paper.PHYSQK_AD_ABLATION_GAIN) / 2,
                metric=loss,
                direction=-1,
            )
            for setting in allocations
        ]
        rows += [C.judge(c, index) for c in claims]
        rows += _layer_claims(dynamics, task, scale, suffix)
    return rows


def _layer_claims(dynamics: pd.DataFrame | None, task: str, scale: str, suffix: str) -> list[dict[str, Any]]:
    final = final_layers(dynamics) if dynamics is not None else None
    per_layer: dict[int, dict[int, float]] = {}
    pe: dict[int, dict[int, float]] = {}
    if final is not None and len(final):
        own = final[
            (final["task"] == task)
            & (final["scale"] == scale)
            & (final["variant"] == "physqk_ad")
            & (final["setting"] == C.BASE_SETTING)
        ]
        for layer, g in own.groupby("layer"):
            seeds = g["seed"].astype(int)
            per_layer[int(layer)] = dict(zip(seeds, g["alpha"].astype(float), strict=True))
            pe[int(layer)] = dict(zip(seeds, g["eff_pe"].astype(float), strict=True))
    c, closed_layers = paper.PHYSQK_AD_CONVECTIVE_LAYER, paper.PHYSQK_AD_CLOSED_LAYERS
    closed = [k for k in closed_layers if k in per_layer]
    needed = f"needs layers L{c}–L{max(closed_layers)} of a joint-α PhysQK-AD run"
    missing = "" if c in per_layer and len(closed) == len(closed_layers) else needed
    seeds = [] if missing else sorted(set.intersection(*(set(v) for v in per_layer.values())))
    others = {s: max(v[s] for k, v in per_layer.items() if k != c) for s in seeds}
    return [
        _threshold_row(
            "lm_l1_most_convective" + suffix,
            "convection concentrates in L1 (α_L1 − max other α > 0)",
            paper.PHYSQK_AD_L1_ALPHA - paper.PHYSQK_AD_CLOSED_ALPHA,
            +1,
            {s: per_layer[c][s] - others[s] for s in seeds},
            0.0,
            missing,
        ),
        _threshold_row(
            "lm_l1_alpha" + suffix,
            f"L1 α ≈ {paper.PHYSQK_AD_L1_ALPHA} (within ±{L1_ALPHA_MARGIN})",
            0.0,
            0,
            {s: per_layer[c][s] for s in seeds},
            paper.PHYSQK_AD_L1_ALPHA,
            missing,
            margin=L1_ALPHA_MARGIN,
        ),
        _threshold_row(
            "lm_closed_layers" + suffix,
            f"L2/L3 close: α < {paper.PHYSQK_AD_CLOSED_ALPHA}",
            math.nan,
            -1,
            {s: max(per_layer[k][s] for k in closed) for s in seeds},
            paper.PHYSQK_AD_CLOSED_ALPHA,
            missing,
        ),
        _threshold_row(
            "lm_l1_pe_above_1" + suffix,
            f"L1 eff_Pe crosses 1 ({paper.PHYSQK_AD_L1_PE})",
            paper.PHYSQK_AD_L1_PE - 1.0,
            +1,
            {s: pe[c][s] for s in seeds},
            1.0,
            missing,
        ),
    ]
