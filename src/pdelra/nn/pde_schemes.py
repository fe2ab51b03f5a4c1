"""Continuous-Time Attention's fourth PDE type: advection–diffusion of attention rows in pseudo-time.

    ∂A/∂t = α ΔA + β ∂ₓA      along the key axis x, for every attention row A (one query)

Discretisation (explicit Euler, unit pseudo-time step, central differences, stride h per scale):

    A ← M A,   M = I + Σ_k α_k Δ_{h_k} + Σ_k β_k D_{h_k}

Δ_h is the Laplacian of `pdelra.nn.ops` (half-sample symmetric ends). D_h is the central difference
½(A_{i+h} − A_{i−h}) in flux form with zero flux through both ends: D_h = −C_hᵀ, where C_h is the central
difference with Δ_h's symmetric reflection R, C_h u_i = ½(u_{R(i+h)} − u_{R(i−h)}). As C_h 1 = 0 and
Δ_h 1 = 0, every row's mass Σ_j A_j is conserved (1ᵀM = 1ᵀ) whatever α and β are.

Acting on V. The evolved attention meets V as (A Mᵀ) V = A (Mᵀ V), so the operator is applied to V along the
sequence axis as Mᵀ = I + Σ α_k Δ_k − Σ β_k C_k (Δ is symmetric): attention stays fused, O(L) memory.

Stability condition (derived here, enforced by construction). Row i of Mᵀ for one scale, a = R(i+h),
b = R(i−h), is  (1 − 2α) u_i + (α − β/2) u_a + (α + β/2) u_b.  Its weights sum to 1, and all are ≥ 0 exactly
when α ≤ ½ and |β| ≤ 2α (cell Péclet number |β|/α ≤ 2); for several scales, Σ_k α_k ≤ ½ and |β_k| ≤ 2α_k.
Then Mᵀ is row-stochastic: every evolved attention row stays a probability distribution (non-negative, same
sum) and the scheme is non-expansive in ℓ∞ on V, for any number of steps (a discrete maximum principle).
The construction: α = `StepSizes` (Σα < ½, as the diffusion layer) and β_k = 2 α_k tanh(w_k) (1 − 2⁻¹⁶),
so |β_k| < 2α_k. w starts at 0: the operator starts as pure diffusion (β = 0) and learns its drift.

Beyond the bound. α > ½ blows up (the Laplacian's highest mode is amplified by |1 − 4α| > 1). Past |β| = 2α
weights turn negative and the maximum principle fails at once; growth without bound follows later: von
Neumann analysis of the periodic scheme, |G(θ)|² = (1 − 4αs)² + 4β²s(1 − s) for s = sin²(θ/2), bounds it by
β² ≤ 2α, and the zero-flux ends make a finite domain somewhat more forgiving than that (tests/test_cta.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from pdelra.nn.ops import StepSizes, diffusion_step, initial_alphas

# |β_k| ≤ DRIFT_BUDGET · 2α_k: a hair under the positivity bound, so float rounding cannot cross it.
DRIFT_BUDGET = 1 - 2**-16


def _reflect(j: Tensor, n: Tensor | int) -> Tensor:
    """Half-sample symmetric reflection of 0-based indices j into [0, n) (period 2n), as in the Laplacian."""
    m = torch.remainder(j, 2 * n)
    return torch.where(m < n, m, 2 * n - 1 - m)


def central_difference(x: Tensor, h: int = 1, lengths: Tensor | None = None) -> Tensor:
    """C_h x = ½(x_{i+h} − x_{i−h}) along dim −2 of x (batch, length, channels), reflected at the ends.

    With `lengths` (batch,), sequence b is reflected at its own last valid position, padded outputs are 0 and
    valid outputs never read padding. C_h of a constant is 0.
    """
    if h < 1:
        raise ValueError(f"the central difference's step h must be a positive integer, got {h}")
    b, size, c = x.shape
    i = torch.arange(size, device=x.device)
    if lengths is None:
        fwd, bwd = _reflect(i + h, size), _reflect(i - h, size)
        return 0.5 * (x.index_select(1, fwd) - x.index_select(1, bwd))
    n = lengths.to(x.device)[:, None]  # (B, 1)
    valid = i < n  # (B, L)
    fwd = _reflect(i + h, n).clamp(max=size - 1)  # (B, L); rows past the end are masked below
    bwd = _reflect(i - h, n).clamp(max=size - 1)
    gather = lambda idx: x.gather(1, idx[:, :, None].expand(b, size, c))  # noqa: E731
    return 0.5 * (gather(fwd) - gather(bwd)) * valid[:, :, None].to(x.dtype)


def advection_diffusion_step(
    x: Tensor, alphas: Tensor, betas: Tensor, scales: Sequence[int], lengths: Tensor | None = None
) -> Tensor:
    """One step of Mᵀ on values x (batch, length, channels): x + Σ_k α_k Δ_{h_k} x − Σ_k β_k C_{h_k} x.

    alphas, betas: (K, channels) or (K, 1). No bound is enforced here (the tests probe both sides of it);
    `PseudoTimeAdvectionDiffusion` keeps α, β inside the stability region.
    """
    out = diffusion_step(x, alphas, scales, dim=-2, lengths=lengths)
    for h, beta in zip(scales, betas, strict=True):
        out = out - beta * central_difference(x, h, lengths)
    return out


class PseudoTimeAdvectionDiffusion(nn.Module):
    """`steps` Euler steps of ∂A/∂t = αΔA + β∂ₓA on attention rows, applied to V (see the module docstring).

    x is V (batch, length, channels); α and β per scale and channel, held in the stability region by
    construction (Σα < ½, |β| < 2α). Row sums of the evolved attention are conserved and stay non-negative.
    """

    def __init__(self, channels: int, scales: Sequence[int], alpha_init: float, steps: int) -> None:
        super().__init__()
        if steps < 1:
            raise ValueError(f"pseudo-time steps must be ≥ 1, got {steps}")
        self.scales = tuple(int(h) for h in scales)
        if not self.scales or min(self.scales) < 1:
            raise ValueError(f"scales must be positive integers, got {scales}")
        self.steps = steps
        self.step_sizes = StepSizes(initial_alphas(self.scales, alpha_init), channels)
        self.drift = nn.Parameter(torch.zeros(len(self.scales), channels))  # w: β = 2α·tanh(w), 0 at init

    def alphas(self) -> Tensor:
        """Diffusion step sizes α, (K, channels), Σ_k α_k < ½."""
        return self.step_sizes()

    def betas(self) -> Tensor:
        """Drift coefficients β, (K, channels), |β_k| < 2α_k."""
        return 2 * DRIFT_BUDGET * self.alphas() * torch.tanh(self.drift.float())

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        alphas, betas = self.alphas().to(x.dtype), self.betas().to(x.dtype)
        for _ in range(self.steps):
            x = advection_diffusion_step(x, alphas, betas, self.scales, lengths)
        return x

    def extra_repr(self) -> str:
        return f"scales={self.scales}, steps={self.steps}"
