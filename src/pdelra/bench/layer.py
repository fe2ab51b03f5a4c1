"""Benchmark: the diffusion layer alone (forward + backward) against a bare nn.LayerNorm of the same shape.

For each shape (B, L, d) and scale, three things are timed interleaved in one process, round after round
(LayerNorm, eager layer, LayerNorm, fused layer, LayerNorm, …): a bare `nn.LayerNorm(d)`, the eager reference
`DiffusionLayer(fused=False)` and the fused operator `DiffusionLayer(fused=True)`, each forward + backward
with a fixed output gradient. Each layer's ratio in a round is its time over the mean of the two LayerNorm
times around it; the median over rounds is reported. Warm-up rounds (untimed) compile the fused operator.

Goals: fused ≤ 1.5× LayerNorm at one scale, ≤ 2× at multi-scale.

`--official KIND ...` also times the Continuous-Time Attention authors' operator (`pdelra.nn.cta_official`,
one refinement step, official initial α and β) in the same rounds: eager, and compiled by `torch.compile`
(what `train.compile: true` does to it). It takes the lengths only when they are ragged, as in the model (full
batches carry no mask). It has no goal; its rows carry the kind in the scale column (`official-KIND`).
"""

from __future__ import annotations

import argparse
import logging
import statistics
from pathlib import Path
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.bench.args import non_negative_int, positive_int
from pdelra.bench.train_step import _resolve_device, _timer, interleaved

log = logging.getLogger(__name__)

GOALS = {"h1": 1.5, "h2": 1.5, "h4": 1.5, "multi": 2.0}


def _shape(text: str) -> tuple[int, int, int]:
    try:
        b, n, d = (int(v) for v in text.lower().split("x"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"shape must be BxLxD, e.g. 4x1024x128; got {text!r}") from exc
    if min(b, n, d) < 1:
        raise argparse.ArgumentTypeError(f"shape BxLxD needs positive sizes, got {text!r}")
    return b, n, d


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shapes", type=_shape, nargs="+", default=[(4, 1024, 128), (32, 2048, 128)], help="BxLxD shapes"
    )
    parser.add_argument("--scales", nargs="+", default=["h1", "multi"], help="scales (h1 h2 h4 multi)")
    parser.add_argument(
        "--rounds", type=positive_int, default=15, help="interleaved rounds; the median is reported"
    )
    parser.add_argument("--warmup", type=non_negative_int, default=2, help="untimed rounds first")
    parser.add_argument("--ragged", action="store_true", help="random lengths in [L/2, L] instead of full")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="activations")
    parser.add_argument(
        "--threads", type=positive_int, default=None, help="torch threads (default: torch's choice)"
    )
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="wall or process CPU time")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument(
        "--official",
        nargs="+",
        default=[],
        metavar="KIND",
        help="also time the CTA authors' operator of these kinds (diffusion wave reaction-diffusion "
        "advection-diffusion), eager and compiled",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")


def _bench_shape(args: argparse.Namespace, device: Any, shape: tuple[int, int, int]) -> list[dict[str, Any]]:
    import torch

    from pdelra.nn.cta_official import KINDS, PDERefinement
    from pdelra.nn.model import SCALES
    from pdelra.nn.ops import DiffusionLayer

    unknown = [kind for kind in args.official if kind not in KINDS]
    if unknown:
        raise SystemExit(f"--official: unknown kind {unknown[0]!r}; choose from {', '.join(KINDS)}")
    b, n, d = shape
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(b, n, d, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    grad = torch.randn(b, n, d, generator=gen).to(device=device, dtype=dtype)
    if args.ragged:
        lengths = torch.randint(n // 2, n + 1, (b,), generator=gen).to(device)
    else:
        lengths = torch.full((b,), n, device=device)
    norm = torch.nn.LayerNorm(d).to(device=device, dtype=dtype)
    layernorm = _timer(device, lambda: norm(x).backward(grad), args.clock)
    timers = {}
    for scale in args.scales:
        for fused in (False, True):
            layer = DiffusionLayer(d, SCALES[scale], fused=fused).to(device)
            if dtype != torch.float32:
                layer.norm.to(dtype)  # α stays float32 (StepSizes), as in the model under autocast
            timers[f"{'fused' if fused else 'eager'}:{scale}"] = _timer(
                device, lambda layer=layer: layer(x, lengths).backward(grad), args.clock
            )
    official_lengths = lengths if args.ragged else None
    for kind in args.official:
        op = PDERefinement(kind, steps=1).to(device)
        for path, fn in (("eager", op), ("compiled", torch.compile(op))):
            timers[f"{path}:official-{kind}"] = _timer(
                device, lambda fn=fn: fn(x, official_lengths).backward(grad), args.clock
            )
    ln_times, times, ratios = interleaved(layernorm, timers, args.rounds, args.warmup)
    ln_median = statistics.median(ln_times)
    print(
        f"\n(B, L, d) = {shape}, {args.dtype}, {'ragged' if args.ragged else 'full'} lengths, {device.type}, "
        f"{torch.get_num_threads()} threads, {args.rounds} rounds, {args.clock} clock: "
        f"LayerNorm fwd+bwd median {ln_median * 1e3:.3f} ms"
    )
    wide = max(7, *(len(name.split(":")[1]) + 1 for name in ratios))  # official-advection-diffusion
    print(f"{'path':<9}{'scale':<{wide}}{'ms':>9}{'ratio':>8}{'min':>7}{'max':>7}{'goal':>6}  met")
    rows: list[dict[str, Any]] = []
    for name, values in ratios.items():
        path, scale = name.split(":")
        ratio, goal = statistics.median(values), GOALS.get(scale)
        met = "" if path != "fused" or goal is None else ("yes" if ratio <= goal else "NO")
        median_ms = statistics.median(times[name]) * 1e3
        print(
            f"{path:<9}{scale:<{wide}}{median_ms:>9.3f}{ratio:>8.2f}{min(values):>7.2f}{max(values):>7.2f}"
            f"{'—' if goal is None else f'{goal:.1f}':>6}  {met}"
        )
        rows.append(
            {
                "shape": list(shape),
                "path": path,
                "scale": scale,
                "median_s": median_ms / 1e3,
                "layernorm_median_s": ln_median,
                "ratio": ratio,
                "ratios": values,
                "goal": goal,
                "met": None if path != "fused" else ratio <= (goal or float("inf")),
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    import torch

    from pdelra.nn.model import SCALES

    for scale in args.scales:
        if scale not in SCALES:
            raise SystemExit(f"--scales: unknown scale {scale!r}; choose from {', '.join(SCALES)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = _resolve_device(args.device)
    rows = [row for shape in args.shapes for row in _bench_shape(args, device, shape)]
    if args.json is not None:
        info = {
            "device": device.type,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "dtype": args.dtype,
            "ragged": args.ragged,
            "rounds": args.rounds,
            "clock": args.clock,
        }
        write_json_atomic(args.json, {**info, "results": rows})
        log.info("wrote %s", args.json)
    return 0
