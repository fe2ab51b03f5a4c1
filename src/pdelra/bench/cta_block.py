"""Benchmark: one Continuous-Time Attention block as its authors run it, forward only, against the same block
without the PDE refinement.

What it measures and its options: CTA_BLOCK_DESCRIPTION and add_cta_block_arguments in pdelra.bench.cli
(`pdelra bench cta-block --help`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.bench.train_step import _resolve_device, _timer, interleaved
from pdelra.nn.cta_official import KINDS, PDERefinement

log = logging.getLogger(__name__)

OFFICIAL_RATIO = 1.63  # the official README: block latency with 4 diffusion steps at L = 4096 (A800)


def run(args: argparse.Namespace) -> int:
    import torch

    if args.kind not in KINDS:
        raise SystemExit(f"--kind: unknown kind {args.kind!r}; choose from {', '.join(KINDS)}")
    if args.d_model % args.heads:
        raise SystemExit(f"--d-model {args.d_model} must be divisible by --heads {args.heads}")
    device = _resolve_device(args.device)
    torch.manual_seed(args.seed)
    layer = torch.nn.TransformerEncoderLayer(args.d_model, args.heads, args.d_mlp, 0.0, batch_first=True)
    refine = PDERefinement(args.kind, args.steps)
    layer, refine = layer.to(device).eval(), refine.to(device).eval()
    x = torch.randn(args.batch_size, args.length, args.d_model, device=device)  # (B, L, d)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16)
        if device.type == "cuda" and args.dtype == "bfloat16"
        else contextlib.nullcontext()
    )

    def baseline_fn(h: Any) -> Any:
        return layer(h)

    def block_fn(h: Any) -> Any:
        return refine(layer(h))  # (B, L, d): the official block = encoder layer, then its PDE steps

    paths = {"eager": (baseline_fn, block_fn)}
    if args.compile:
        paths["compiled"] = (torch.compile(baseline_fn), torch.compile(block_fn))
    rows = []
    print(
        f"CTA block, forward only: B {args.batch_size}, L {args.length}, d {args.d_model}, "
        f"{args.heads} heads, FFN {args.d_mlp}, {args.steps} {args.kind} steps, {args.dtype}, {device.type}, "
        f"{args.rounds} rounds"
    )
    print(f"{'path':<10}{'baseline ms':>12}{'block ms':>10}{'ratio':>8}{'min':>7}{'max':>7}  official")
    with torch.inference_mode(), autocast:
        for path, (base, block) in paths.items():
            base_times, times, ratios_of = interleaved(
                _timer(device, lambda base=base: base(x)),
                {"block": _timer(device, lambda block=block: block(x))},
                args.rounds,
                args.warmup,
            )
            block_times, ratios = times["block"], ratios_of["block"]
            row = {
                "path": path,
                "baseline_median_s": statistics.median(base_times),
                "block_median_s": statistics.median(block_times),
                "ratio": statistics.median(ratios),
                "ratios": ratios,
            }
            rows.append(row)
            print(
                f"{path:<10}{row['baseline_median_s'] * 1e3:>12.3f}{row['block_median_s'] * 1e3:>10.3f}"
                f"{row['ratio']:>8.2f}{min(ratios):>7.2f}{max(ratios):>7.2f}  {OFFICIAL_RATIO:.2f}"
            )
    if args.json is not None:
        settings = {
            k: getattr(args, k) for k in ("batch_size", "length", "d_model", "heads", "d_mlp", "steps")
        }
        info = {
            "device": device.type,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "dtype": args.dtype,
            "kind": args.kind,
            **settings,
            "official_ratio": OFFICIAL_RATIO,
        }
        write_json_atomic(args.json, {**info, "results": rows})
        log.info("wrote %s", args.json)
    return 0
