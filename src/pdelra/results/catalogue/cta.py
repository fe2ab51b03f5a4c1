"""Continuous-Time Attention's claims: our reading of its abstract on the LRA grid (family `cta`), and every
number of its own experiments as its authors run them (family `cta_official`; `pdelra.cta_official.grid`,
tables/cta_official_runs.csv)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.results import claims as C
from pdelra.results.related import CTA_TYPES
from pdelra.runs import BASELINE, MAIN_SCALE

if TYPE_CHECKING:
    import pandas as pd

# Perplexity is no accuracy: a difference within 1 % of the reference cell's perplexity is "no difference",
# the relative counterpart of the 1 pp margin. The paper's own reference decides which claims are
# no-difference claims; our reference cell's perplexity sets the margin they are judged by.
PERPLEXITY_MARGIN = 0.01

CTA_CLAIM_SETTING = "steps4"


def cta_claims() -> tuple[C.Claim, ...]:
    """Continuous-Time Attention's abstract: PDE-evolved attention gives "consistent gains over standard
    Transformers". No number is published, so the direction (+) is the claim, per PDE type (the official
    code's ablation has all four, advection–diffusion included), on the LRA average at 4 pseudo-time steps."""
    return tuple(
        C.Difference(
            f"cta_{t.removeprefix('cta_')}_gain",
            f"CTA ({paper.VARIANT_LABELS.get(t, t)}, 4 steps) beats the standard Transformer "
            "on the LRA average",
            "Continuous-Time Attention, abstract",
            "cta",
            C.Cell(t, MAIN_SCALE, CTA_CLAIM_SETTING),
            C.Cell(BASELINE),
            math.nan,
            direction=+1,
        )
        for t in CTA_TYPES
    )


CTA_OFFICIAL_FAMILY = "cta_official"
CTA_OFFICIAL_PDE = "cta_official_diffusion"
CTA_OFFICIAL_LM_TASK = "wikitext103"
# The official WikiText-103 step count as the grid setting names it (cta_official_grid.steps_setting).
CTA_OFFICIAL_LM_SETTING = f"steps{paper.CTA_OFFICIAL_LM_STEPS}"


def cta_official_claim_list() -> tuple[C.Claim, ...]:
    """Every number of Continuous-Time Attention's own experiments as a claim (family `cta_official`), from
    pdelra.paper.CTA_OFFICIAL*: Table 1 and the character-level IMDb as differences of test accuracy (the
    same ±1 pp rule as the paper's: +0.76 pp on characters is a no-difference claim); WikiText-103's
    validation perplexity (lower is better): PDE vs standard, the steps order 4 < 2 < 1 and each type vs
    diffusion at 4 steps. Table 4's "8 steps unstable" is no number and is not judged."""
    pde, base = C.Cell(CTA_OFFICIAL_PDE), C.Cell(BASELINE)
    claims: list[C.Claim] = []
    tables = {"imdb": "Table 1", "agnews": "Table 1", "sst2": "Table 1", "imdb_char": "Table 2"}
    for task, table in tables.items():
        published = paper.CTA_OFFICIAL[task]
        delta = published[CTA_OFFICIAL_PDE] - published[BASELINE]
        claims.append(
            C.Difference(
                f"cta_official_{task}",
                f"PDE-Transformer vs standard on {paper.CTA_OFFICIAL_TASK_LABELS[task]}: "
                f"{C.direction_word(delta)} ({100 * published[BASELINE]:.4g} → "
                f"{100 * published[CTA_OFFICIAL_PDE]:.4g} %)",
                f"Continuous-Time Attention, {table}",
                CTA_OFFICIAL_FAMILY,
                pde,
                base,
                delta,
                metric=C.Metric(tasks=(task,)),
            )
        )
    perplexity = C.Metric(
        column="best_val_perplexity",
        tasks=(CTA_OFFICIAL_LM_TASK,),
        higher_is_better=False,
        unit="validation perplexity",
    )
    lm = paper.CTA_OFFICIAL[CTA_OFFICIAL_LM_TASK]
    at_steps = {n: C.Cell(CTA_OFFICIAL_PDE, MAIN_SCALE, f"steps{n}") for n in paper.CTA_OFFICIAL_STEPS}
    official = at_steps[paper.CTA_OFFICIAL_LM_STEPS]
    fewer = sorted(at_steps, reverse=True)  # best (most steps) first
    claims += [
        C.Difference(
            "cta_official_wikitext103",
            f"PDE-Transformer has a lower WikiText-103 perplexity than standard ({lm[BASELINE]} → "
            f"{lm[CTA_OFFICIAL_PDE]})",
            "Continuous-Time Attention, Table 3",
            CTA_OFFICIAL_FAMILY,
            official,
            base,
            lm[CTA_OFFICIAL_PDE] - lm[BASELINE],
            metric=perplexity,
            direction=-1,
        ),
        C.PairOrder(
            "cta_official_steps_order",
            "More PDE steps, lower perplexity: "
            + " < ".join(f"{n} step{'s' * (n > 1)} ({paper.CTA_OFFICIAL_STEPS[n]})" for n in fewer),
            "Continuous-Time Attention, Table 4",
            CTA_OFFICIAL_FAMILY,
            tuple(at_steps[n] for n in fewer),
            tuple(paper.CTA_OFFICIAL_STEPS[n] for n in fewer),
            metric=perplexity,
            relative_margin=PERPLEXITY_MARGIN,
        ),
    ]
    types = paper.CTA_OFFICIAL_TYPES
    for variant, value in types.items():
        if variant == CTA_OFFICIAL_PDE:
            continue
        delta = value - types[CTA_OFFICIAL_PDE]
        margin = PERPLEXITY_MARGIN * types[CTA_OFFICIAL_PDE]
        word = "equal to" if C.expected_direction(delta, margin) == 0 else ("above" if delta > 0 else "below")
        claims.append(
            C.Difference(
                f"cta_official_type_{variant.removeprefix('cta_official_')}",
                f"{paper.VARIANT_LABELS.get(variant, variant)} perplexity {word} diffusion at 4 steps "
                f"({value} vs {types[CTA_OFFICIAL_PDE]})",
                "Continuous-Time Attention, Table 5",
                CTA_OFFICIAL_FAMILY,
                C.Cell(variant, MAIN_SCALE, CTA_OFFICIAL_LM_SETTING),
                official,
                delta,
                metric=perplexity,
                margin=margin,
                relative_margin=PERPLEXITY_MARGIN,
            )
        )
    return tuple(claims)


def part_claims(inputs: Mapping[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """The claims of the part `cta_official` (pdelra.parts) from aggregate's inputs by table name."""
    return cta_official_claims(inputs.get("cta_official_runs"))


def cta_official_claims(runs: pd.DataFrame | None) -> list[dict[str, Any]]:
    """The `cta_official` claims judged on tables/cta_official_runs.csv (rows before the family
    adjustment, as `C.judge` makes them); the WikiText-103 claims read the rows of task wikitext103."""
    index = C.RunIndex(runs)
    return [C.judge(claim, index) for claim in cta_official_claim_list()]
