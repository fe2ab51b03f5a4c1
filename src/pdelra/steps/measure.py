"""Measuring one model's operators (`pdelra diagnose`, `pdelra.steps.diagnose`): where each operator sits,
the roughness, perturbation and commutator quantities of a batch at each of them, and each operator's effect
on the logits (removing it, and the amplification downstream). A `Recorder` gathers the rows; the step reads
runs, caches and writes the tables."""

from __future__ import annotations

import logging
import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pdelra.nn import diagnostics as dg
from pdelra.nn.model import Identity
from pdelra.nn.ops import DiffusionLayer
from pdelra.results.diagnostics import LOGIT_QUANTITIES, QUANTITIES

if TYPE_CHECKING:
    import torch
    from torch import Tensor

log = logging.getLogger(__name__)

PROBE_ALPHA = 0.1
PROBE_SCALES = (1,)
# The block of an operator at an insertion point outside every block (no attention sub-layer to commute with).
NO_BLOCK = -1
# The quantities that need the paper's step sizes α: empty in an `operator` row.
ALPHA_QUANTITIES = (
    "alpha_mean",
    "bound",
    "bound_closed_form",
    "bound_ratio",
    "composed_bound",
    "composed_ratio",
    "composed_held",
)
NO_ALPHA = f"not the paper's diffusion layer: {', '.join(ALPHA_QUANTITIES)} (its α and bound) do not apply"
# Insertion points whose operator acts on channels of the residual stream's basis (per-channel α carry over).
RESIDUAL_CHANNEL_POINTS = (
    "embedding",
    "between_blocks",
    "attn_input",
    "attn_output",
    "mlp_input",
    "mlp_output",
)


# ----------------------------------------------------------------------------------------------------------
# Where an operator sits


def operator_place(name: str) -> tuple[int, str]:
    """(block, insertion point) of an operator by its module name in the model: the block whose attention
    sub-layer its output meets next, NO_BLOCK for a point outside every block (its name's last part)."""
    if name == "encoder.embedding":
        return 0, "embedding"
    if m := re.fullmatch(r"encoder\.between_blocks\.(\d+)", name):
        return int(m[1]) + 1, "between_blocks"
    if m := re.fullmatch(r"encoder\.blocks\.(\d+)\.(?:attn\.)?(\w+?)(?:\.diffusion)?", name):
        return int(m[1]), m[2]
    return NO_BLOCK, name.rsplit(".", 1)[-1]


def no_block_reason(name: str) -> str:
    return f"{name} is in no block: no commutator (it needs a block's attention sub-layer)"


def config_operators(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """The operators of a variant declared in the config (ModelConfig.operators) that are not the paper's
    diffusion layer, by module name: the modules at the encoder's insertion points (its POINTS), outermost."""
    import torch

    if getattr(model.cfg, "operators", None) is None:
        return {}
    points = set(getattr(model.encoder, "POINTS", ()))
    found: dict[str, torch.nn.Module] = {}
    for name, module in model.named_modules():
        parts = name.split(".")
        attribute = parts[-2] if parts[-1].isdigit() and len(parts) > 1 else parts[-1]
        if attribute not in points or isinstance(module, (Identity, DiffusionLayer)):
            continue
        if isinstance(module, torch.nn.ModuleList) or any(name.startswith(f"{k}.") for k in found):
            continue
        found[name] = module
    return found


def attention_sublayer(block: torch.nn.Module) -> Callable[[Tensor, Tensor | None], Tensor]:
    """M(x) = x + W_o·MHA(LN₁(x)): block's attention sub-layer on the residual stream, padded keys masked,
    without inserted operators. x (B, L, d), lengths (B,) → (B, L, d)."""
    import torch
    import torch.nn.functional as F

    attn = block.attn

    def mix(x: Tensor, lengths: Tensor | None) -> Tensor:
        b, n, d = x.shape
        q, k, v = attn.qkv(block.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(b, n, attn.n_heads, -1).transpose(1, 2) for t in (q, k, v))  # (B, H, L, dh)
        mask = None
        if lengths is not None:
            mask = (torch.arange(n, device=x.device)[None, :] < lengths[:, None])[:, None, None, :]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, L, dh)
        return x + attn.proj(out.transpose(1, 2).flatten(2))

    return mix


