"""Operator-theory diagnostics of the revised paper: roughness, perturbation bounds and diffusion–attention
non-commutativity. Pure functions on tensors; every input is (batch, length, channels) with the sequence on
dim −2 and, optionally, `lengths` (batch,) giving each sequence's valid length (padding after it).

Notation (0-based positions, one sequence of valid length n, one channel):

    Δ_h u_i = u_{i+h} − 2u_i + u_{i−h}        half-sample symmetric reflection at 0 and n (pdelra.nn.ops)
    E(u)    = Σ_{i=0}^{n−2} (u_{i+1} − u_i)²   the Dirichlet energy ("roughness") = uᵀ(−Δ_1)u
    D u     = u + Σ_k w_k Δ_{h_k} u            one explicit Euler step at scales h_k

with w_k = α_k for `stencil_scaling="unit"` (paper eq. 6) and w_k = α_k / h_k² for `"inverse_h2"` (eq. 11,
the Laplacian divided by h²). With channels, α_k and w_k are per channel and every quantity is summed over
channels: E(x) = Σ_c E(x_c).

Spectral facts used below (tested in tests/test_ops.py): every Δ_h with half-sample reflection is diagonal in
the orthonormal DCT-II basis φ_0 … φ_{n−1} of the valid block, Δ_h φ_j = −μ_j(h) φ_j with

    μ_j(h) = 4 sin²(π j h / 2n),    so E(u) = Σ_j μ_j(1) a_j²  for u = Σ_j a_j φ_j.

Padding: each sequence is its own valid block; padded positions are ignored by every quantity (set to 0
before anything is computed), so no result depends on what the padding holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from pdelra.nn.ops import diffusion_step

STENCIL_SCALINGS = ("unit", "inverse_h2")

Map = Callable[[Tensor, Tensor | None], Tensor]  # x (B, L, C), lengths (B,) | None → (B, L, C)


# ----------------------------------------------------------------------------------------------------------
# Padding


def _lengths(x: Tensor, lengths: Tensor | None) -> Tensor:
    """Valid lengths (B,), all L when `lengths` is None; checked against x (B, L, C)."""
    if x.dim() != 3:
        raise ValueError(f"expected x of shape (batch, length, channels), got {tuple(x.shape)}")
    batch, size = x.shape[0], x.shape[1]
    if lengths is None:
        return torch.full((batch,), size, dtype=torch.long, device=x.device)
    if lengths.shape != (batch,):
        raise ValueError(f"lengths must have shape ({batch},) to match x, got {tuple(lengths.shape)}")
    lo, hi = int(lengths.min()), int(lengths.max())
    if lo < 1 or hi > size:
        raise ValueError(f"lengths must lie in [1, {size}] (the sequence length), got min {lo}, max {hi}")
    return lengths.to(device=x.device, dtype=torch.long)


def valid_mask(x: Tensor, lengths: Tensor | None) -> Tensor:
    """(B, L, 1) mask of x's dtype: 1 at valid positions, 0 at padding."""
    n = _lengths(x, lengths)
    return (torch.arange(x.shape[1], device=x.device) < n[:, None]).to(x.dtype)[:, :, None]


def zero_padding(x: Tensor, lengths: Tensor | None) -> Tensor:
    """x with every padded position set to 0 (whatever it held, inf and NaN included)."""
    return torch.where(valid_mask(x, lengths) > 0, x, torch.zeros((), dtype=x.dtype, device=x.device))


def masked_norm(x: Tensor, lengths: Tensor | None = None) -> Tensor:
    """‖x‖ over each sequence's valid tokens and all channels, (B,)."""
    return zero_padding(x, lengths).flatten(1).norm(dim=1)


# ----------------------------------------------------------------------------------------------------------
# Roughness


def channel_energy(x: Tensor, lengths: Tensor | None = None) -> Tensor:
    """E(x_c) = Σ_{i=0}^{n−2} (x_{i+1,c} − x_{i,c})² per sequence and channel, (B, C); 0 when n = 1."""
    x = zero_padding(x, lengths)
    n = _lengths(x, lengths)
    diff = x[:, 1:] - x[:, :-1]  # (B, L−1, C); the difference i+1 − i is valid when i + 1 < n
    keep = (torch.arange(x.shape[1] - 1, device=x.device) + 1 < n[:, None]).to(x.dtype)[:, :, None]
    return (diff * keep).square().sum(1)


