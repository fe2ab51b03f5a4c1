"""Benchmark: one Continuous-Time Attention block as its authors run it, forward only, against the same block
without the PDE refinement.

The block is theirs (pdelra.nn.cta_official): a post-LN `nn.TransformerEncoderLayer` followed by `--steps`
refinement steps of `--kind` (`PDERefinement`, official initial α and β); the baseline is the encoder layer
alone. Both are timed interleaved in one process, round after round (baseline, block, baseline, …), under
`torch.inference_mode`, with bf16 autocast on CUDA when `--dtype bfloat16`; a round's ratio is the block's
time over the mean of the two baseline times around it, and the median over rounds is reported. The
official README reports 1.63× at L = 4096 on an A800 for 4 diffusion steps: the defaults are that setting
(batch 1, L 4096, d 512, 8 heads, FFN 2048, bf16, 4 steps). `--compile` also times both through
`torch.compile`. It has no goal of its own: the ratio is a figure to set beside the official one.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
from pathlib import Path
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.bench.args import non_negative_int, positive_int
from pdelra.bench.train_step import _resolve_device, _timer, interleaved

log = logging.getLogger(__name__)

OFFICIAL_RATIO = 1.63  # the official README: block latency with 4 diffusion steps at L = 4096 (A800)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--length", type=positive_int, default=4096, help="sequence length L")
    parser.add_argument("--d-model", type=positive_int, default=512)
    parser.add_argument("--heads", type=positive_int, default=8)
    parser.add_argument("--d-mlp", type=positive_int, default=2048, help="the encoder layer's FFN width")
    parser.add_argument("--steps", type=positive_int, default=4, help="PDE refinement steps after the layer")
    parser.add_argument(
        "--kind", default="diffusion", help="diffusion, wave, reaction-diffusion or advection-diffusion"
    )
    parser.add_argument(
        "--dtype", choices=["float32", "bfloat16"], default="bfloat16", help="autocast on CUDA"
    )
    parser.add_argument("--compile", action="store_true", help="also time both through torch.compile")
    parser.add_argument(
        "--rounds", type=positive_int, default=20, help="interleaved rounds; the median is reported"
    )
    parser.add_argument("--warmup", type=non_negative_int, default=3, help="untimed rounds first")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")


def run(args: argparse.Namespace) -> int:
    import torch

    from pdelra.nn.cta_official import KINDS, PDERefinement

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
