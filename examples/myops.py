"""An example of your own operator beside attention (docs/interfaces.md, "Your own operator at the seven
positions"): a causal-free moving average along the sequence, mixed in by a learnable gate.

A config names it as `examples.myops:MovingAverage` (or `myops:MovingAverage` with this file in the
workflow's working directory) with `args: {width: 3}`; the pipeline calls MovingAverage(d_model, width=3)
and then the module as op(x, lengths) on x (batch, length, d_model).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class MovingAverage(nn.Module):
    """x ← x + g ⊙ (mean of the `width` tokens centred on each position − x), per channel gate g ∈ (0, 1).

    Padding-aware: each sequence's window stops at its last valid token (the mean is over the valid tokens
    inside the window), and padded positions leave as 0, so valid outputs never read padding.
    """

    def __init__(self, d_model: int, width: int = 3) -> None:
        super().__init__()
        if width < 1 or width % 2 == 0:
            raise ValueError(f"width must be an odd number ≥ 1, got {width}")
        self.width = width
        self.gate = nn.Parameter(torch.full((d_model,), -2.0))  # σ(−2) ≈ 0.12 at init: a gentle start

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        valid = torch.ones(x.shape[:2], dtype=x.dtype, device=x.device)
        if lengths is not None:
            valid = (torch.arange(x.shape[1], device=x.device) < lengths[:, None]).to(x.dtype)
        x = x * valid[..., None]
        pad = self.width // 2
        kernel = torch.ones(1, 1, self.width, dtype=x.dtype, device=x.device)
        # Sums over the window of values and of valid tokens: (B, d, L) and (B, 1, L).
        total = F.conv1d(F.pad(x.transpose(1, 2).flatten(0, 1)[:, None], (pad, pad)), kernel)
        total = total.view(x.shape[0], x.shape[2], x.shape[1])
        count = F.conv1d(F.pad(valid[:, None], (pad, pad)), kernel).clamp_min(1)
        mean = (total / count).transpose(1, 2)
        return (x + torch.sigmoid(self.gate) * (mean - x)) * valid[..., None]
