"""Continuous-Time Attention as its authors run it (github.com/XueqingZhou/Continuous-Time-Attention, read
at commit e6f878d: src/models/pde_layers.py, src/models/transformers.py, src/configs/*.yaml,
src/experiments/*.py). Our own code, written from a reading of theirs; tests check it against a naive loop.

    pde_step(x, kind, alpha, beta, causal, attention_mask)  one refinement step of hidden states x (B, L, C)
    PDERefinement(kind, steps, causal)                      `steps` such steps, each with its own α (and β)
    OfficialEncoder                                         their classifier's backbone (`official_cta`)
    OfficialCTALM                                           their causal language model

One step, per channel, on interior positions i (u = x in float32, Δu_i = u_{i+1} − 2u_i + u_{i−1}):

    diffusion            u_i ← u_i + α Δu_i                             α₀ = 0.10
    wave                 u_i ← u_i + α² Δu_i   (first order, no ∂u/∂t)   α₀ = 0.15
    reaction-diffusion   u_i ← u_i + α Δu_i + β u_i (1 − σ(u_i))         α₀ = 0.10, β₀ = 0.02
    advection-diffusion  u_i ← u_i + α Δu_i + β (u_{i+1} − u_{i−1}) / 2  α₀ = 0.10, β₀ = 0.03

Causal (their LM): position i ≥ 2 takes the stencil that ends at i (Δ centred at i − 1), so nothing reads
its future: u_i ← u_i + α (u_i − 2u_{i−1} + u_{i−2}) [+ β u_i (1 − σ(u_i)) | + β (u_i − u_{i−1})].

How this differs from the pipeline's `cta_*` rows of `pdelra.nn.model.VARIANTS`, each row read in their code,
is `pdelra.paper.CTA_OFFICIAL_DIFFERENCES` (what; the pipeline; the official code): the report shows it as a
table.

Their layer also blends y·m + x·(1 − m) with the padding mask m after the stencil rule; for finite inputs
that is the identity (the rule has already left every padded position unchanged), so it is not repeated.

In this pipeline the official operator is the variant family `cta_official_*` (OFFICIAL_VARIANTS) at the
insertion point `block_output` (after each block). With `backbone: official_cta` (`ModelConfig.backbone`)
the classifier is theirs (post-LN stack; variant `none` = their StandardTransformerClassifier); with the
default `backbone: pdelra` the same operator follows each of the pipeline's pre-LN blocks, so "the
operator" and "the backbone" can be compared one at a time. The official rows take their initial α and β
from the table above (not `alpha_init`) and their number of steps from `cta_steps`; no scale applies.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

# The model's fields, not pdelra.nn.model (which imports this module): ModelConfig is a ModelFields.
from pdelra.nn.config import ModelFields

# kind → (α₀, β₀): the official layers' default initial values; None = the kind has no β
OFFICIAL_INIT: dict[str, tuple[float, float | None]] = {
    "diffusion": (0.10, None),
    "wave": (0.15, None),
    "reaction-diffusion": (0.10, 0.02),
    "advection-diffusion": (0.10, 0.03),
}
KINDS = tuple(OFFICIAL_INIT)

# variant name (pdelra.nn.model.VARIANTS, point block_output) → kind of the official refinement after each
# layer
OFFICIAL_VARIANTS: dict[str, str] = {
    "cta_official_diffusion": "diffusion",
    "cta_official_wave": "wave",
    "cta_official_reaction_diffusion": "reaction-diffusion",
    "cta_official_advection_diffusion": "advection-diffusion",
}


def pde_step(
    x: Tensor,
    kind: str,
    alpha: float | Tensor,
    beta: float | Tensor = 0.0,
    causal: bool = False,
    attention_mask: Tensor | None = None,
) -> Tensor:
    """One official refinement step of x (batch, length, channels) along the length; same shape and dtype.

    attention_mask (batch, length): non-zero = valid. alpha, beta: scalars (floats or 0-d/1-element tensors,
    learnable ones keep their gradient). See the module docstring for the update of each kind.
    """
    if kind not in OFFICIAL_INIT:
        raise ValueError(f"unknown PDE kind {kind!r}; choose one of {', '.join(KINDS)}")
    if x.dim() != 3:
        raise ValueError(f"x must be (batch, length, channels), got shape {tuple(x.shape)}")
    if attention_mask is not None and attention_mask.shape != x.shape[:2]:
        shape, want = tuple(attention_mask.shape), tuple(x.shape[:2])
        raise ValueError(f"attention_mask must be (batch, length) = {want}, got {shape}")
    if x.shape[1] < 3:  # every stencil touches three positions
        return x
    u = x.to(torch.float32)
    alpha = torch.as_tensor(alpha, device=x.device).to(torch.float32)
    left, centre, right = u[:, :-2], u[:, 1:-1], u[:, 2:]  # (B, L−2, C) each
    laplacian = right - 2.0 * centre + left  # centred at positions 1..L−2
    # Causal: position i ≥ 2 is updated with the stencil (i−2, i−1, i); else position i with (i−1, i, i+1).
    target = right if causal else centre
    if kind == "diffusion":
        update = alpha * laplacian
    elif kind == "wave":
        update = alpha**2 * laplacian
    else:
        beta = torch.as_tensor(beta, device=x.device).to(torch.float32)
        if kind == "reaction-diffusion":
            update = alpha * laplacian + beta * target * (1.0 - torch.sigmoid(target))
        else:  # advection-diffusion: backward difference when causal, central otherwise
            gradient = right - centre if causal else (right - left) / 2.0
            update = alpha * laplacian + beta * gradient
    updated = target + update
    if attention_mask is not None:  # only where all three stencil positions are valid
        valid = attention_mask != 0
        whole = (valid[:, :-2] & valid[:, 1:-1] & valid[:, 2:])[..., None]  # (B, L−2, 1)
        updated = torch.where(whole, updated, target)
    pieces = (u[:, :2], updated) if causal else (u[:, :1], updated, u[:, -1:])
    return torch.cat(pieces, dim=1).to(x.dtype)


def valid_positions(lengths: Tensor, size: int) -> Tensor:
    """(batch, size) bool, True at the first lengths[b] positions; lengths must lie in [1, size]."""
    lo, hi = (int(v) for v in torch.aminmax(lengths))
    if lo < 1 or hi > size:
        raise ValueError(f"lengths must lie in [1, {size}] (the padded length), got min {lo}, max {hi}")
    return torch.arange(size, device=lengths.device) < lengths[:, None]


class PDEStep(nn.Module):
    """One official PDE layer: its own α (and β), initialised at the official defaults."""

    def __init__(self, kind: str, causal: bool = False) -> None:
        super().__init__()
        if kind not in OFFICIAL_INIT:
            raise ValueError(f"unknown PDE kind {kind!r}; choose one of {', '.join(KINDS)}")
        self.kind, self.causal = kind, causal
        alpha0, beta0 = OFFICIAL_INIT[kind]
        self.alpha = nn.Parameter(torch.tensor(alpha0))
        self.beta = None if beta0 is None else nn.Parameter(torch.tensor(beta0))

    def forward(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        beta = 0.0 if self.beta is None else self.beta
        return pde_step(x, self.kind, self.alpha, beta, self.causal, attention_mask)

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, causal={self.causal}"


class PDERefinement(nn.Module):
    """`steps` official PDE layers in a row, on hidden states (batch, length, d); called as op(x, lengths)."""

    def __init__(self, kind: str, steps: int, causal: bool = False) -> None:
        super().__init__()
        if steps < 1:
            raise ValueError(f"PDE steps must be ≥ 1, got {steps}")
        self.steps = nn.ModuleList(PDEStep(kind, causal) for _ in range(steps))

    def alphas(self) -> Tensor:
        """The α of every step, (1, steps) (for wave the update uses α²)."""
        return torch.stack([step.alpha for step in self.steps]).view(1, -1)

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        """lengths (B,), already checked by the model (a check here would wait for the device every layer)."""
        mask = None if lengths is None else torch.arange(x.shape[1], device=x.device) < lengths[:, None]
        for step in self.steps:
            x = step(x, mask)
        return x


class _Unrefined(nn.Module):
    """No refinement after a layer (the official baseline, StandardTransformerClassifier / LM)."""

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        return x


def _refinement(cfg: ModelFields, causal: bool) -> nn.Module:
    if cfg.variant == "none":
        return _Unrefined()
    if cfg.variant not in OFFICIAL_VARIANTS:
        choices = ", ".join(["none", *OFFICIAL_VARIANTS])
        raise ValueError(f"the official CTA models take variant {choices}; got {cfg.variant!r}")
    return PDERefinement(OFFICIAL_VARIANTS[cfg.variant], cfg.cta_steps, causal)


def _keep_default_init(module: nn.Module) -> None:
    """The official models keep PyTorch's default initialisation (and randn for the position parameter)."""


