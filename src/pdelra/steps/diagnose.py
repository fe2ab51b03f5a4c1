"""`pdelra diagnose`: the operator-theory diagnostics (pdelra.nn.diagnostics) measured on trained runs, and
their table over runs.

What each row measures, and how (the kinds `residual`, `probe`, `trained`, `operator`; the attention
sub-layer as a map; the insertion effect on the logits; the commutators), is the subcommand's description,
`pdelra diagnose --help`: DIAGNOSE_DESCRIPTION in pdelra.steps.cli, where the command is declared.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra.atomic import write_json_atomic, write_text_atomic
from pdelra.data.hashing import file_digest
from pdelra.data.store import load_split, manifest_hash, read_manifest
from pdelra.errors import UserError
from pdelra.nn import diagnostics as dg
from pdelra.nn.model import Identity, ModelConfig
from pdelra.nn.ops import DiffusionLayer
from pdelra.results.diagnostics import COLUMNS, LOGIT_QUANTITIES, QUANTITIES, SKIPPED
from pdelra.runs import BASE_SETTING, DIVERGED, RUN_KEYS
from pdelra.steps.cli import AMPLIFICATION_EXAMPLES
from pdelra.training.batches import is_pair_split, make_batch
from pdelra.training.runconfig import validate_run_config
from pdelra.training.runner import build_model
from pdelra.training.weights import WEIGHTS_NAME, load_weights

if TYPE_CHECKING:
    import pandas as pd
    import torch
    from torch import Tensor

log = logging.getLogger(__name__)

DIAGNOSTICS_NAME = "diagnostics.csv"
STAMP_NAME = "diagnostics.json"
PROBE_ALPHA = 0.1
PROBE_SCALES = (1,)
# Parameters named in a skipped run's reason; the rest are counted (a NaN spreads to every later update).
NAMED_WEIGHTS = 3
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


# The code whose edits must rerun the diagnose jobs (and only them): the workflow passes its digest as a
# rule parameter, because Snakemake reruns on params but never on edits of imported Python modules.
DIAGNOSTICS_SOURCES = ("nn/diagnostics.py", "steps/diagnose.py")  # under the package root


def source_digest() -> str:
    """sha256 (16 hex digits) over the diagnostics source files of the pdelra package in use."""
    import hashlib

    digest = hashlib.sha256()
    for name in DIAGNOSTICS_SOURCES:
        digest.update(name.encode() + b"\0" + (Path(__file__).parents[1] / name).read_bytes())
    return digest.hexdigest()[:16]


class DiagnoseError(UserError):
    """A run or table that cannot be diagnosed; the message names the file."""


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


class _Recorder:
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


def measure_batch(model: torch.nn.Module, tokens: Tensor, lengths: Tensor, recorder: _Recorder) -> None:
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
    recorder: _Recorder,
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


def measure_logit_effects(model: torch.nn.Module, inputs: tuple[Tensor, ...], recorder: _Recorder) -> None:
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


# ----------------------------------------------------------------------------------------------------------
# One run


def read_metrics(run_dir: Path) -> dict[str, Any]:
    """RUN_DIR/metrics.json; DiagnoseError naming the file when it is missing or not JSON."""
    metrics_path = run_dir / "metrics.json"
    try:
        return json.loads(metrics_path.read_text())
    except FileNotFoundError as exc:
        raise DiagnoseError(f"{metrics_path}: no metrics.json (train the run first)") from exc
    except json.JSONDecodeError as exc:
        raise DiagnoseError(f"{metrics_path}: line {exc.lineno}: not JSON ({exc.msg})") from exc


def load_run(run_dir: Path, data_dir: Path) -> tuple[torch.nn.Module, dict[str, Any], Any]:
    """(model with the run's best-validation weights, in eval mode; metrics.json; the val split)."""
    import dataclasses

    metrics_path = run_dir / "metrics.json"
    metrics = read_metrics(run_dir)
    if "run_config" not in metrics:
        raise DiagnoseError(f"{metrics_path}: no 'run_config' key (written by an older trainer?)")
    raw = dict(metrics["run_config"])
    if "fused_diffusion" in {f.name for f in dataclasses.fields(ModelConfig)}:
        # The eager operator computes the same function with the same parameters, without compiling one
        # (torch.compile costs seconds to tens of seconds a process; a diagnose job is a few forward passes).
        raw["model"] = {**raw.get("model", {}), "fused_diffusion": False}
    cfg = validate_run_config(raw, f"{metrics_path}: run_config")
    manifest = read_manifest(data_dir)
    if manifest["task"] != cfg.task:
        raise DiagnoseError(f"{run_dir} is a {cfg.task!r} run but {data_dir} holds task {manifest['task']!r}")
    expected = metrics.get("data_manifest_hash")
    if expected is not None and manifest_hash(data_dir) != expected:
        raise DiagnoseError(
            f"{data_dir}: data manifest hash differs from the one {metrics_path} was trained on "
            f"({expected[:12]}…): diagnose with the data the run was trained on"
        )
    val = load_split(data_dir, "val")
    model = build_model(cfg, manifest, is_pair_split(val))
    state, meta = load_weights(run_dir / WEIGHTS_NAME)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise DiagnoseError(f"{run_dir / WEIGHTS_NAME}: weights do not fit the run's model: {exc}") from exc
    if meta.get("weights") != "best_validation":
        log.warning(
            "%s holds the %s weights, not best-validation ones", run_dir / WEIGHTS_NAME, meta.get("weights")
        )
    return model.eval(), metrics, val


def diagnose_run(
    run_dir: Path,
    data_dir: Path,
    examples: int = 32,
    batch_size: int = 8,
    amplification_examples: int = AMPLIFICATION_EXAMPLES,
) -> pd.DataFrame:
    """The diagnostics table of one run (COLUMNS), on its first `examples` validation examples; the
    insertion effects on the logits (LOGIT_QUANTITIES) on the first `amplification_examples` of them. A run
    that diverged or holds non-finite weights is not measured: its table is one SKIPPED row saying why."""
    import numpy as np
    import pandas as pd
    import torch

    metrics = read_metrics(run_dir)
    reason = diverged_reason(metrics)  # before building the model, which may be what diverged
    if reason is not None:
        return skipped_run(metrics, reason)
    model, metrics, val = load_run(run_dir, data_dir)
    reason = non_finite_reason(model)
    if reason is not None:
        return skipped_run(metrics, reason)
    count = min(examples, len(val.labels))
    if count < 1:
        raise DiagnoseError(f"{data_dir}: the validation split is empty")
    recorder = _Recorder()
    model.requires_grad_(False)  # the amplification differentiates in the activations only
    for start in range(0, count, batch_size):
        batch = make_batch(val, np.arange(start, min(start + batch_size, count)), lambda t: t)
        with torch.no_grad():
            measure_batch(model, batch.tokens, batch.lengths, recorder)
        if start < amplification_examples:
            end = min(start + batch_size, count, amplification_examples)
            measure_logit_effects(model, make_batch(val, np.arange(start, end), lambda t: t).inputs, recorder)
    frame = pd.DataFrame(recorder.rows())
    for key, value in reversed(_run_keys(metrics).items()):
        frame.insert(0, key, value)
    return _with_reasons(frame[list(COLUMNS)])


def _run_keys(metrics: dict[str, Any]) -> dict[str, Any]:
    """The run's identity (RUN_KEYS) from its metrics.json; an older run without `setting` is a base one."""
    return {key: metrics.get(key, BASE_SETTING if key == "setting" else None) for key in RUN_KEYS}


def diverged_reason(metrics: dict[str, Any]) -> str | None:
    """Why a diverged run is not measured: a failed run is named, not mixed into the values (as the claims
    treat it, pdelra.results.claims), and its weights may be the last ones before the non-finite loss (when
    it diverged before any validation), whose activations are often non-finite too."""
    if metrics.get("status") != DIVERGED:
        return None
    step = metrics.get("diverged_at_step")
    return "diverged" if step is None else f"diverged at step {step}"


def non_finite_reason(model: torch.nn.Module) -> str | None:
    """Why a run with NaN/Inf parameters is not measured (every activation after them is non-finite, and the
    amplification's eigendecomposition fails on them), naming the first NAMED_WEIGHTS of them."""
    import torch

    bad = [name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if not bad:
        return None
    more = f" and {len(bad) - NAMED_WEIGHTS} more" if len(bad) > NAMED_WEIGHTS else ""
    return f"non-finite weights (NaN/Inf) in {', '.join(bad[:NAMED_WEIGHTS])}{more}"


def skipped_run(metrics: dict[str, Any], reason: str) -> pd.DataFrame:
    """A run's table when it is not measured: one row of kind SKIPPED (block NO_BLOCK, no quantity) whose
    `reason` says why, so the run is named in diagnostics.csv and the report rather than missing."""
    import pandas as pd

    row = {**_run_keys(metrics), "block": NO_BLOCK, "operator": "run", "kind": SKIPPED, "position": "run"}
    row |= {"n_examples": 0, "n_logit_examples": 0, "reason": reason}
    return _with_reasons(pd.DataFrame([row]).reindex(columns=list(COLUMNS)))


def _with_reasons(frame: pd.DataFrame) -> pd.DataFrame:
    """`reason` as text, "" where nothing was skipped (a CSV reads an empty cell back as missing)."""
    return frame.assign(reason=frame["reason"].astype(object).fillna("").astype("str"))  # all-NaN: float


def _stamp(
    run_dir: Path, data_dir: Path, examples: int, batch_size: int, amplification_examples: int
) -> dict[str, Any]:
    """What a run's cached diagnostics were measured from: when any of it changes, they are measured again."""
    weights = run_dir / WEIGHTS_NAME
    if not weights.is_file():
        raise DiagnoseError(f"{weights}: no weights file (train the run first)")
    return {
        "weights_sha256": file_digest(weights),
        "code": source_digest(),
        "data_manifest_hash": manifest_hash(data_dir),
        "examples": examples,
        "batch_size": batch_size,
        "amplification_examples": amplification_examples,
    }


def diagnose_cached(
    run_dir: Path,
    data_dir: Path,
    examples: int = 32,
    batch_size: int = 8,
    amplification_examples: int = AMPLIFICATION_EXAMPLES,
) -> tuple[pd.DataFrame, bool]:
    """(the run's diagnostics, whether they were measured now): read back from RUN_DIR/diagnostics.csv
    when RUN_DIR/diagnostics.json matches this run's stamp, measured and stored (table first, stamp last)
    otherwise."""
    import pandas as pd

    table, stamp_path = run_dir / DIAGNOSTICS_NAME, run_dir / STAMP_NAME
    stamp = _stamp(run_dir, data_dir, examples, batch_size, amplification_examples)
    try:
        if json.loads(stamp_path.read_text()) == stamp:
            return _with_reasons(pd.read_csv(table)[list(COLUMNS)]), False
    except (OSError, ValueError, KeyError):  # no or unreadable cache: measure
        pass
    frame = diagnose_run(run_dir, data_dir, examples, batch_size, amplification_examples)
    stamp_path.unlink(missing_ok=True)  # never a valid stamp beside a table being replaced
    write_text_atomic(table, frame.to_csv(index=False))
    write_json_atomic(stamp_path, stamp)
    return frame, True


def collect(paths: list[Path]) -> pd.DataFrame:
    """Concatenate per-run diagnostics tables; a file without rows (nothing measured) contributes none."""
    import pandas as pd

    frames = []
    for path in paths:
        try:
            frame = pd.read_csv(path)
        except FileNotFoundError as exc:
            raise DiagnoseError(f"{path}: no such diagnostics table") from exc
        except pd.errors.EmptyDataError:
            continue
        missing = [c for c in COLUMNS if c not in frame.columns]
        if missing:
            raise DiagnoseError(f"{path}: missing column(s) {missing}; rerun `pdelra diagnose run`")
        frames.append(frame[list(COLUMNS)])
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    return pd.concat(frames, ignore_index=True).sort_values([*RUN_KEYS, "block", "kind", "operator"])


def write_table(paths: list[Path], out: Path) -> pd.DataFrame:
    """`pdelra diagnose table`: the per-run tables `collect`ed into the CSV `out` (atomically); the partial
    report builds its diagnostics with it too (pdelra.steps.parts)."""
    frame = collect(paths)
    write_text_atomic(out, frame.to_csv(index=False))
    log.info("%d rows from %d run(s) written to %s", len(frame), len(paths), out)
    return frame


def write_tables(paths: list[Path], tables: Path) -> None:
    """`write_table` into the tables folder, as the rule `diagnostics_table` does (pdelra.steps.parts)."""
    write_table(paths, tables / "diagnostics.csv")


# ----------------------------------------------------------------------------------------------------------
# Command line


def run_command(args: argparse.Namespace) -> int:
    """`pdelra diagnose run` (declared in pdelra.steps.cli)."""
    if args.examples < 1 or args.batch_size < 1:
        raise DiagnoseError("--examples and --batch-size must be ≥ 1")
    if args.amplification_examples < 0:
        raise DiagnoseError("--amplification-examples must be ≥ 0")
    if args.num_threads:
        import torch

        torch.set_num_threads(args.num_threads)
    import pandas as pd

    frames, measured = [], 0
    for number, run_dir in enumerate(args.run_dirs, 1):
        frame, fresh = diagnose_cached(
            run_dir, args.data, args.examples, args.batch_size, args.amplification_examples
        )
        frames.append(frame)
        measured += fresh
        log.info("%d/%d %s: %s", number, len(args.run_dirs), run_dir, "measured" if fresh else "unchanged")
        if (frame["kind"] == SKIPPED).any():
            log.warning("%s: not diagnosed: %s", run_dir, frame["reason"].iloc[0])
    table = pd.concat(frames, ignore_index=True)
    write_text_atomic(args.out, table.to_csv(index=False))
    log.info(
        "%d diagnostics rows of %d run(s) (%d measured, %d unchanged) written to %s",
        len(table), len(frames), measured, len(frames) - measured, args.out,
    )  # fmt: skip
    return 0


def table_command(args: argparse.Namespace) -> int:
    """`pdelra diagnose table`."""
    write_table(args.tables, args.out)
    return 0
