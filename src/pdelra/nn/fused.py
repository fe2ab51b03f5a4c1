"""The diffusion layer as one fused operator: Euler step + LayerNorm + padding mask, one pass each way.

    y = mask · LN(u),   u = x + Σ_k c_k (x_{i+h_k} + x_{i−h_k} − 2 x_i)     (x zeroed at padding first)

with the half-sample symmetric extension of `pdelra.nn.ops` (each sequence reflected at its own last valid
token; any h, including h ≥ L, by repeated reflection). `c_k` (K, C) are the stencil coefficients: α_k, or
α_k / h_k² with `stencil_scaling="inverse_h2"`. `norm=False` gives the bare Euler step (mask · u).

Why this is fast: the eager reference (`ops.DiffusionLayer` with `fused=False`) makes about ten passes over
the activations (stencil slices, adds, mask, LayerNorm, each forward and backward). Here the forward is one
function and the backward another, each written as plain tensor code over gathered neighbour indices and
compiled by `torch.compile` (Inductor: C++/OpenMP loops on CPU, Triton on GPU) with dynamic batch and length,
so every element-wise step and the per-row LayerNorm statistics fuse into one or two loops over the data:

- forward: read x once (neighbours come from cache), write y; keep x and the per-row mean and 1/std;
- backward: recompute u from x, LayerNorm backward to ∂u, then ∂x = S ∂u (the stencil S is symmetric, also
  with padding) and ∂c_k = Σ x·(N_k ∂u − 2∂u), the LayerNorm's ∂γ, ∂β as column sums.

Arithmetic is in float32 (float64 stays float64), whatever the activations' dtype: under bf16 autocast the
coefficients stay float32 and the stencil, written as x + Σ c (neighbours − 2x), keeps each sequence's mean.

One code path for CPU and GPU. Where compilation is impossible (no C++ compiler, or an error in Inductor) the
same functions run eagerly — still exact, no longer fused — after one warning. Set `PDELRA_FUSED_COMPILE=0`
to run them eagerly on purpose (tests of the numerics without compile time).
"""

from __future__ import annotations

import logging
import os
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

log = logging.getLogger(__name__)

# Compile the fused functions (default). Read once at import; tests may flip the module attribute.
COMPILE = os.environ.get("PDELRA_FUSED_COMPILE", "1") not in ("0", "false", "False", "")

_compiled: dict[tuple[Any, ...], Callable[..., Any]] = {}
_failed = False


def _reflect(j: Tensor, n: Tensor, wide: bool) -> Tensor:
    """Half-sample symmetric reflection of 0-based indices j into [0, n): period 2n, mirror at n − ½.

    wide=False assumes −n ≤ j < 2n (every step h ≤ every length): one mirror at each end, two compares, no
    integer division (which would cost more than the arithmetic of the whole stencil on CPU).
    """
    if wide:
        m = torch.remainder(j, 2 * n)
        return torch.where(m < n, m, 2 * n - 1 - m)
    j = torch.where(j < 0, -1 - j, j)
    return torch.where(j < n, j, 2 * n - 1 - j)


def _neighbour_sums(v: Tensor, scales: tuple[int, ...], n: Tensor, wide: bool) -> list[Tensor]:
    """[v_{i+h} + v_{i−h} for h in scales], reflected per sequence; v (N, L, C) is 0 at padding, n (N, 1).

    Rows past a sequence's end read clamped indices; the callers mask those rows.
    """
    size, channels = v.shape[1], v.shape[2]
    i = torch.arange(size, device=v.device)
    sums = []
    for h in scales:
        ahead = _reflect(i + h, n, wide).clamp(0, size - 1)[..., None].expand(-1, -1, channels)  # (N, L, C)
        behind = _reflect(i - h, n, wide).clamp(0, size - 1)[..., None].expand(-1, -1, channels)
        sums.append(v.gather(1, ahead) + v.gather(1, behind))
    return sums