class OfficialTransformer(nn.Module):
    """tokens (B, L) → hidden states (B, L, d): their embedding and post-LN layer stack, with the PDE
    refinement after each layer (cfg.cta_steps steps of the kind named by cfg.variant; `none`: none).

        x = drop(emb(tokens) + pos[:, :L]);  per layer: x = TransformerEncoderLayer(x); x = refine(x, lengths)
    """

    def __init__(self, cfg: ModelFields, causal: bool = False) -> None:
        super().__init__()
        self.cfg, self.causal = cfg, causal
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Parameter(torch.randn(1, cfg.max_length, cfg.d_model))
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_mlp, cfg.dropout, batch_first=True)
            for _ in range(cfg.n_layers)
        )  # post-LN, ReLU: the PyTorch defaults the authors use
        self.block_output = nn.ModuleList(_refinement(cfg, causal) for _ in range(cfg.n_layers))

    def hidden_states(self, tokens: Tensor, lengths: Tensor | None, valid: Tensor | None) -> Tensor:
        """valid = valid_positions(lengths, L), or None with lengths when nothing is padded."""
        n = tokens.shape[1]
        if n > self.cfg.max_length:
            raise ValueError(f"sequence length {n} exceeds the model's max_length {self.cfg.max_length}")
        padding = None if valid is None else ~valid  # (B, L), True = ignore
        future = torch.ones(n, n, dtype=torch.bool, device=tokens.device).triu(1) if self.causal else None
        x = self.dropout(self.tok_emb(tokens) + self.pos_emb[:, :n])  # (B, L, d)
        for layer, refine in zip(self.layers, self.block_output, strict=True):
            x = layer(x, src_mask=future, src_key_padding_mask=padding)
            x = refine(x, lengths)
        return x


