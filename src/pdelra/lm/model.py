"""PhysQK-AD's language model: the standard stack with windowed causal self-attention + FFN, three conditions.

    tokens (B, T) ─▶ token emb + learned pos emb ─▶ block₁ … block_n ─▶ LayerNorm ─▶ head (tied to the emb)

The blocks are `pdelra.nn.model.Block`, the same pre-LN block as the LRA classifier, with a causal window mask
instead of a padding mask: query t attends to keys t − window < s ≤ t. The conditions are rows of
`pdelra.nn.model.VARIANTS` (composition, no flags): `mha` = `none`, `physqk` = `physqk` (pure diffusion of the
token coordinates r), `physqk_ad` = `physqk_ad` (learnable convection–diffusion, per-layer α = σ(w_α),
η = exp(w_η)); see pdelra.nn.model for the coordinate flow. Its convection term r[t] − r[t−1] looks only
backwards, so the LM stays causal.

α allocation (PhysQK-AD only, the seed's ablation), `alpha_allocation`:
  - "joint": one learnable α per layer (the method);
  - "shared": one learnable α for all layers (the layers' w_α are one tied parameter);
  - a list of n_layers numbers in [0, 1]: α fixed at those values (w_α becomes a constant buffer), e.g. all
    convection in one layer, or the seed's reported values.

Diagnostics (`coordinate_diagnostics`): per PhysQK-AD layer α, η and the effective Péclet number

    eff_Pe = mean_tokens ‖α (r[t] − r[t−1])‖ / mean_tokens ‖(1 − α) W_update(A·r − r)[t]‖

the ratio of the convective to the diffusive term's token-averaged magnitude (η multiplies both and
cancels). The seed does not define eff_Pe exactly; this is our reading (a report deviation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pdelra.nn.model import Block, ConvectionDiffusionFlow, ModelConfig, Padding

# condition → the VARIANTS row of pdelra.nn.model it is built from
CONDITIONS: dict[str, str] = {"mha": "none", "physqk": "physqk", "physqk_ad": "physqk_ad"}
ALLOCATIONS = ("joint", "shared")  # or a list of fixed α per layer


@dataclass(frozen=True)
class LMConfig:
    vocab_size: int
    window: int  # context length T (inputs per window); the seed's 128
    condition: str = "mha"
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    d_mlp: int = 1024
    dropout: float = 0.1
    attn_window: int = 128  # each query sees at most this many keys (itself included)
    alpha_allocation: str | Sequence[float] = "joint"
    extra: dict[str, Any] = field(default_factory=dict)  # other ModelConfig fields, passed through

    def __post_init__(self) -> None:
        if self.condition not in CONDITIONS:
            raise ValueError(f"unknown condition {self.condition!r}; choose one of {', '.join(CONDITIONS)}")
        if self.attn_window < 1:
            raise ValueError(f"attn_window must be ≥ 1, got {self.attn_window}")
        alloc = self.alpha_allocation
        if isinstance(alloc, str):
            if alloc not in ALLOCATIONS:
                raise ValueError(f"alpha_allocation {alloc!r}: choose joint, shared or a list of α")
        else:
            if len(alloc) != self.n_layers or not all(0.0 <= float(a) <= 1.0 for a in alloc):
                raise ValueError(
                    f"alpha_allocation {list(alloc)}: give one α in [0, 1] per layer ({self.n_layers})"
                )
        if alloc != "joint" and self.condition != "physqk_ad":
            raise ValueError(f"alpha_allocation {alloc!r} applies to physqk_ad only, not {self.condition}")

    def block_config(self) -> ModelConfig:
        return ModelConfig(
            vocab_size=self.vocab_size,
            num_classes=self.vocab_size,
            max_length=self.window,
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_mlp=self.d_mlp,
            dropout=self.dropout,
            attn_dropout=0.0,
            variant=CONDITIONS[self.condition],
            **self.extra,
        )


def causal_window_mask(size: int, window: int, device: torch.device | None = None) -> Tensor:
    """(1, 1, T, T) bool, True where query t may attend key s: t − window < s ≤ t."""
    t = torch.arange(size, device=device)
    offset = t[:, None] - t[None, :]  # t − s
    return ((offset >= 0) & (offset < window))[None, None]


def _fix_alpha(flow: ConvectionDiffusionFlow, alpha: float) -> None:
    """Replace the learnable w_α by the constant logit of `alpha` (±inf at 0 and 1: σ gives 0 and 1)."""
    del flow.w_alpha
    flow.register_buffer("w_alpha", torch.logit(torch.tensor(float(alpha), dtype=torch.float64)).float())


class CausalLM(nn.Module):
    """tokens (B, T) long → next-token logits (B, T, vocab)."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        block_cfg = cfg.block_config()
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.window, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(block_cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.uses_coordinates = cfg.condition != "mha"
        self.apply(self._init_weights)
        self.head.weight = self.tok_emb.weight  # weight tying (nanoGPT)
        flows = self.flows()
        if cfg.alpha_allocation == "shared":
            for flow in flows[1:]:
                flow.w_alpha = flows[0].w_alpha  # one tied parameter
        elif not isinstance(cfg.alpha_allocation, str):
            for flow, alpha in zip(flows, cfg.alpha_allocation, strict=True):
                _fix_alpha(flow, alpha)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def flows(self) -> list[ConvectionDiffusionFlow]:
        """The PhysQK-AD coordinate flow of each block (empty for mha and physqk)."""
        return [b.coordinates for b in self.blocks if isinstance(b.coordinates, ConvectionDiffusionFlow)]

    def forward(self, tokens: Tensor) -> Tensor:
        t = tokens.shape[1]
        if t > self.cfg.window:
            raise ValueError(f"sequence length {t} exceeds the model's window {self.cfg.window}")
        pad = Padding(None, causal_window_mask(t, self.cfg.attn_window, tokens.device))
        x = self.dropout(self.tok_emb(tokens) + self.pos_emb.weight[:t])  # (B, T, d)
        r = x if self.uses_coordinates else None  # coordinates start at the embedded tokens
        for block in self.blocks:
            x, r = block(x, pad, r)
        return self.head(self.ln_f(x))  # (B, T, vocab)

    def loss(self, windows: Tensor) -> Tensor:
        """Mean next-token cross-entropy in nats over a batch of windows (B, T + 1)."""
        logits = self(windows[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1).float(), windows[:, 1:].flatten())

    @torch.no_grad()
    def coordinate_diagnostics(self, tokens: Tensor) -> list[dict[str, float]]:
        """Per PhysQK-AD layer: {layer, alpha, eta, eff_pe} on one batch (dropout as the module's mode)."""
        terms: dict[int, tuple[float, float]] = {}
        hooks = []
        for i, block in enumerate(self.blocks):
            flow = block.coordinates
            if not isinstance(flow, ConvectionDiffusionFlow):
                continue

            def record(module: nn.Module, inputs: tuple[Tensor, Tensor], _out: Tensor, i: int = i) -> None:
                r, transported = inputs
                alpha = torch.sigmoid(module.w_alpha)
                convection = alpha * (r - torch.cat([r[:, :1], r[:, :-1]], dim=1))  # (B, T, d)
                diffusion = (1 - alpha) * module.update(transported - r)
                terms[i] = (convection.norm(dim=-1).mean().item(), diffusion.norm(dim=-1).mean().item())

            hooks.append(flow.register_forward_hook(record))
        try:
            self(tokens)
        finally:
            for hook in hooks:
                hook.remove()
        rows = []
        for i, (conv, diff) in sorted(terms.items()):
            flow = self.blocks[i].coordinates
            rows.append(
                {
                    "layer": i,
                    "alpha": torch.sigmoid(flow.w_alpha).item(),
                    "eta": torch.exp(flow.w_eta).item(),
                    "eff_pe": conv / diff if diff > 0 else float("inf"),
                }
            )
        return rows