def _stencil(v: Tensor, coef: Tensor, scales: tuple[int, ...], n: Tensor, wide: bool) -> Tensor:
    """v + Σ_k c_k (N_k v − 2v): the Euler step, written so that rounding cannot move the mean."""
    out = v
    # coef[k], not iteration over coef: iterating would pin K as a size and, by duck sizing, any equal batch.
    for k, sums in enumerate(_neighbour_sums(v, scales, n, wide)):
        out = out + coef[k] * (sums - 2 * v)
    return out


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def _forward(
    x: Tensor,
    coef: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    lengths: Tensor,
    scales: tuple[int, ...],
    wide: bool,
    eps: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """x (N, L, C), coef (K, C), lengths (N,) → y (N, L, C) in x's dtype, row mean and 1/std (N, L, 1)."""
    n = lengths[:, None]
    valid = (torch.arange(x.shape[1], device=x.device) < n)[..., None]  # (N, L, 1)
    v = torch.where(valid, x.to(_compute_dtype(x.dtype)), 0)
    u = _stencil(v, coef.to(v.dtype), scales, n, wide)
    if weight is None:  # the bare Euler step
        return (u * valid).to(x.dtype), u.new_empty(0), u.new_empty(0)
    mean = u.mean(-1, keepdim=True)
    centred = u - mean
    rstd = torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps)
    y = centred * rstd * weight.to(v.dtype)
    if bias is not None:
        y = y + bias.to(v.dtype)
    return torch.where(valid, y, 0).to(x.dtype), mean, rstd


def _backward(
    grad: Tensor,
    x: Tensor,
    coef: Tensor,
    weight: Tensor | None,
    lengths: Tensor,
    mean: Tensor,
    rstd: Tensor,
    scales: tuple[int, ...],
    wide: bool,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """∂y (N, L, C) → ∂x, ∂coef (K, C), ∂weight, ∂bias (C,) (the last two None without LayerNorm)."""
    n = lengths[:, None]
    valid = (torch.arange(x.shape[1], device=x.device) < n)[..., None]
    dtype = _compute_dtype(x.dtype)
    v = torch.where(valid, x.to(dtype), 0)
    g = torch.where(valid, grad.to(dtype), 0)
    coef = coef.to(dtype)
    grad_weight = grad_bias = None
    if weight is not None:  # LayerNorm backward: g becomes ∂u (0 at padding, since ∂y is)
        xhat = (_stencil(v, coef, scales, n, wide) - mean) * rstd
        grad_weight = (g * xhat).sum((0, 1)).to(weight.dtype)
        grad_bias = g.sum((0, 1)).to(weight.dtype)
        gx = g * weight.to(dtype)
        g = rstd * (gx - gx.mean(-1, keepdim=True) - xhat * (gx * xhat).mean(-1, keepdim=True))
    sums = _neighbour_sums(g, scales, n, wide)
    grad_x = g
    grad_coef = []
    for k, s in enumerate(sums):
        laplacian_g = s - 2 * g  # Δ_k ∂u; S is symmetric, so ∂x = ∂u + Σ c_k Δ_k ∂u
        grad_x = grad_x + coef[k] * laplacian_g
        grad_coef.append((v * laplacian_g).sum((0, 1)))  # Σ ∂u·Δ_k x = Σ x·Δ_k ∂u
    grad_x = torch.where(valid, grad_x, 0).to(x.dtype)
    return grad_x, torch.stack(grad_coef), grad_weight, grad_bias


def _run(fn: Callable[..., Any], config: tuple[Any, ...], *args: Any) -> Any:
    """fn(*args), compiled (dynamic shapes) unless compilation is off, failed before, or already under way.

    One compiled copy of fn per layer `config` (scales, reflection kind, LayerNorm or not, channels, dtype,
    device): Dynamo caches graphs per code object with a small limit (8), which a process holding many
    different layers (benchmarks, tests) would exhaust, and it would then run the rest uncompiled.
    """
    global _failed
    if not COMPILE or _failed or torch.compiler.is_compiling():
        return fn(*args)
    key = (fn.__name__, *config)
    compiled = _compiled.get(key)
    if compiled is None:
        copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__)
        # Every gathered index is clamped into range by construction: no per-load bounds check.
        options = {"assert_indirect_indexing": False}
        compiled = _compiled[key] = torch.compile(copy, dynamic=True, options=options)
    for arg in args:  # batch and length vary from step to step: compile for symbolic sizes from the start
        if not isinstance(arg, Tensor):
            continue
        if arg.dim() == 3:  # activations, gradients, row statistics (N, L, ·)
            torch._dynamo.maybe_mark_dynamic(arg, 0)
            torch._dynamo.maybe_mark_dynamic(arg, 1)
        elif arg.dim() == 2:  # coef (K, C): fixed per layer; static, so duck sizing cannot tie K to the batch
            torch._dynamo.mark_static(arg)
        elif arg.dtype == torch.long:  # lengths (N,)
            torch._dynamo.maybe_mark_dynamic(arg, 0)
    try:
        return compiled(*args)
    except Exception as exc:  # Inductor/compiler trouble: stay correct, lose only speed
        _failed = True
        log.warning("torch.compile of the fused diffusion operator failed (%s); running it eagerly", exc)
        return fn(*args)


