"""The PDE diffusion operator of the paper (§3.2, §3.4, App. B.1.4) and the pseudo-time PDE operators of
Continuous-Time Attention, all built on one dilated, mask-aware discrete Laplacian.

    Δ_h u_i = u_{i+h} − 2 u_i + u_{i−h}

with half-sample symmetric extension at both ends (u_{1−k} = u_k, u_{L+k} = u_{L+1−k}, 1-based). For h = 1
this is the paper's Neumann Laplacian (eq. 4) and equals `replicate` padding (App. B.1.4); for every h the
operator is symmetric and diagonalised by the DCT-II with eigenvalues −4 sin²(π k h / 2L), so the stability
results hold at every scale (replicate padding of width h > 1 would not be symmetric).

Padded batches: `lengths` (batch,) gives each sequence's valid length; each sequence is reflected at its own
last valid token, outputs at padded positions are 0, and valid outputs never read padding.

Stability: u ← u + Σ_k α_k Δ_{h_k} u is non-expansive in ℓ2 and never increases the Dirichlet energy uᵀ(−Δ)u
when α_k ≥ 0 and Σ_k α_k ≤ ½ (per channel). `StepSizes` holds α inside that set by construction:
α = ½ · softmax([θ_1 … θ_K, 0])[:K] (up to a 2⁻¹⁶ margin for rounding), smooth and bounded, so
gradients never die at a clamp.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pdelra.nn.fused import fused_diffusion

# Initial weight of each scale relative to the first, in the order the scales are given
# (paper §3.4: 1 : 0.6 : 0.3).
PAPER_INIT_RATIO = (1.0, 0.6, 0.3)


# ----------------------------------------------------------------------------------------------------------
# The Laplacian


def _valid_mask(lengths: Tensor, size: int, dim: int, ndim: int) -> Tensor:
    """Boolean mask, True at valid positions, broadcastable against an `ndim`-D tensor (batch at dim 0)."""
    valid = torch.arange(size, device=lengths.device) < lengths[:, None]  # (B, L)
    shape = [1] * ndim
    shape[0], shape[dim] = lengths.shape[0], size
    return valid.view(shape)


def _along(index: Tensor, x: Tensor, dim: int) -> Tensor:
    """Expand a (B, n) index of positions into a gather/scatter index for `x` along `dim` (batch at 0)."""
    shape = [1] * x.dim()
    shape[0], shape[dim] = index.shape
    full = list(x.shape)
    full[dim] = index.shape[1]
    return index.view(shape).expand(full)


def _check_lengths(lengths: Tensor, x: Tensor, dim: int) -> tuple[int, int]:
    if lengths.dim() != 1 or lengths.shape[0] != x.shape[0]:
        raise ValueError(
            f"lengths must have shape ({x.shape[0]},) to match the batch, got {tuple(lengths.shape)}"
        )
    if dim % x.dim() == 0:
        raise ValueError("with lengths, dim 0 is the batch axis; the sequence axis must be another one")
    lo, hi = (int(v) for v in torch.aminmax(lengths))  # one host sync; decides the fast path
    if lo < 1 or hi > x.shape[dim]:
        raise ValueError(
            f"lengths must lie in [1, {x.shape[dim]}] (the size of dim {dim}); got min {lo}, max {hi}"
        )
    return lo, hi


def _reflect(j: Tensor, n: Tensor | int) -> Tensor:
    """Half-sample symmetric reflection of 0-based indices j into [0, n): period 2n, mirror at n − ½."""
    m = torch.remainder(j, 2 * n)
    return torch.where(m < n, m, 2 * n - 1 - m)


def _neighbour_sum(x: Tensor, h: int, dim: int, lengths: Tensor | None, min_length: int) -> Tensor:
    """u_{i+h} + u_{i−h} with half-sample symmetric extension. `x` must already be 0 at padded positions.

    Fast path (h ≤ every valid length, 2h ≤ L): one fused add over the interior and two h-wide strips at the
    ends, written straight into the result. With padding, the right strip's mirror is left out and, per
    sequence, the h positions whose right neighbour falls into padding (which read a 0 there) get their
    mirrored neighbour added: a (B, h) gather/scatter. General path (some sequence shorter than h): explicit
    reflected indices, i.e. repeated reflection, index mod 2n.
    """
    size = x.shape[dim]
    if h <= min_length and 2 * h <= size:

        def part(t: Tensor, start: int, length: int) -> Tensor:
            return t.narrow(dim, start, length)

        out = torch.empty_like(x)
        torch.add(part(x, 2 * h, size - 2 * h), part(x, 0, size - 2 * h), out=part(out, h, size - 2 * h))
        torch.add(part(x, h, h), part(x, 0, h).flip(dim), out=part(out, 0, h))  # left mirror: u_{h−1−i}
        if lengths is None:  # right mirror: u_{2L−1−i−h}
            torch.add(part(x, size - 2 * h, h), part(x, size - h, h).flip(dim), out=part(out, size - h, h))
            return out
        part(out, size - h, h).copy_(part(x, size - 2 * h, h))
        # Position n−h+j must read u_{n+j} ↦ u_{n−1−j}; it read x[n+j] = 0 (padding) or nothing past L.
        j = torch.arange(h, device=x.device)
        dst, src = lengths[:, None] - h + j, lengths[:, None] - 1 - j  # (B, h)
        return out.scatter_add_(dim, _along(dst, x, dim), x.gather(dim, _along(src, x, dim)))
    i = torch.arange(size, device=x.device)
    n: Tensor | int = size if lengths is None else lengths[:, None]
    fwd, bwd = _reflect(i + h, n), _reflect(i - h, n)
    if lengths is None:  # one index for every batch row: index_select is cheaper than gather
        return x.index_select(dim, fwd) + x.index_select(dim, bwd)
    # Rows past a sequence's end index beyond it; clamped here, their outputs are masked by the caller.
    fwd, bwd = fwd.clamp(max=size - 1), bwd.clamp(max=size - 1)
    return x.gather(dim, _along(fwd, x, dim)) + x.gather(dim, _along(bwd, x, dim))


def _apply_step(
    x: Tensor, alphas: Tensor, scales: Sequence[int], dim: int, lengths: Tensor | None, min_length: int
) -> Tensor:
    """(I + Σ_k α_k Δ_{h_k}) x = x + Σ_k α_k (x_{i+h_k} + x_{i−h_k} − 2 x_i).

    Written as x plus Laplacians, not as (1 − 2Σα) x + Σ_k α_k (neighbours): in bf16 the rounded weights of
    the latter need not sum to 1, which would drift each sequence's mean. No autograd inside (callers run it
    under `_EulerStep`); padded positions of the result are 0.
    """
    mask = None
    if lengths is not None:
        mask = _valid_mask(lengths, x.shape[dim], dim, x.dim())
        x = x * mask
    out = x.clone()
    for h, alpha in zip(scales, alphas, strict=True):
        out.addcmul_(alpha, _neighbour_sum(x, h, dim, lengths, min_length).sub_(x, alpha=2))
    return out if mask is None else out.mul_(mask)


class _EulerStep(torch.autograd.Function):
    """x ↦ (I + Σ_k α_k Δ_{h_k}) x with a hand-written backward, because it is cheap and exact:

    the operator is symmetric (also with padding: it acts on each sequence's valid block and zeroes the rest),
    so the input gradient is the same stencil applied to the output gradient g, and
    ∂loss/∂α_k = Σ g·Δ_k x = Σ x·Δ_k g, which reuses Δ_k g. Only x is saved; autograd through the slicing
    would store and replay several full-size intermediates (about 1.5× slower for the layer alone here).
    """

    @staticmethod
    def forward(ctx, x, alphas, scales, dim, lengths, min_length):  # type: ignore[override]
        ctx.save_for_backward(x, alphas, lengths)
        ctx.scales, ctx.dim, ctx.min_length = scales, dim, min_length
        return _apply_step(x, alphas, scales, dim, lengths, min_length)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):  # type: ignore[override]
        x, alphas, lengths = ctx.saved_tensors
        dim, min_length = ctx.dim, ctx.min_length
        if lengths is not None:
            mask = _valid_mask(lengths, x.shape[dim], dim, x.dim())
            x, grad = x * mask, grad * mask
        grad_x = grad.clone() if ctx.needs_input_grad[0] else None
        grad_alphas = torch.zeros_like(alphas) if ctx.needs_input_grad[1] else None
        for k, h in enumerate(ctx.scales):
            laplacian_grad = _neighbour_sum(grad, h, dim, lengths, min_length).sub_(grad, alpha=2)
            if grad_x is not None:
                grad_x.addcmul_(alphas[k], laplacian_grad)
            if grad_alphas is not None:  # Σ over everything α_k is broadcast over
                grad_alphas[k] = (x * laplacian_grad).sum_to_size(alphas[k].shape)
        if grad_x is not None and lengths is not None:
            grad_x.mul_(_valid_mask(lengths, x.shape[dim], dim, x.dim()))
        return grad_x, grad_alphas, None, None, None, None


def laplacian(x: Tensor, h: int = 1, dim: int = -2, lengths: Tensor | None = None) -> Tensor:
    """Dilated discrete Laplacian Δ_h x along `dim`, half-sample symmetric at both ends.

    `lengths` (batch,) — batch is dim 0 — gives each sequence's valid length along `dim`: each sequence is
    reflected at its own last valid token and padded outputs are 0, whatever the padding holds. Any h ≥ 1
    works, including h ≥ L (repeated reflection).
    """
    if h < 1:
        raise ValueError(f"the Laplacian's step h must be a positive integer, got {h}")
    min_length = x.shape[dim]
    if lengths is not None:
        min_length, _ = _check_lengths(lengths, x, dim)
        x = x * _valid_mask(lengths, x.shape[dim], dim, x.dim())
    # Δ = (I + 1·Δ) − I: reuse the differentiable stencil (which zeroes padding) rather than a second kernel.
    return _EulerStep.apply(x, x.new_ones(1), (h,), dim % x.dim(), lengths, min_length) - x


def diffusion_step(
    x: Tensor, alphas: Tensor, scales: Sequence[int], dim: int = -2, lengths: Tensor | None = None
) -> Tensor:
    """One explicit Euler step x + Σ_k α_k Δ_{h_k} x along `dim`, differentiable in x and α.

    `alphas` (K, …) broadcasts against x with the scale axis first, e.g. (K, channels) for channels-last x.
    Padded positions of the result are 0.
    """
    scales = _check_scales(scales)
    if alphas.shape[0] != len(scales):
        raise ValueError(f"alphas has {alphas.shape[0]} rows for {len(scales)} scales {scales}")
    min_length = x.shape[dim]
    if lengths is not None:
        min_length, _ = _check_lengths(lengths, x, dim)
        if min_length == x.shape[dim]:
            lengths = None  # every sequence is full: no masking, no boundary fix-up
    return _EulerStep.apply(x, alphas.to(x.dtype), scales, dim % x.dim(), lengths, min_length)


# ----------------------------------------------------------------------------------------------------------
# Step sizes held inside the stability region


# The budget for Σα: a hair under ½, so that float rounding in the softmax can never push Σα past the bound.
ALPHA_BUDGET = 0.5 * (1 - 2**-16)


class StepSizes(nn.Module):
    """Learnable α_k ≥ 0 per scale and channel with Σ_k α_k ≤ ½, by construction.

    α = B · softmax([θ_1 … θ_K, 0])[:K] over the scale axis, B = ALPHA_BUDGET ≈ ½: the extra zero logit is
    the unused share of the budget, so α_k > 0 and Σα < ½ for any θ, and gradients stay alive everywhere
    (no clamp). Initialised exactly at `init` (K,) by inverting the softmax: θ_k = log(α_k / (B − Σα)).
    """

    def __init__(self, init: Sequence[float], channels: int) -> None:
        super().__init__()
        init_t = torch.tensor([float(a) for a in init], dtype=torch.float64)
        slack = ALPHA_BUDGET - float(init_t.sum())
        if (init_t <= 0).any() or slack <= 0:
            raise ValueError(
                f"initial step sizes {list(init)} must be > 0 with sum < 1/2 (the stability bound); "
                "lower alpha_init"
            )
        theta = torch.log(init_t / slack).float()
        self.theta = nn.Parameter(theta[:, None].repeat(1, channels))  # (K, C)

    def forward(self) -> Tensor:
        logits = F.pad(self.theta.float(), (0, 0, 0, 1))  # (K+1, C), the last row is the fixed 0 logit
        return ALPHA_BUDGET * torch.softmax(logits, dim=0)[:-1]  # (K, C); float32 even under autocast


# Multi-scale initialisations (`model.multiscale_init`): "paper" = alpha_init × (1, 0.6, 0.3) as §3.4 states
# (Σα = 1.9 alpha_init); "normalised" = the same ratios scaled to sum to alpha_init.
MULTISCALE_INITS = ("paper", "normalised")
# Stencil scalings (`model.stencil_scaling`): "unit" = eq. 6, Δ_h, H(ω) = 1 − 4 Σ α_k sin²(ω h_k/2);
# "inverse_h2" = eq. 11, Δ_h / h², H(ω) = 1 − 4 Σ α_k sin²(ω h_k/2) / h_k².
STENCIL_SCALINGS = ("unit", "inverse_h2")


def initial_alphas(
    scales: Sequence[int],
    alpha_init: float,
    ratio: Sequence[float] | None = None,
    multiscale_init: str = "paper",
) -> list[float]:
    """α at init: alpha_init for one scale; alpha_init × ratio (paper: 1 : 0.6 : 0.3) for several, or with
    multiscale_init="normalised" the same ratios scaled so that Σα = alpha_init."""
    if multiscale_init not in MULTISCALE_INITS:
        raise ValueError(
            f"unknown multiscale_init {multiscale_init!r}; choose one of {', '.join(MULTISCALE_INITS)}"
        )
    if len(scales) == 1:
        return [alpha_init]
    ratio = PAPER_INIT_RATIO if ratio is None else ratio
    if len(ratio) < len(scales):
        raise ValueError(
            f"{len(scales)} scales {tuple(scales)} need an init ratio per scale; got {tuple(ratio)}"
        )
    used = [float(r) for r in ratio[: len(scales)]]
    if multiscale_init == "normalised":
        total = sum(used)
        used = [r / total for r in used]
    return [alpha_init * r for r in used]


def stencil_weights(scales: Sequence[int], stencil_scaling: str = "unit") -> tuple[float, ...]:
    """Per-scale factor w_k on α_k in the stencil: 1 ("unit", eq. 6) or 1/h_k² ("inverse_h2", eq. 11).

    w_k ≤ 1, so Σ_k w_k α_k ≤ Σ_k α_k ≤ ½: the step stays non-expansive by construction under either scaling.
    """
    if stencil_scaling not in STENCIL_SCALINGS:
        raise ValueError(
            f"unknown stencil_scaling {stencil_scaling!r}; choose one of {', '.join(STENCIL_SCALINGS)}"
        )
    return tuple(1.0 if stencil_scaling == "unit" else 1.0 / (h * h) for h in scales)


def _check_scales(scales: Sequence[int]) -> tuple[int, ...]:
    scales = tuple(int(h) for h in scales)
    if not scales or any(h < 1 for h in scales) or len(set(scales)) != len(scales):
        raise ValueError(f"scales must be distinct positive integers, got {scales}")
    return scales


# ----------------------------------------------------------------------------------------------------------
# The paper's layer


class DiffusionLayer(nn.Module):
    """The Adaptive PDE Diffusion Layer: u ← LN(u + Σ_k α_k w_k Δ_{h_k} u) along the sequence axis (eq. 9).

    x: (batch, length, channels), or any (…, length, channels) when `lengths` is None. α is learnable per
    scale and per channel, initialised at `initial_alphas(scales, alpha_init, init_ratio, multiscale_init)`,
    and always admissible (`StepSizes`); w_k = `stencil_weights(scales, stencil_scaling)` (1, or 1/h_k²).
    With `norm=False` the layer is the bare Euler step (used where rows must stay probability
    distributions). Padded positions leave the layer as 0.

    `fused=True` runs the step, LayerNorm and mask as one operator (`pdelra.nn.fused`: one compiled pass
    forward, one backward); `fused=False` is the eager reference (`diffusion_step`, `nn.LayerNorm`, mask).
    Both hold the same parameters and compute the same function.
    """

    def __init__(
        self,
        d_model: int,
        scales: Sequence[int] = (1,),
        alpha_init: float = 0.1,
        norm: bool = True,
        init_ratio: Sequence[float] | None = None,
        stencil_scaling: str = "unit",
        multiscale_init: str = "paper",
        fused: bool = False,
    ) -> None:
        super().__init__()
        self.scales = _check_scales(scales)
        self.stencil_scaling, self.fused = stencil_scaling, fused
        self.register_buffer(
            "weights", torch.tensor(stencil_weights(self.scales, stencil_scaling))[:, None], persistent=False
        )  # (K, 1)
        init = initial_alphas(self.scales, alpha_init, init_ratio, multiscale_init)
        self.step_sizes = StepSizes(init, d_model)
        self.norm = nn.LayerNorm(d_model) if norm else None

    def alphas(self) -> Tensor:
        """Effective α, shape (num_scales, channels)."""
        return self.step_sizes()

    def coefficients(self) -> Tensor:
        """The stencil's coefficients c_k = α_k w_k, (num_scales, channels), float32."""
        alphas = self.alphas()
        return alphas if self.stencil_scaling == "unit" else alphas * self.weights.to(alphas.dtype)

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        coef = self.coefficients()
        if self.fused:
            norm = self.norm
            return fused_diffusion(
                x,
                coef,
                self.scales,
                lengths,
                None if norm is None else norm.weight,
                None if norm is None else norm.bias,
                1e-5 if norm is None else norm.eps,
                normalise=norm is not None,
            )
        u = diffusion_step(x, coef, self.scales, dim=-2, lengths=lengths)
        if self.norm is not None:
            u = self.norm(u)
        if lengths is not None:
            # LayerNorm turns zero rows into its bias; keep padding exactly 0 so nothing can leak later.
            u = u * _valid_mask(lengths, x.shape[-2], x.dim() - 2, x.dim()).to(u.dtype)
        return u

    def extra_repr(self) -> str:
        return (
            f"scales={self.scales}, norm={self.norm is not None}, stencil_scaling={self.stencil_scaling!r}, "
            f"fused={self.fused}"
        )


# ----------------------------------------------------------------------------------------------------------
# Continuous-Time Attention: attention weights evolving in pseudo-time along the key axis


class _PseudoTime(nn.Module):
    """`steps` pseudo-time steps with bounded step sizes α (per scale and channel) — the Continuous-Time
    Attention family; subclasses define the dynamics in `forward`."""

    def __init__(self, channels: int, scales: Sequence[int], alpha_init: float, steps: int) -> None:
        super().__init__()
        if steps < 1:
            raise ValueError(f"pseudo-time steps must be ≥ 1, got {steps}")
        self.scales, self.steps = _check_scales(scales), steps
        self.step_sizes = StepSizes(initial_alphas(self.scales, alpha_init), channels)

    def alphas(self) -> Tensor:
        return self.step_sizes()


class PseudoTimeDiffusion(_PseudoTime):
    """`steps` explicit Euler steps of heat flow, A ← A (I + Σ_k α_k Δ_{h_k}), applied to attention rows.

    Acting on V instead (A (I + L)^n V, Δ symmetric) keeps fused attention; x is V, (batch, length, channels),
    α per channel. No LayerNorm: the evolved rows must remain probability distributions (Σα ≤ ½ keeps them
    non-negative and the Laplacian conserves each row's mass).
    """

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        alphas = self.alphas().to(x.dtype)
        for _ in range(self.steps):
            x = diffusion_step(x, alphas, self.scales, lengths=lengths)
        return x


class PseudoTimeWave(_PseudoTime):
    """`steps` leapfrog steps of the wave equation ∂²A/∂t² = L A along keys, starting at rest (∂A/∂t = 0).

    A¹ = A⁰ + ½ L A⁰,  Aⁿ⁺¹ = 2Aⁿ − Aⁿ⁻¹ + L Aⁿ, with L = Σ_k α_k Δ_{h_k} (α as in the diffusion layer, so the
    spectrum of L lies in [−2, 0] and leapfrog with unit time step is stable: it needs |λ| ≤ 4). Every Aⁿ is
    a polynomial in the symmetric L applied to A's rows, so it acts on V and fused attention is kept. Row
    sums are conserved; unlike diffusion, waves may make weights negative (an oscillating, not a smoothing,
    kernel).
    """

    def _apply_l(self, x: Tensor, alphas: Tensor, lengths: Tensor | None) -> Tensor:
        return diffusion_step(x, alphas, self.scales, lengths=lengths) - x  # L x

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        alphas = self.alphas().to(x.dtype)
        if lengths is not None:
            x = x * _valid_mask(lengths, x.shape[-2], x.dim() - 2, x.dim()).to(x.dtype)
        prev, cur = x, x + 0.5 * self._apply_l(x, alphas, lengths)
        for _ in range(self.steps - 1):
            prev, cur = cur, 2 * cur - prev + self._apply_l(cur, alphas, lengths)
        return cur


class PseudoTimeReactionDiffusion(_PseudoTime):
    """`steps` Euler steps of reaction–diffusion on attention probabilities A (batch, heads, queries, keys):

        A ← A + Σ_k α_k Δ_{h_k} A + ρ A (1 − A)   along the key axis, then each row renormalised to sum 1.

    The logistic reaction is nonlinear in A, so — unlike diffusion and waves — it cannot be moved onto V:
    this operator NEEDS THE MATERIALISED (L × L) ATTENTION MATRIX, O(L²) memory per head. α (per scale and
    head) is held in the stability region; ρ = ½·σ(w) ∈ (0, ½) per head keeps A in [0, 1] before
    renormalisation.
    """

    def __init__(self, n_heads: int, scales: Sequence[int], alpha_init: float, steps: int) -> None:
        super().__init__(n_heads, scales, alpha_init, steps)
        # ρ starts at alpha_init too: reaction and diffusion begin on the same footing.
        self.reaction_logit = nn.Parameter(torch.full((n_heads,), math.log(alpha_init / (0.5 - alpha_init))))

    def forward(self, probs: Tensor, lengths: Tensor | None = None) -> Tensor:
        alphas = self.alphas().to(probs.dtype)[:, :, None, None]  # (K, H, 1, 1): per head, queries × keys
        rho = (0.5 * torch.sigmoid(self.reaction_logit)).to(probs.dtype)[:, None, None]
        for _ in range(self.steps):
            probs = diffusion_step(probs, alphas, self.scales, dim=-1, lengths=lengths)
            probs = probs + rho * probs * (1 - probs)
            if lengths is not None:
                probs = probs * _valid_mask(lengths, probs.shape[-1], probs.dim() - 1, probs.dim())
        return probs / probs.sum(-1, keepdim=True)