def dirichlet_energy(x: Tensor, lengths: Tensor | None = None) -> Tensor:
    """Roughness E(x) = Σ_{i=0}^{n−2} ‖x_{i+1} − x_i‖² over each sequence's valid tokens, (B,).

    Equals xᵀ(−Δ_1)x summed over channels, with Δ_1 the Neumann Laplacian of the diffusion layer. Scale it by
    ‖x‖² (`relative_roughness`) to compare representations whose norms differ (e.g. across a LayerNorm).
    """
    return channel_energy(x, lengths).sum(1)


def relative_roughness(x: Tensor, lengths: Tensor | None = None) -> Tensor:
    """E(x) / ‖x‖² per sequence, (B,): scale-free roughness in [0, 4) (0 for a constant sequence)."""
    energy = dirichlet_energy(x, lengths)
    norm2 = masked_norm(x, lengths).square()
    return torch.where(
        norm2 > 0, energy / norm2.clamp_min(torch.finfo(x.dtype).tiny), torch.zeros_like(energy)
    )


# ----------------------------------------------------------------------------------------------------------
# The Euler step as an object that knows its own bound


@dataclass(frozen=True)
class EulerStep:
    """D x = x + Σ_k w_k ⊙ Δ_{h_k} x along dim −2 (padding-aware), callable as D(x, lengths).

    alphas: (K, C) per scale and channel, or (K,) / (K, 1) shared by all channels. `stencil_scaling` says how
    α turns into the stencil weight: w_k = α_k ("unit", eq. 6) or α_k / h_k² ("inverse_h2", eq. 11).
    """

    alphas: Tensor
    scales: tuple[int, ...]
    stencil_scaling: str = "unit"

    def __post_init__(self) -> None:
        if self.stencil_scaling not in STENCIL_SCALINGS:
            raise ValueError(
                f"stencil_scaling must be one of {STENCIL_SCALINGS}, got {self.stencil_scaling!r}"
            )
        if self.alphas.dim() not in (1, 2) or self.alphas.shape[0] != len(self.scales):
            raise ValueError(
                f"alphas must be (K,) or (K, C) with K = {len(self.scales)} scales {self.scales}, "
                f"got shape {tuple(self.alphas.shape)}"
            )

    @classmethod
    def from_layer(cls, layer: torch.nn.Module) -> EulerStep:
        """The Euler step of a `pdelra.nn.ops.DiffusionLayer` (its trained α, scales and stencil scaling).

        The layer's LayerNorm, if any, is not part of D: it acts on each token separately and is outside
        the bound (measure roughness after it with `dirichlet_energy` on the layer's output).
        """
        with torch.no_grad():
            alphas = layer.alphas().detach()
        return cls(alphas, tuple(layer.scales), getattr(layer, "stencil_scaling", "unit"))

    def weights(self) -> Tensor:
        """Stencil weights w (K, C) or (K, 1): α, or α / h² under "inverse_h2"."""
        alphas = self.alphas if self.alphas.dim() == 2 else self.alphas[:, None]
        if self.stencil_scaling == "unit":
            return alphas
        h2 = torch.tensor([h * h for h in self.scales], dtype=alphas.dtype, device=alphas.device)
        return alphas / h2[:, None]

    def __call__(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        return diffusion_step(x, self.weights().to(x), self.scales, dim=-2, lengths=lengths)


def _as_step(diffuse: EulerStep | torch.nn.Module) -> EulerStep:
    if isinstance(diffuse, EulerStep):
        return diffuse
    if callable(getattr(diffuse, "alphas", None)) and hasattr(diffuse, "scales"):
        return EulerStep.from_layer(diffuse)
    raise TypeError(
        "perturbation needs an EulerStep or a DiffusionLayer (α and scales known), "
        f"got {type(diffuse).__name__}"
    )


# ----------------------------------------------------------------------------------------------------------
# Perturbation and its bound from roughness


class Perturbation(NamedTuple):
    """Per sequence (B,): the perturbation ‖D(x) − x‖, its sharp bound and the closed-form bound."""

    norm: Tensor
    bound: Tensor
    closed_form: Tensor


def eigenvalues(n: int, scales: Sequence[int], dtype: torch.dtype = torch.float64) -> Tensor:
    """μ_j(h_k) = 4 sin²(π j h_k / 2n), j = 0 … n−1, shape (n, K): −Δ_{h_k} on the DCT-II mode j."""
    j = torch.arange(n, dtype=torch.float64)[:, None]
    h = torch.tensor([float(s) for s in scales], dtype=torch.float64)[None, :]
    return (4 * torch.sin(math.pi * j * h / (2 * n)) ** 2).to(dtype)


def roughness_gain(step: EulerStep, n: int) -> Tensor:
    """β_c(n) = max_{j ≥ 1} |Σ_k w_{k,c} μ_j(h_k)| / √μ_j(1) per channel, (C,) or (1,): the smallest
    constant with ‖(D − I) u‖² ≤ β² E(u) for every u of length n (see `perturbation`). 0 when n = 1."""
    w = step.weights().detach().to("cpu", torch.float64)  # (K, C)
    if n < 2:
        return torch.zeros(w.shape[1], dtype=torch.float64)
    mu = eigenvalues(n, step.scales)[1:]  # (n−1, K): mode 0 (the constant) has μ = 0 at every scale
    symbol = (mu @ w).abs()  # (n−1, C): |eigenvalue of D − I| on each mode
    energy_weight = eigenvalues(n, (1,))[1:]  # (n−1, 1): μ_j(1), what E(u) weighs mode j by
    return (symbol / energy_weight.sqrt()).amax(0)


def perturbation(
    diffuse: EulerStep | torch.nn.Module, x: Tensor, lengths: Tensor | None = None
) -> Perturbation:
    """‖D(x) − x‖ per sequence (valid tokens), with the bound from the roughness E(x).

    Derivation (one sequence of valid length n, one channel c; then sum over channels). Write
    x_c = Σ_j a_j φ_j in the DCT-II basis of the valid block. Every Δ_h is diagonal there, so

        (D − I) x_c = −Σ_j s_j a_j φ_j,    s_j = Σ_k w_{k,c} μ_j(h_k)      (s_0 = 0: constants are kept)

        ‖(D − I) x_c‖² = Σ_{j≥1} s_j² a_j² = Σ_{j≥1} (s_j² / μ_j(1)) · μ_j(1) a_j²  ≤  β_c² · E(x_c)

    with β_c = max_{j≥1} |s_j| / √μ_j(1) (`roughness_gain`). Summing over channels,

        ‖D(x) − x‖  ≤  bound = √(Σ_c β_c² E(x_c))  ≤  max_c β_c · √E(x).

    It is sharp: equality holds when every channel lies on its maximising mode j*. For one scale h = 1,
    s_j/√μ_j(1) = w √μ_j(1) grows with j, so j* = n − 1, the highest-frequency mode: there
    ‖D(x) − x‖ = w · 2 sin(π(n−1)/2n) · √E(x), approaching 2w√E (= √E at the stability limit w = ½).

    Closed form, through the triangle inequality Σ_k w_k ‖Δ_{h_k} x‖ of the issue: with θ = πj/2n,
    μ_j(h)/√μ_j(1) = 2 sin²(hθ)/|sin θ| ≤ 2h (as |sin hθ| ≤ h|sin θ| and |sin hθ| ≤ 1), hence
    ‖Δ_h u‖ ≤ 2h √E(u) and

        closed_form = 2 √(Σ_c (Σ_k |w_{k,c}| h_k)² E(x_c))  ≥ bound,

    i.e. ‖D(x) − x‖ ≤ 2 Σ_k α_k h_k √E under "unit" and 2 Σ_k α_k / h_k √E under "inverse_h2" (α shared by
    channels). The closed form is loose by up to ~π/2 at h > 1 (the sharp constant is ≈ 4h/π, reached near
    hθ = π/2); the sharp one is what tests check for tightness.

    diffuse: an `EulerStep`, or a `DiffusionLayer` (its Euler step; a following LayerNorm is not part of D).
    Returns `Perturbation(norm, bound, closed_form)`, each (B,).
    """
    step = _as_step(diffuse)
    n = _lengths(x, lengths)
    x = zero_padding(x, lengths)
    moved = step(x, lengths)
    norm = masked_norm(moved - x, lengths)
    energy = channel_energy(x, lengths).to(torch.float64)  # (B, C)

    w = step.weights().detach().to("cpu", torch.float64)  # (K, C')
    h = torch.tensor([float(s) for s in step.scales], dtype=torch.float64)
    closed_gain = 2 * (w.abs() * h[:, None]).sum(0)  # (C',)
    gains = {m: roughness_gain(step, m) for m in sorted(set(n.tolist()))}
    beta = torch.stack([gains[m] for m in n.tolist()]).to(energy.device)  # (B, C')
    bound = (beta.square() * energy).sum(1).sqrt()
    closed = (closed_gain.to(energy.device).square() * energy).sum(1).sqrt()
    return Perturbation(norm, bound.to(norm.dtype), closed.to(norm.dtype))


# ----------------------------------------------------------------------------------------------------------
# Non-commutativity


def commutator(diffuse: Map, mix: Map, x: Tensor, lengths: Tensor | None = None) -> Tensor:
    """‖D(M(x)) − M(D(x))‖ / ‖M(x)‖ per sequence over valid tokens, (B,): how far diffusing after a mixing
    map M (attention) differs from diffusing before it, relative to M's output.

    Both maps are called as f(x, lengths) on (B, L, C) and must be padding-aware (valid outputs independent of
    padding); padded outputs are ignored. It is 0 exactly when D and M commute on x: e.g. M the identity, M
    the uniform average over valid tokens (D keeps constants and each sequence's mean), or M another
    diffusion step (both are diagonal in the same DCT basis). A sequence where M(x) = 0 gives 0 if the
    commutator vanishes there too, else inf.
    """
    x = zero_padding(x, lengths)
    mixed = zero_padding(mix(x, lengths), lengths)
    after = diffuse(mixed, lengths)  # D(M(x)): diffusion after mixing
    before = mix(zero_padding(diffuse(x, lengths), lengths), lengths)  # M(D(x)): diffusion before mixing
    num = masked_norm(after - before, lengths)
    den = masked_norm(mixed, lengths)
    ratio = num / den.clamp_min(torch.finfo(x.dtype).tiny)
    return torch.where(den > 0, ratio, torch.where(num > 0, torch.full_like(num, math.inf), num))


# ----------------------------------------------------------------------------------------------------------
# Downstream amplification


def jacobian_spectral_norm(rest: Callable[[list[Tensor]], Tensor], at: Sequence[Tensor]) -> Tensor:
    """σ_max(J_b) per example b, (B,): the largest singular value of the Jacobian of `rest` at `at`, where
    rest maps tensors (B, …) — one per place the perturbed point feeds, e.g. both towers of a pair model —
    to outputs (B, C), and example b's outputs depend only on example b's inputs (eval mode: no batch
    statistics), so the whole Jacobian is block-diagonal over examples.

    Exact, not a power iteration: with C outputs per example, C vector–Jacobian products (one backward pass
    each, e_c summed over the batch) give every row of every J_b, and σ_max of a C × N matrix is the square
    root of the largest eigenvalue of the C × C matrix J_b J_bᵀ. For C ≤ 10 (the LRA tasks) this costs no
    more backward passes than a few power iterations, each of which needs a forward- and a reverse-mode
    product, and has no iteration error. `rest` must be differentiable in its inputs; parameters need not
    require grad.

    What it is: the local gain ‖rest(u + δ) − rest(u)‖ ≈ ‖J_b δ‖ ≤ σ_max ‖δ‖ of an infinitesimal δ at this
    example, i.e. a lower bound on the Lipschitz constant of `rest` over any region containing u — not a
    global Lipschitz bound, and for a finite δ only a first-order statement.
    """
    leaves = [t.detach().requires_grad_(True) for t in at]
    with torch.enable_grad():
        out = rest(leaves)
        if out.dim() != 2 or out.shape[0] != leaves[0].shape[0]:
            raise ValueError(f"rest must return (batch, outputs), got {tuple(out.shape)}")
        rows = []
        for c in range(out.shape[1]):
            grads = torch.autograd.grad(
                out[:, c].sum(), leaves, retain_graph=c + 1 < out.shape[1], allow_unused=True
            )
            parts = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, leaves, strict=True)]
            rows.append(torch.cat([g.flatten(1) for g in parts], 1))  # (B, N): row c of every J_b
    jacobian = torch.stack(rows, 1).to(torch.float64)  # (B, C, N)
    gram = jacobian @ jacobian.transpose(1, 2)  # (B, C, C), symmetric positive semi-definite
    return torch.linalg.eigvalsh(gram)[:, -1].clamp_min(0).sqrt()