class _FusedDiffusion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, coef, weight, bias, lengths, scales, wide, eps):  # type: ignore[override]
        config = (scales, wide, weight is None, x.shape[-1], x.dtype, x.device.type)
        y, mean, rstd = _run(_forward, config, x, coef, weight, bias, lengths, scales, wide, eps)
        ctx.save_for_backward(x, coef, weight, lengths, mean, rstd)
        ctx.scales, ctx.wide, ctx.has_bias, ctx.config = scales, wide, bias is not None, config
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):  # type: ignore[override]
        x, coef, weight, lengths, mean, rstd = ctx.saved_tensors
        grad_x, grad_coef, grad_weight, grad_bias = _run(
            _backward,
            ctx.config,
            grad.contiguous(),
            x,
            coef,
            weight,
            lengths,
            mean,
            rstd,
            ctx.scales,
            ctx.wide,
        )
        return grad_x, grad_coef, grad_weight, grad_bias if ctx.has_bias else None, None, None, None, None


def fused_diffusion(
    x: Tensor,
    coef: Tensor,
    scales: Sequence[int],
    lengths: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    normalise: bool = True,
) -> Tensor:
    """mask · LN(x + Σ_k c_k Δ_{h_k} x) along dim −2 of x (…, L, C); the masked Euler step if not normalise.

    coef (K, C); lengths (batch,) with batch = x.shape[0] (only for 3-D x), None = all full; weight/bias: the
    LayerNorm's affine parameters (C,) or None. Differentiable in x, coef, weight and bias.
    """
    scales = tuple(int(h) for h in scales)
    if coef.shape != (len(scales), x.shape[-1]):
        raise ValueError(f"coef must have shape ({len(scales)}, {x.shape[-1]}), got {tuple(coef.shape)}")
    shape = x.shape
    x3 = x.reshape(-1, shape[-2], shape[-1])  # (N, L, C)
    # The cheap reflection needs every step ≤ every length; h = 1 always is, larger h costs one host sync.
    if lengths is None:
        lengths = torch.full((x3.shape[0],), shape[-2], device=x.device, dtype=torch.long)
        wide = max(scales) > shape[-2]
    elif x.dim() != 3 or lengths.shape != (shape[0],):
        raise ValueError(f"lengths {tuple(lengths.shape)} needs x of shape (batch, L, C), got {tuple(shape)}")
    else:
        wide = max(scales) > 1 and max(scales) > int(lengths.min())
    if normalise and weight is None:
        weight = torch.ones(shape[-1], device=x.device, dtype=coef.dtype)  # LayerNorm without affine map
    if not normalise:
        weight = bias = None
    y = _FusedDiffusion.apply(x3.contiguous(), coef, weight, bias, lengths, scales, wide, float(eps))
    return y.view(shape)
