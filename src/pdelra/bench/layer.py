"""Benchmark: the diffusion layer alone (forward + backward) against a bare nn.LayerNorm of the same shape.

What it measures and its options: LAYER_DESCRIPTION and add_layer_arguments in pdelra.bench.cli
(`pdelra bench layer --help`).
"""

from __future__ import annotations

import argparse
import logging
import statistics
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.bench.train_step import _resolve_device, _timer, interleaved
from pdelra.nn.cta_official import KINDS, PDERefinement
from pdelra.nn.model import SCALES
from pdelra.nn.ops import DiffusionLayer

log = logging.getLogger(__name__)

GOALS = {"h1": 1.5, "h2": 1.5, "h4": 1.5, "multi": 2.0}


def _bench_shape(args: argparse.Namespace, device: Any, shape: tuple[int, int, int]) -> list[dict[str, Any]]:
    import torch

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
