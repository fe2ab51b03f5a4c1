"""A model's settings, importable without torch: the fields of pdelra.nn.model.ModelConfig, which adds their
checks (those need the operator tables, hence torch).

These fields are the one list of a model's settings. A field whose metadata holds `run_config` is one that
every run config states under `model:`, with the JSON schema of its value there; pdelra.training.runconfig
derives its required model keys and their schema from them (`run_config_keys`), so the two cannot drift.
Continuous-Time Attention's backbone (pdelra.nn.cta_official) reads these fields without importing the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

_POS_INT = {"type": "integer", "minimum": 1}
_RATE = {"type": "number", "minimum": 0, "exclusiveMaximum": 1}


def _stated(default: Any, schema: dict[str, Any]) -> Any:
    """A field every run config must state, its value checked against `schema` (JSON schema)."""
    return field(default=default, metadata={"run_config": schema})


@dataclass(frozen=True)
class ModelFields:
    vocab_size: int
    num_classes: int
    max_length: int
    d_model: int = _stated(128, _POS_INT)
    n_layers: int = _stated(6, {"type": "integer", "minimum": 0})
    n_heads: int = _stated(8, _POS_INT)
    d_mlp: int = _stated(512, _POS_INT)
    dropout: float = _stated(0.1, _RATE)
    # > 0 forces CPU SDPA onto its math path, 2–12× slower (measured on 2 cores at lengths 512–4096)
    attn_dropout: float = _stated(0.0, _RATE)
    variant: str = "none"
    scale: str = "h1"
    alpha_init: float = _stated(0.1, {"type": "number", "minimum": 0})
    two_tower: bool = False
    cta_steps: int = 3  # pseudo-time steps of the Continuous-Time Attention variants
    stencil_scaling: str = "unit"  # diffusion layers: "unit" (eq. 6) or "inverse_h2" (eq. 11, Δ_h / h²)
    multiscale_init: str = "paper"  # "paper": α_init × (1, 0.6, 0.3); "normalised": same ratios, Σ = α_init
    fused_diffusion: bool = True  # diffusion layers as one compiled operator (pdelra.nn.fused); False = eager
    backbone: str = "pdelra"  # a key of ENCODERS: "pdelra" (this pre-LN one) or "official_cta" (CTA's own)
    # A variant declared in the workflow config: {point, or a built-in variant's name for its points:
    # {"operator": name, "args": {...}}}; None: the row VARIANTS[variant]. Not hashed (a dict).
    operators: Mapping[str, Mapping[str, Any]] | None = field(default=None, hash=False)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


def run_config_keys() -> dict[str, dict[str, Any]]:
    """The model keys every run config must state, in field order, each with the JSON schema of its value."""
    return {f.name: f.metadata["run_config"] for f in fields(ModelFields) if "run_config" in f.metadata}
