"""The LRA classifier: a pre-LN Transformer encoder with PDE diffusion at any of the paper's insertion points,
and the two related systems (Continuous-Time Attention, PhysQK / PhysQK-AD) on the same footing.

    tokens ─▶ token emb + learned pos emb ─▶ [embedding] ─▶ block₁ ─▶ [between_blocks] ─▶ … ─▶ block_n
           ─▶ LayerNorm ─▶ masked mean pool ─▶ head

    block:  x ← x + drop(attn_output(Attn(LN₁(attn_input(x)))))       Attn: values ─▶ [attn_values],
            x ← x + drop(mlp_output(MLP(LN₂(mlp_input(x)))))             per-head outputs ─▶ [attn_heads]
            x ← block_output(x)

Every [point] is the identity unless the variant's row in `VARIANTS` puts an operator there; this table is
the only place variants differ. A variant declared in the workflow config (`variants:`, ModelConfig.operators)
is a row too, built from data: an operator name (`OPERATORS`, or a user's `module:attr`) per point. `none`
has no row entries; the seven positions of the paper (Table 5) and the related systems are one or two entries
each. Scales `SCALES` choose the Laplacian step(s) of every diffusion operator. `ModelConfig.backbone` picks
the encoder from `ENCODERS`: this pre-LN one (`pdelra`) or the Continuous-Time Attention authors' post-LN
stack (`official_cta`, `pdelra.nn.cta_official`, whose only point is block_output). An encoder names its
insertion points once, in its POINTS; a new point is a name there and the `_point` that fills it.

Padding comes only from the explicit `lengths`, never from token values (the original LRA code masked token 0,
i.e. black pixels, as padding). Valid outputs never depend on padding content or padding length.

Choices the papers leave open
-----------------------------
- between_layers: one diffusion layer between each pair of consecutive blocks (n_layers − 1 layers), on the
  residual stream; none before the first block (that is after_embedding) or after the last.
- before_layernorm: the Euler step on the input of LN₁ and LN₂, branch only; the residual stream itself is
  untouched. Eq. 9's LayerNorm after the update is the sub-layer's own LN₁/LN₂, which follows immediately:
  a second LayerNorm in front of it would only add cost (two per block) and a redundant affine map.
- after_mlp / after_attention: on the branch output before dropout and the residual add.
- in_attention: rows of A diffused along keys with α per value channel, computed exactly as
  A·(I + Σ α_k Δ_k)·V (Δ symmetric). No LayerNorm, so rows stay probability distributions.
- across_heads: per-head outputs (batch, length, heads, head_dim) diffused along the head axis (heads are
  reflected at both ends like a sequence), α per head-dim channel, with the paper's LayerNorm over head_dim.
- Multi-scale step sizes: α_k = ½·softmax([θ, 0])_k per channel, initialised at alpha_init × (1, 0.6, 0.3).
- Continuous-Time Attention (cta_*): `cta_steps` pseudo-time steps with the same bounded step sizes. Diffusion
  and wave are linear in A, so they act on V and keep fused attention (wave: leapfrog from rest).
  Reaction–diffusion uses a logistic reaction ρA(1−A) and row renormalisation; it is nonlinear in A, so that
  variant MATERIALISES the L × L attention matrix (O(L²) memory), the one exception to fused attention.
  Advection–diffusion (∂A/∂t = αΔA + β∂ₓA, central difference, `pdelra.nn.pde_schemes`) is linear in A too and
  acts on V as Mᵀ; |β| < 2α and Σα < ½ by construction keep every evolved row a probability distribution.
- Continuous-Time Attention as its authors run it (cta_official_*): `cta_steps` official refinement steps of
  the hidden states after each block's MLP residual add (their code refines after each Transformer layer);
  fixed ends, α and β unconstrained, official initial values. The differences table is
  pdelra.nn.cta_official's.
- PhysQK / PhysQK-AD: token coordinates r (batch, length, d_model) start as the embedding output x₀ (every
  token starts at its embedded position). In each block, r is transported by the block's own attention
  weights (per head, r split across heads like V, appended to V so one fused call gives A·r), then
      PhysQK:     r ← r + W_update(A·r − r)
      PhysQK-AD:  r ← r + η[(1−α)·W_update(A·r − r) + α·(r[t] − r[t−1])],  α = σ(w_α), η = exp(w_η) per layer,
  with r[−1] := r[0] (no convection into the first token) and w_α = w_η = 0 at init (α = ½, η = 1).
  The displacement r_new − r feeds the token stream: it is added to the residual stream after the attention
  branch, so coordinates steer token features in every block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pdelra import paper
from pdelra.importing import import_callable
from pdelra.nn.config import ModelFields
from pdelra.nn.cta_official import OFFICIAL_VARIANTS, OfficialEncoder, PDERefinement
from pdelra.nn.ops import (
    MULTISCALE_INITS,
    STENCIL_SCALINGS,
    DiffusionLayer,
    PseudoTimeDiffusion,
    PseudoTimeReactionDiffusion,
    PseudoTimeWave,
)
from pdelra.nn.pde_schemes import PseudoTimeAdvectionDiffusion

SCALES: dict[str, tuple[int, ...]] = {"h1": (1,), "h2": (2,), "h4": (4,), "multi": (1, 2, 4)}


@dataclass(frozen=True)
class ModelConfig(ModelFields):
    """A model's settings (pdelra.nn.config, their one list) and their checks, made when it is built."""

    def __post_init__(self) -> None:
        if self.stencil_scaling not in STENCIL_SCALINGS:
            choices = ", ".join(STENCIL_SCALINGS)
            raise ValueError(f"unknown stencil_scaling {self.stencil_scaling!r}; choose one of {choices}")
        if self.multiscale_init not in MULTISCALE_INITS:
            choices = ", ".join(MULTISCALE_INITS)
            raise ValueError(f"unknown multiscale_init {self.multiscale_init!r}; choose one of {choices}")
        if self.operators is None and self.variant not in VARIANTS:
            raise ValueError(
                f"unknown variant {self.variant!r}; choose one of {', '.join(VARIANTS)}, or declare it "
                "under the config's `variants`"
            )
        if self.scale not in SCALES:
            raise ValueError(f"unknown scale {self.scale!r}; choose one of {', '.join(SCALES)}")
        if self.backbone not in ENCODERS:
            raise ValueError(f"unknown backbone {self.backbone!r}; choose one of {', '.join(ENCODERS)}")
        foreign = sorted(set(variant_row(self)) - set(ENCODERS[self.backbone].POINTS))
        if foreign:
            raise ValueError(
                f"variant {self.variant!r} puts operators at {', '.join(foreign)}, which backbone "
                f"{self.backbone!r} does not have (it has {', '.join(ENCODERS[self.backbone].POINTS)})"
            )
        if self.n_layers < 0:
            raise ValueError(f"n_layers must be ≥ 0, got {self.n_layers}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        absent = [point for point in variant_row(self) if point_count(point, self.n_layers) == 0]
        if absent:  # the variant would silently train the plain baseline
            needs = max(min_layers(point) for point in absent)
            raise ValueError(
                f"variant {self.variant!r} puts its operator at {', '.join(absent)}, which a model with "
                f"n_layers={self.n_layers} does not have: it needs n_layers ≥ {needs}"
            )
        for name in ("vocab_size", "num_classes", "max_length", "d_model", "n_heads", "d_mlp", "cta_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")


# ----------------------------------------------------------------------------------------------------------
# Operators that can sit at an insertion point. Each builder gets the config; each operator is called as
# op(x, lengths) and returns a tensor shaped like x.


class Identity(nn.Module):
    """An empty insertion point."""

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        return x


class HeadDiffusion(nn.Module):
    """Diffusion along the head axis of per-head outputs (batch, length, heads, head_dim); never padded."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.diffusion = _diffusion_layer(cfg, cfg.head_dim)

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        return self.diffusion(x)  # heads are never padded: lengths concern the sequence axis


class CoordinateFlow(nn.Module):
    """PhysQK: one block's pure-diffusion update of the token coordinates, r ← r + W_update(A·r − r)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.update = nn.Linear(cfg.d_model, cfg.d_model, bias=False)  # W_update

    def forward(self, r: Tensor, transported: Tensor) -> Tensor:
        """r, transported = A·r: (B, L, d) → new r."""
        return r + self.update(transported - r)


class ConvectionDiffusionFlow(CoordinateFlow):
    """PhysQK-AD: r ← r + η[(1−α)·W_update(A·r − r) + α·(r[t] − r[t−1])], α = σ(w_α), η = exp(w_η)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.w_alpha = nn.Parameter(torch.zeros(()))  # convection share α = σ(w_α), ½ at init
        self.w_eta = nn.Parameter(torch.zeros(()))  # step size η = exp(w_η), 1 at init

    def alphas(self) -> Tensor:
        """The convection share α, shape (1, 1), reported with the diffusion step sizes."""
        return torch.sigmoid(self.w_alpha).view(1, 1)

    def forward(self, r: Tensor, transported: Tensor) -> Tensor:
        diffusion = self.update(transported - r)
        gradient = r - torch.cat([r[:, :1], r[:, :-1]], dim=1)  # r[t] − r[t−1], zero at t = 0
        alpha, eta = torch.sigmoid(self.w_alpha), torch.exp(self.w_eta)
        return r + eta * ((1 - alpha) * diffusion + alpha * gradient)


def _diffusion(norm: bool = True) -> Callable[[ModelConfig], nn.Module]:
    return lambda cfg: _diffusion_layer(cfg, cfg.d_model, norm)


def _diffusion_layer(cfg: ModelConfig, channels: int, norm: bool = True) -> DiffusionLayer:
    return DiffusionLayer(
        channels,
        SCALES[cfg.scale],
        cfg.alpha_init,
        norm=norm,
        stencil_scaling=cfg.stencil_scaling,
        multiscale_init=cfg.multiscale_init,
        fused=cfg.fused_diffusion,
    )


# variant → {insertion point: operator builder}. Points: "embedding" and "between_blocks" belong to the
# encoder, the rest to every block. "attn_probs" switches that block to a materialised attention matrix;
# "coordinates" adds a PhysQK coordinate stream.
VARIANTS: dict[str, dict[str, Callable[[ModelConfig], nn.Module]]] = {
    "none": {},
    "after_embedding": {"embedding": _diffusion()},
    "after_mlp": {"mlp_output": _diffusion()},
    "between_layers": {"between_blocks": _diffusion()},
    "before_layernorm": {"attn_input": _diffusion(norm=False), "mlp_input": _diffusion(norm=False)},
    "in_attention": {"attn_values": _diffusion(norm=False)},
    "across_heads": {"attn_heads": HeadDiffusion},
    "after_attention": {"attn_output": _diffusion()},
    "cta_diffusion": {
        "attn_values": lambda c: PseudoTimeDiffusion(c.d_model, SCALES[c.scale], c.alpha_init, c.cta_steps)
    },
    "cta_wave": {
        "attn_values": lambda c: PseudoTimeWave(c.d_model, SCALES[c.scale], c.alpha_init, c.cta_steps)
    },
    "cta_advection_diffusion": {
        "attn_values": lambda c: PseudoTimeAdvectionDiffusion(
            c.d_model, SCALES[c.scale], c.alpha_init, c.cta_steps
        )
    },
    "cta_reaction_diffusion": {
        "attn_probs": lambda c: PseudoTimeReactionDiffusion(
            c.n_heads, SCALES[c.scale], c.alpha_init, c.cta_steps
        )
    },
    "physqk": {"coordinates": CoordinateFlow},
    "physqk_ad": {"coordinates": ConvectionDiffusionFlow},
    # Continuous-Time Attention as its authors run it: hidden states refined after each block (cta_official)
    **{
        name: {"block_output": lambda c, kind=kind: PDERefinement(kind, c.cta_steps)}
        for name, kind in OFFICIAL_VARIANTS.items()
    },
}
ENCODER_POINTS = ("embedding", "between_blocks")
BLOCK_POINTS = ("attn_input", "attn_output", "mlp_input", "mlp_output", "coordinates", "block_output")
ATTENTION_POINTS = ("attn_values", "attn_heads", "attn_probs")
POINTS = ENCODER_POINTS + BLOCK_POINTS + ATTENTION_POINTS


def _check_variants() -> None:
    for variant, row in VARIANTS.items():
        if not set(row) <= set(POINTS):
            raise ValueError(f"VARIANTS[{variant!r}] names unknown insertion points {set(row) - set(POINTS)}")
    for position, points in paper.POSITION_POINTS.items():  # the paper's positions, as the results read them
        if set(VARIANTS[position]) != set(points):
            raise ValueError(f"VARIANTS[{position!r}] acts at {set(VARIANTS[position])}, not {set(points)}")


_check_variants()


def min_layers(point: str) -> int:
    """Fewest blocks a model needs to have insertion point `point` (between_blocks needs a pair of blocks)."""
    return {"embedding": 0, "between_blocks": 2}.get(point, 1)


def point_count(point: str, n_layers: int) -> int:
    """How many operators a model of n_layers blocks has at insertion point `point`."""
    if point == "embedding":
        return 1
    if point == "between_blocks":
        return max(n_layers - 1, 0)
    return n_layers  # one per block


# ----------------------------------------------------------------------------------------------------------
# Operators by name: a variant declared in the config is a row built from data,
#     variants: {smooth_embed: {after_embedding: {operator: "myops:MovingAverage", args: {width: 3}}}}
# Each key is an insertion point or a built-in variant's name (its points: after_embedding → embedding,
# before_layernorm → attn_input and mlp_input). An operator is a name of OPERATORS or a user's `module:attr`,
# called as attr(d_model, **args); either returns an nn.Module called as op(x, lengths) that maps x (batch,
# length, d_model) to the same shape, valid outputs independent of the padding after each sequence's length.

# Points whose tensor is not (batch, length, d_model): a config's operator cannot sit there.
SHAPED_POINTS = {
    "attn_heads": "per-head outputs (batch, length, heads, head_dim), along heads",
    "attn_probs": "attention probabilities (batch, heads, length, length)",
    "coordinates": "PhysQK's coordinate update (coordinates, transported)",
}


def _diffusion_operator(
    cfg: ModelConfig,
    d_model: int,
    scale: str | None = None,
    alpha_init: float | None = None,
    norm: bool = True,
) -> nn.Module:
    """The paper's layer (§3.4): LN(u + Σ α_k Δ_{h_k} u), at the run's scale unless `scale` is given."""
    scale = cfg.scale if scale is None else scale
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    return DiffusionLayer(
        d_model,
        SCALES[scale],
        cfg.alpha_init if alpha_init is None else alpha_init,
        norm=norm,
        stencil_scaling=cfg.stencil_scaling,
        multiscale_init=cfg.multiscale_init,
        fused=cfg.fused_diffusion,
    )


def _pseudo_time(kind: type[nn.Module]) -> Callable[..., nn.Module]:
    def build(
        cfg: ModelConfig, d_model: int, scale: str | None = None, steps: int | None = None
    ) -> nn.Module:
        scale = cfg.scale if scale is None else scale
        if scale not in SCALES:
            raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
        return kind(d_model, SCALES[scale], cfg.alpha_init, cfg.cta_steps if steps is None else steps)

    return build


# Built-in operator name → builder(cfg, d_model, **args). Those of the related systems that fit the contract:
# CTA's pseudo-time operators (linear in A, so they act on (batch, length, channels) values); CTA's
# reaction–diffusion needs the attention matrix and PhysQK a coordinate stream (SHAPED_POINTS).
OPERATORS: dict[str, Callable[..., nn.Module]] = {
    "diffusion": _diffusion_operator,
    "cta_diffusion": _pseudo_time(PseudoTimeDiffusion),
    "cta_wave": _pseudo_time(PseudoTimeWave),
    "cta_advection_diffusion": _pseudo_time(PseudoTimeAdvectionDiffusion),
}


def resolve_operator(name: str) -> Callable[..., nn.Module]:
    """The builder of operator `name`, called as builder(cfg, d_model, **args): a built-in one, or a user's
    `module:attr` called as attr(d_model, **args). ValueError names the problem in one line."""
    if name in OPERATORS:
        return OPERATORS[name]
    if ":" not in name:
        raise ValueError(
            f"unknown operator {name!r}: a built-in one ({', '.join(OPERATORS)}) or a callable 'module:attr'"
        )
    user = import_callable(name, "operator")
    return lambda cfg, d_model, **args: user(d_model, **args)


def build_operator(cfg: ModelConfig, spec: Mapping[str, Any]) -> nn.Module:
    """The nn.Module of one operator spec {"operator": name, "args": {...}} for the model `cfg`."""
    build = resolve_operator(spec["operator"])
    module = build(cfg, cfg.d_model, **dict(spec.get("args") or {}))
    if not isinstance(module, nn.Module):
        made = type(module).__name__
        raise ValueError(f"operator {spec['operator']!r} returned a {made}, not an nn.Module")
    return module


def config_row(
    operators: Mapping[str, Mapping[str, Any]], points: tuple[str, ...] = POINTS
) -> dict[str, Callable[[ModelConfig], nn.Module]]:
    """A config variant's row of the VARIANTS kind: {point: builder}. A key names a point of `points`, or a
    built-in variant whose points it means. ValueError names a key that is neither, or a point whose tensor
    is not (batch, length, d_model)."""
    row: dict[str, Callable[[ModelConfig], nn.Module]] = {}
    for key, spec in operators.items():
        if VARIANTS.get(key):
            targets = tuple(VARIANTS[key])
        elif key in points:
            targets = (key,)
        else:
            raise ValueError(
                f"{key!r} is neither an insertion point ({', '.join(points)}) nor a built-in variant's name "
                "(e.g. after_embedding: its points)"
            )
        for point in targets:
            if point in SHAPED_POINTS:
                raise ValueError(
                    f"{key!r} puts an operator at {point!r}, which carries {SHAPED_POINTS[point]}, not "
                    "(batch, length, d_model)"
                )
            row[point] = lambda cfg, spec=spec: build_operator(cfg, spec)
    return row


def variant_row(cfg: ModelConfig) -> dict[str, Callable[[ModelConfig], nn.Module]]:
    """{insertion point: operator builder} of the config's variant: its VARIANTS row, or the one its
    `operators` declare."""
    if cfg.operators is None:
        return VARIANTS[cfg.variant]
    return config_row(cfg.operators, tuple(ENCODERS[cfg.backbone].POINTS))


def _point(cfg: ModelConfig, name: str) -> nn.Module:
    """The operator the config's variant puts at insertion point `name`; the identity if none."""
    build = variant_row(cfg).get(name)
    return build(cfg) if build is not None else Identity()


# ----------------------------------------------------------------------------------------------------------
# The Transformer


@dataclass
class Padding:
    """Per-batch padding facts, computed once per forward: `lengths` is None when every sequence is full."""

    lengths: Tensor | None
    key_mask: Tensor | None  # (B, 1, 1, L) bool, True = attend; None lets SDPA use its fastest (flash) kernel

    @classmethod
    def from_lengths(cls, lengths: Tensor, size: int) -> Padding:
        if lengths.dim() != 1:
            raise ValueError(f"lengths must be 1-D (batch,), got shape {tuple(lengths.shape)}")
        lo, hi = (int(v) for v in torch.aminmax(lengths))
        if lo < 1 or hi > size:
            raise ValueError(f"lengths must lie in [1, {size}] (the padded length), got min {lo}, max {hi}")
        if lo == size:
            return cls(None, None)
        valid = torch.arange(size, device=lengths.device) < lengths[:, None]
        return cls(lengths, valid[:, None, None, :])


class SelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads, self.attn_dropout = cfg.n_heads, cfg.attn_dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.attn_values = _point(cfg, "attn_values")
        self.attn_heads = _point(cfg, "attn_heads")
        self.attn_probs = _point(cfg, "attn_probs")
        self.materialise = not isinstance(self.attn_probs, Identity)

    def _heads(self, t: Tensor) -> Tensor:
        b, n, d = t.shape
        return t.view(b, n, self.n_heads, d // self.n_heads).transpose(1, 2)  # (B, H, L, dh)

    def forward(self, x: Tensor, pad: Padding, r: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """x (B, L, d) → attention output (B, L, d) and, when coordinates r (B, L, d) are given, A·r."""
        b, n, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        # in_attention / CTA: A·p(Δ)·V equals (rows of A evolved along keys)·V, as Δ is symmetric.
        v = self.attn_values(v, pad.lengths)
        if r is not None:
            v = torch.cat([v.view(b, n, self.n_heads, -1), r.view(b, n, self.n_heads, -1)], dim=3).flatten(2)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        scale = q.shape[-1] ** -0.5
        if r is not None:  # zero channels keep q·k unchanged and one head size, as flash kernels require
            q, k = F.pad(q, (0, v.shape[-1] - q.shape[-1])), F.pad(k, (0, v.shape[-1] - k.shape[-1]))
        dropout = self.attn_dropout if self.training else 0.0
        if self.materialise:
            # Only for nonlinear dynamics of A (cta_reaction_diffusion): O(L²) memory, see module docstring.
            scores = (q @ k.transpose(-2, -1)) * scale
            if pad.key_mask is not None:
                scores = scores.masked_fill(~pad.key_mask, float("-inf"))
            probs = self.attn_probs(torch.softmax(scores.float(), dim=-1), pad.lengths).to(v.dtype)
            out = F.dropout(probs, dropout, self.training) @ v
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=pad.key_mask, dropout_p=dropout, scale=scale
            )
        out = out.transpose(1, 2)  # (B, L, H, dh [+ dh of r])
        transported = None
        if r is not None:
            out, transported = out.split(out.shape[-1] // 2, dim=3)
            transported = transported.flatten(2)
        out = self.attn_heads(out, pad.lengths).flatten(2)  # across_heads diffuses along H here
        return self.proj(out), transported


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.d_mlp)
        self.proj = nn.Linear(cfg.d_mlp, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(self.dropout(F.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn_input, self.attn_output = _point(cfg, "attn_input"), _point(cfg, "attn_output")
        self.mlp_input, self.mlp_output = _point(cfg, "mlp_input"), _point(cfg, "mlp_output")
        self.coordinates = _point(cfg, "coordinates")
        self.block_output = _point(cfg, "block_output")
        self.ln_1 = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, pad: Padding, r: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """x (B, L, d) and, for PhysQK, coordinates r (B, L, d) → both updated."""
        lengths = pad.lengths
        a, transported = self.attn(self.ln_1(self.attn_input(x, lengths)), pad, r)
        x = x + self.dropout(self.attn_output(a, lengths))
        if r is not None:  # PhysQK: move the coordinates, feed their displacement into the token stream
            r_new = self.coordinates(r, transported)
            x, r = x + (r_new - r), r_new
        x = x + self.dropout(self.mlp_output(self.mlp(self.ln_2(self.mlp_input(x, lengths))), lengths))
        return self.block_output(x, lengths), r


class Encoder(nn.Module):
    """tokens (B, L), lengths (B,) → pooled features (B, d)."""

    POINTS = POINTS  # every insertion point

    @staticmethod
    def init_weights(module: nn.Module) -> None:
        """Applied to the whole classifier: GPT-2 style init (as nanoGPT); diffusion step sizes keep their
        exact paper init."""
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_length, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)
        self.embedding = _point(cfg, "embedding")
        # One operator per gap between consecutive blocks (n_layers − 1 of them).
        self.between_blocks = nn.ModuleList(_point(cfg, "between_blocks") for _ in range(cfg.n_layers - 1))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.uses_coordinates = "coordinates" in variant_row(cfg)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        n = tokens.shape[1]
        if n > self.cfg.max_length:
            raise ValueError(f"sequence length {n} exceeds the model's max_length {self.cfg.max_length}")
        pad = Padding.from_lengths(lengths, n)
        x = self.tok_emb(tokens) + self.pos_emb.weight[:n]  # (B, L, d)
        x = self.embedding(self.dropout(x), pad.lengths)
        r = x if self.uses_coordinates else None  # PhysQK coordinates start at the embedded tokens
        for i, block in enumerate(self.blocks):
            if i > 0:
                x = self.between_blocks[i - 1](x, pad.lengths)
            x, r = block(x, pad, r)
        x = self.ln_f(x)
        if pad.key_mask is not None:  # masked mean over valid tokens; the mask is the one attention used
            x = x * pad.key_mask[:, 0, 0, :, None].to(x.dtype)
        return x.sum(1) / lengths[:, None].to(x.dtype)


# backbone → encoder class. Each names the insertion points it offers (POINTS) and its weight init.
ENCODERS: dict[str, type[Encoder] | type[OfficialEncoder]] = {
    "pdelra": Encoder,
    "official_cta": OfficialEncoder,
}


class LRAClassifier(nn.Module):
    """Classifier for one LRA task; two_tower=True (retrieval) encodes two documents, one shared encoder."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = ENCODERS[cfg.backbone](cfg)
        d = cfg.d_model
        if cfg.two_tower:  # head on [e1, e2, e1·e2, e1 − e2]
            self.head = nn.Sequential(nn.Linear(4 * d, d), nn.GELU(), nn.Linear(d, cfg.num_classes))
        else:
            self.head = nn.Linear(d, cfg.num_classes)
        self.apply(self.encoder.init_weights)  # the backbone's own initialisation

    def forward(
        self, tokens: Tensor, lengths: Tensor, tokens2: Tensor | None = None, lengths2: Tensor | None = None
    ) -> Tensor:
        """tokens (B, L) long, lengths (B,) long [, tokens2, lengths2] → logits (B, num_classes)."""
        e1 = self.encoder(tokens, lengths)
        if not self.cfg.two_tower:
            if tokens2 is not None:
                raise ValueError("tokens2 given to a single-tower model; set two_tower=True for retrieval")
            return self.head(e1)
        if tokens2 is None or lengths2 is None:
            raise ValueError("a two-tower model needs tokens2 and lengths2")
        e2 = self.encoder(tokens2, lengths2)
        return self.head(torch.cat([e1, e2, e1 * e2, e1 - e2], dim=-1))

    def diffusion_layers(self) -> dict[str, nn.Module]:
        """Every operator with a learnable α (diffusion step sizes; PhysQK-AD's convection share), by name."""
        return {name: m for name, m in self.named_modules() if callable(getattr(m, "alphas", None))}

    def alpha_summary(self) -> dict[str, dict[str, float]]:
        """Per diffusion operator: mean/min/max of its effective α (all scales and channels).

        PhysQK-AD blocks report their convection share α = σ(w_α) under `encoder.blocks.i.coordinates`.
        """
        summary = {}
        with torch.no_grad():
            for name, module in self.diffusion_layers().items():
                a = module.alphas().float()
                summary[name] = {"mean": a.mean().item(), "min": a.min().item(), "max": a.max().item()}
                # Per scale (rows of α), mean over channels: the report's learned transfer function H(ω).
                summary[name]["per_scale"] = [row.mean().item() for row in a.reshape(a.shape[0], -1)]
                if hasattr(module, "scales"):
                    summary[name]["scales"] = [int(h) for h in module.scales]
        return summary