# ----------------------------------------------------------------------------------------------------------
# Measuring one batch


class Recorder:
    """Collects per-example values (lists of (B,) tensors) per row key, then averages them."""

    def __init__(self) -> None:
        self.values: dict[tuple[int, str, str, str], dict[str, list[Tensor]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.alpha: dict[tuple[int, str, str, str], float] = {}
        self.reasons: dict[tuple[int, str, str, str], list[str]] = defaultdict(list)

    def skip(self, key: tuple[int, str, str, str], reason: str) -> None:
        """Say, once per row, what was not measured and why."""
        if reason not in self.reasons[key]:
            self.reasons[key].append(reason)

    def add(self, key: tuple[int, str, str, str], **quantities: Tensor) -> None:
        for name, value in quantities.items():
            self.values[key][name].append(value.detach().double().cpu())

    def rows(self) -> list[dict[str, Any]]:
        import torch

        rows = []
        for key, quantities in self.values.items():
            block, operator, kind, position = key
            row: dict[str, Any] = {
                "block": block,
                "operator": operator,
                "kind": kind,
                "position": position,
                "alpha_mean": self.alpha.get(key, math.nan),
            }
            n = 0
            for name in (*QUANTITIES, *LOGIT_QUANTITIES):
                if name in quantities:
                    values = torch.cat(quantities[name])
                    row[name] = values.mean().item()
                    if name not in LOGIT_QUANTITIES:
                        n = max(n, values.numel())
                else:
                    row[name] = math.nan
            row["n_examples"] = n
            row["n_logit_examples"] = sum(v.numel() for v in quantities.get("logit_change", []))
            # Measured, yet NaN: only non-finite activations give one (every quantity is guarded against
            # 0/0), so the row says so rather than leave a NaN that reads as "not measured".
            nan = [name for name in quantities if math.isnan(row[name])]
            reasons = [*self.reasons.get(key, [])]
            if nan:
                reasons.append(f"NaN from non-finite activations (NaN/Inf) in {', '.join(nan)}")
            row["reason"] = "; ".join(reasons)
            rows.append(row)
        return sorted(
            rows,
            key=lambda r: (
                r["block"],
                ["residual", "probe", "trained", "operator"].index(r["kind"]),
                r["operator"],
            ),
        )


def _roughness(prefix: str, x: Tensor, lengths: Tensor | None) -> dict[str, Tensor]:
    return {
        f"roughness_{prefix}": dg.dirichlet_energy(x, lengths),
        f"rel_roughness_{prefix}": dg.relative_roughness(x, lengths),
    }


def _perturbation(step: Any, x: Tensor, lengths: Tensor | None) -> dict[str, Tensor]:
    p = dg.perturbation(step, x, lengths)
    ratio = torch_where_positive(p.bound, p.norm)
    return {
        "perturbation": p.norm,
        "bound": p.bound,
        "bound_closed_form": p.closed_form,
        "bound_ratio": ratio,
    }


def torch_where_positive(bound: Tensor, norm: Tensor) -> Tensor:
    """norm / bound, 0 where both vanish (a constant sequence: no roughness, no perturbation)."""
    import torch

    return torch.where(bound > 0, norm / bound.clamp_min(1e-300), torch.zeros_like(norm))


def _commutators(
    step: Any, mix: Callable[[Tensor, Tensor | None], Tensor], x: Tensor, lengths: Tensor
) -> dict[str, Tensor]:
    """The commutator with the attention sub-layer M (relative to ‖M(x)‖) and with its branch A = M − I
    (relative to ‖A(x)‖; the numerator is the same, as the identity commutes with D)."""

    def branch(u: Tensor, n: Tensor | None) -> Tensor:
        return mix(u, n) - u

    return {
        "commutator": dg.commutator(step, mix, x, lengths),
        "commutator_branch": dg.commutator(step, branch, x, lengths),
    }


def _token_mean(values: Tensor, lengths: Tensor, size: int) -> Tensor:
    """(B·L,) per-token values → (B,) mean over each sequence's valid tokens."""
    import torch

    per = values.view(lengths.shape[0], size)
    valid = (torch.arange(size, device=per.device)[None, :] < lengths[:, None]).to(per.dtype)
    return (per * valid).sum(1) / lengths.to(per.dtype)


def measure_batch(model: torch.nn.Module, tokens: Tensor, lengths: Tensor, recorder: Recorder) -> None:
    """Run the encoder on (tokens, lengths) with hooks and record every row's per-example values."""
    import torch

    encoder = model.encoder
    blocks = list(encoder.blocks)
    streams: dict[int, Tensor] = {}  # residual stream entering block b; b = n_layers: leaving the last
    operators: list[tuple[str, Tensor, Tensor]] = []  # (name, input, output) of every diffusion layer
    hooks = []
    for b, block in enumerate(blocks):
        hooks.append(block.register_forward_pre_hook(lambda m, args, b=b: streams.__setitem__(b, args[0])))
    if blocks:
        last = len(blocks)
        hooks.append(blocks[-1].register_forward_hook(lambda m, a, out: streams.__setitem__(last, out[0])))
    layers = {n: m for n, m in model.named_modules() if isinstance(m, DiffusionLayer)}
    others = config_operators(model)
    for name, layer in {**layers, **others}.items():
        hooks.append(
            layer.register_forward_hook(lambda m, a, out, name=name: operators.append((name, a[0], out)))
        )
    try:
        encoder(tokens, lengths)
    finally:
        for hook in hooks:
            hook.remove()

    probe = dg.EulerStep(torch.tensor([PROBE_ALPHA]), PROBE_SCALES)
    mixes = {b: attention_sublayer(block) for b, block in enumerate(blocks)}
    for b in range(len(blocks)):
        x = streams[b]
        key = (b, "residual", "residual", "residual_stream")
        recorder.add(key, **_roughness("in", x, lengths), **_roughness("out", streams[b + 1], lengths))
        key = (b, "probe", "probe", "probe")
        recorder.alpha[key] = PROBE_ALPHA
        recorder.add(
            key,
            **_roughness("in", x, lengths),
            **_roughness("out", probe(x, lengths), lengths),
            **_perturbation(probe, x, lengths),
            **_commutators(probe, mixes[b], x, lengths),
        )

    for name, x_in, x_out in operators:
        block, point = operator_place(name)
        if name in others:
            _measure_operator(recorder, name, others[name], x_in, x_out, lengths, streams, mixes)
            continue
        step = dg.EulerStep.from_layer(layers[name])
        key = (block, name, "trained", point)
        recorder.alpha[key] = float(step.alphas.float().mean())
        if x_in.dim() == 4:  # across_heads: (B, L, H, dh), diffused along H; per token, then per sequence
            size = x_in.shape[1]
            rows_in, rows_out = x_in.flatten(0, 1), x_out.flatten(0, 1)  # (B·L, H, dh)
            quantities = {
                **_roughness("in", rows_in, None),
                **_roughness("out", rows_out, None),
                **_perturbation(step, rows_in, None),
            }
            recorder.add(key, **{k: _token_mean(v, lengths, size) for k, v in quantities.items()})
            recorder.skip(key, "along heads: no sequence commutator")
            continue
        commutator: dict[str, Tensor] = {}
        if block in mixes:
            if point not in RESIDUAL_CHANNEL_POINTS:  # value channels: the channel-mean α per scale
                step = dg.EulerStep(step.alphas.mean(-1), step.scales, step.stencil_scaling)
            x_b = streams[block]
            commutator = _commutators(step, mixes[block], x_b, lengths)
        else:
            recorder.skip(key, no_block_reason(name))
        recorder.add(
            key,
            **_roughness("in", x_in, lengths),
            **_roughness("out", x_out, lengths),
            **_perturbation(dg.EulerStep.from_layer(layers[name]), x_in, lengths),
            **commutator,
        )


def _measure_operator(
    recorder: Recorder,
    name: str,
    module: torch.nn.Module,
    x_in: Tensor,
    x_out: Tensor,
    lengths: Tensor,
    streams: dict[int, Tensor],
    mixes: dict[int, Callable[[Tensor, Tensor | None], Tensor]],
) -> None:
    """An `operator` row: what applies to any operator (batch, length, d_model) → same, without α."""
    block, point = operator_place(name)
    key = (block, name, "operator", point)
    recorder.skip(key, NO_ALPHA)
    commutator: dict[str, Tensor] = {}
    if block in mixes:
        commutator = _commutators(module, mixes[block], streams[block], lengths)
    else:
        recorder.skip(key, no_block_reason(name))
    recorder.add(
        key,
        **_roughness("in", x_in, lengths),
        **_roughness("out", x_out, lengths),
        perturbation=dg.masked_norm(x_out - x_in, lengths),
        **commutator,
    )


# ----------------------------------------------------------------------------------------------------------
# Insertion effect on the logits: removing an operator, and the downstream amplification


@dataclass
class _Point:
    """An insertion point as the rest of the network sees it: `module`'s first input is what flows on, so
    substituting it (a forward pre-hook, once per call: both towers of a pair model) runs the network from
    that point. `diffuse` is the operator D there; `zero_step`, a trained layer's step-size module, whose
    output is set to 0 so that the layer itself computes its input unchanged (D = I, its LayerNorm kept), or
    a config's operator, whose output is set to its input (D = I); `bounded`: D has the roughness bound;
    `operating` says at which input the model as trained runs: "diffused" (a trained layer: D is part of
    the model) or "plain" (the probe: it is not)."""

    key: tuple[int, str, str, str]
    module: torch.nn.Module
    diffuse: Any
    zero_step: torch.nn.Module | None
    operating: str
    bounded: bool = True


def _insertion_points(model: torch.nn.Module) -> list[_Point]:
    import torch

    probe = dg.EulerStep(torch.tensor([PROBE_ALPHA]), PROBE_SCALES)
    points = [
        _Point((b, "probe", "probe", "probe"), block, probe, None, "plain")
        for b, block in enumerate(model.encoder.blocks)
    ]
    for name, layer in model.named_modules():
        if isinstance(layer, DiffusionLayer):
            block, point = operator_place(name)
            step = dg.EulerStep.from_layer(layer)
            points.append(_Point((block, name, "trained", point), layer, step, layer.step_sizes, "diffused"))
    for name, module in config_operators(model).items():
        block, point = operator_place(name)
        points.append(_Point((block, name, "operator", point), module, module, module, "diffused", False))
    return points


def _call_lengths(module: torch.nn.Module, args: tuple[Any, ...]) -> Tensor | None:
    """The sequence lengths a hooked module was called with: a block's padding, a layer's `lengths`."""
    if len(args) < 2:
        return None  # attn_heads' layer: along heads, never padded
    return getattr(args[1], "lengths", args[1])


def _capture(model: torch.nn.Module, inputs: tuple[Tensor, ...], points: list[_Point]) -> tuple[Tensor, Any]:
    """The model's logits and, per point, [(first input, lengths)] of each call, from one forward pass."""
    import torch

    seen: dict[int, list[tuple[Tensor, Tensor | None]]] = defaultdict(list)
    hooks = [
        p.module.register_forward_pre_hook(
            lambda m, args, i=i: seen[i].append((args[0], _call_lengths(m, args)))
        )
        for i, p in enumerate(points)
    ]
    try:
        with torch.no_grad():
            logits = model(*inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, seen


def _run_from(
    model: torch.nn.Module, inputs: tuple[Tensor, ...], point: _Point, replacements: list[Tensor]
) -> Tensor:
    """The logits when the point's input is `replacements[k]` at its k-th call (and D = I in a trained
    layer): the rest of the network from that point, through the model's own modules."""
    import torch

    calls = iter(replacements)
    hooks = [point.module.register_forward_pre_hook(lambda m, args: (next(calls), *args[1:]))]
    if point.zero_step is point.module:  # a config's operator: its output is its input
        hooks.append(point.module.register_forward_hook(lambda m, args, out: args[0]))
    elif point.zero_step is not None:
        hooks.append(point.zero_step.register_forward_hook(lambda m, args, out: torch.zeros_like(out)))
    try:
        return model(*inputs)
    finally:
        for hook in hooks:
            hook.remove()


def _sequence_norms(step: Any, x: Tensor, lengths: Tensor | None, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """(‖D(x) − x‖, its roughness bound) per sequence over valid tokens, (B,). x (B, L, C) is diffused
    along L; x (B, L, H, dh) — attn_heads — along H per token, then summed over the valid `tokens` (B,)."""
    import torch

    if x.dim() == 3:
        p = dg.perturbation(step, x, lengths)
        return p.norm, p.bound
    size = x.shape[1]
    p = dg.perturbation(step, x.flatten(0, 1), None)  # per token (B·L,)
    valid = (torch.arange(size, device=x.device)[None, :] < tokens[:, None]).to(p.norm.dtype)
    norm = (p.norm.view(-1, size).square() * valid).sum(1).sqrt()
    bound = (p.bound.view(-1, size).square() * valid).sum(1).sqrt()
    return norm, bound


def measure_logit_effects(model: torch.nn.Module, inputs: tuple[Tensor, ...], recorder: Recorder) -> None:
    """Per insertion point (the probe entering each block, every trained diffusion layer, every operator of a
    config's variant: those without α get no bound, so no composed_* either) and example:

    - `logit_change` ‖logits with D − logits without D‖: a trained layer with its Euler step replaced by the
      identity (its LayerNorm kept), the probe inserted at the block's input;
    - `amplification` σ_max of the Jacobian of the logits in the point's input, at the model as trained
      (`pdelra.nn.diagnostics.jacobian_spectral_norm`): how much the rest of the network can amplify a small
      change there;
    - `amplified_perturbation` = amplification × ‖D(x) − x‖ and `composed_bound` = amplification × the
      roughness bound (the revised paper's "insertion effect ≤ roughness × amplification"), with
      `composed_ratio` = logit_change / composed_bound and `composed_held` = 1 where logit_change ≤
      composed_bound. A pair model's quantities cover both documents (the point feeds both towers)."""
    import torch

    points = _insertion_points(model)
    logits, seen = _capture(model, inputs, points)
    tokens = [inputs[1]] + ([inputs[3]] if len(inputs) > 3 else [])  # valid lengths per tower
    for i, point in enumerate(points):
        calls = seen.get(i, [])
        if not calls:
            continue
        plain = [x.detach() for x, _ in calls]
        with torch.no_grad():
            diffused = [point.diffuse(x, n) for x, n in calls]
            if point.bounded:
                norms = [
                    _sequence_norms(point.diffuse, x, n, t) for (x, n), t in zip(calls, tokens, strict=True)
                ]
            else:  # a config's operator: its effect, and no bound (it has no α)
                norms = [(dg.masked_norm(d - x, n), None) for (x, n), d in zip(calls, diffused, strict=True)]
            other = _run_from(model, inputs, point, plain if point.operating == "diffused" else diffused)
        with_d, without_d = (logits, other) if point.operating == "diffused" else (other, logits)
        at = diffused if point.operating == "diffused" else plain
        if not all(bool(t.isfinite().all()) for t in (*at, with_d, without_d)):
            recorder.skip(point.key, f"no logit effects: non-finite activations (NaN/Inf) at {point.key[1]}")
            continue
        try:
            sigma = dg.jacobian_spectral_norm(lambda leaves, p=point: _run_from(model, inputs, p, leaves), at)
        except torch.linalg.LinAlgError as exc:  # e.g. a non-finite Jacobian: eigvalsh does not converge
            reason = str(exc).splitlines()[0]
            recorder.skip(point.key, f"no logit effects: no amplification at {point.key[1]} ({reason})")
            continue
        change = (with_d - without_d).double().norm(dim=1)
        moved = torch.stack([n for n, _ in norms]).double().square().sum(0).sqrt()
        if not point.bounded:
            recorder.add(
                point.key, amplification=sigma, logit_change=change, amplified_perturbation=sigma * moved
            )
            continue
        bound = torch.stack([b for _, b in norms]).double().square().sum(0).sqrt()
        composed = sigma * bound
        recorder.add(
            point.key,
            amplification=sigma,
            logit_change=change,
            amplified_perturbation=sigma * moved,
            composed_bound=composed,
            composed_ratio=torch_where_positive(composed, change),
            composed_held=(change <= composed * (1 + 1e-6) + 1e-12).double(),
        )
