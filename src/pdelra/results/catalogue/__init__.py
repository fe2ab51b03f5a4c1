"""Every claim the pipeline judges, typed once as data, one module per system: `paper` (PDE-Transformer),
`cta` (Continuous-Time Attention: our reading of its abstract, and its own experiments), `physqk`
(PhysQK-AD's language model). The engine that judges them is `pdelra.results.claims`; the diagnostics'
mechanism claims are judged in `pdelra.results.diagnostics`."""

from __future__ import annotations

from pdelra.results import claims as C
from pdelra.results.catalogue.cta import cta_claims
from pdelra.results.catalogue.paper import paper_claims


def all_claims() -> tuple[C.Claim, ...]:
    """The claims judged on the LRA runs table (the paper's and CTA's on the LRA grid), ids unique."""
    claims = paper_claims() + cta_claims()
    ids = [c.claim_id for c in claims]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"claim ids must be unique; repeated: {repeated}")
    return claims