class OfficialEncoder(OfficialTransformer):
    """Backbone `official_cta` of `pdelra.nn.model.LRAClassifier`: tokens (B, L), lengths (B,) → masked mean
    (B, d). With the classifier's linear head this is their PDETransformerClassifier (their
    StandardTransformerClassifier for variant `none`)."""

    POINTS = ("block_output",)  # the only insertion point of this backbone (ModelConfig checks variants)
    init_weights = staticmethod(_keep_default_init)  # applied to the whole classifier, head included

    def __init__(self, cfg: ModelFields) -> None:
        super().__init__(cfg, causal=False)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        valid = valid_positions(lengths, tokens.shape[1])  # (B, L)
        x = self.hidden_states(tokens, lengths, valid)
        return (x * valid[..., None].to(x.dtype)).sum(1) / lengths[:, None].to(x.dtype)


class OfficialCTALM(OfficialTransformer):
    """Their PDETransformerLM (StandardTransformerLM for variant `none`): the same stack with a causal
    attention mask and causal stencils; tokens (B, T) [, lengths (B,)] → next-token logits (B, T, vocab).
    cfg is a ModelConfig (backbone official_cta; num_classes is not used: the head predicts tokens)."""

    def __init__(self, cfg: ModelFields) -> None:
        super().__init__(cfg, causal=True)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size)

    def forward(self, tokens: Tensor, lengths: Tensor | None = None) -> Tensor:
        valid = None if lengths is None else valid_positions(lengths, tokens.shape[1])
        return self.head(self.hidden_states(tokens, lengths, valid))
