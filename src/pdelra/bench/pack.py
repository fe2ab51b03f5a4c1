"""Benchmark: ListOps runs per hour when K training processes share one GPU (`resources.pack: K`).

For each K (`--packs`, default 1 2 4), K processes each build the Table 8 ListOps model and time its full
train step (forward + backward + AdamW, as `pdelra bench train-step` does) at `--length` and
`--batch-size`; after `--warmup` untimed steps they wait for each other, then all train side by side for
`--seconds`. Their steps per second together, over the steps of one paper ListOps run (the published
96,000 training examples / batch × `--epochs`; evaluation and early stopping left out), give runs per hour;
the gain is that over K = 1. A pack pays only where the gain is well above 1: a GPU that one run already
fills gives each of K runs 1/K of it.
"""

from __future__ import annotations

import argparse
import logging
import math
import queue
import time
from pathlib import Path
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.bench.args import non_negative_int, positive_int

log = logging.getLogger(__name__)

LISTOPS_TRAIN_EXAMPLES = 96_000  # the published split (pdelra.planning.plan.PUBLISHED_COUNTS)
ANSWER_WAIT_S = 600  # beyond --seconds: start-up, compilation and warm-up of a process


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--packs", type=positive_int, nargs="+", default=[1, 2, 4], help="K: processes at once"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="timed seconds per K (default 20)")
    parser.add_argument("--warmup", type=non_negative_int, default=3, help="untimed steps per process first")
    parser.add_argument("--length", type=positive_int, default=2000, help="sequence length (Table 8: 2000)")
    parser.add_argument("--batch-size", type=positive_int, default=256, help="batch (Table 8: 256)")
    parser.add_argument("--epochs", type=positive_int, default=50, help="epochs of one run (config: 50)")
    parser.add_argument(
        "--variant", default="after_embedding", help="the diffusion position (default after_embedding)"
    )
    parser.add_argument("--scale", default="h1", help="h1, h2, h4 or multi")
    parser.add_argument("--path", choices=["eager", "fused"], default="fused", help="diffusion operator")
    parser.add_argument("--autocast", choices=["none", "bf16"], default="bf16", help="bf16 autocast forward")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--threads", type=positive_int, default=None, help="torch threads per process")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    # Table 8, ListOps.
    parser.add_argument("--d-model", type=positive_int, default=128)
    parser.add_argument("--n-layers", type=positive_int, default=6)
    parser.add_argument("--n-heads", type=positive_int, default=8)
    parser.add_argument("--d-mlp", type=positive_int, default=512)


def _worker(args: argparse.Namespace, rank: int, barrier: Any, results: Any) -> None:
    """One process of a pack: warm up, wait for the others, count steps for `args.seconds`."""
    try:
        import torch

        from pdelra.bench.train_step import _resolve_device, _train_step

        if args.threads:
            torch.set_num_threads(args.threads)
        device = _resolve_device(args.device)
        gen = torch.Generator().manual_seed(rank)
        batch = (
            torch.randint(1, 16, (args.batch_size, args.length), generator=gen).to(device),
            torch.full((args.batch_size,), args.length).to(device),
            torch.randint(0, 10, (args.batch_size,), generator=gen).to(device),
        )
        step_args = argparse.Namespace(**vars(args), seed=rank, clock="wall")
        step = _train_step(step_args, device, batch, args.variant, args.scale, args.path)
        for _ in range(args.warmup):
            step()
        barrier.wait()
        steps, busy, start = 0, 0.0, time.perf_counter()
        while time.perf_counter() - start < args.seconds:
            busy += step()
            steps += 1
        elapsed = time.perf_counter() - start
        peak = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None
        results.put(
            {"rank": rank, "steps": steps, "seconds": elapsed, "step_s": busy / steps, "peak_bytes": peak}
        )
    except BaseException as err:  # reported, not raised: the parent waits for every process's answer
        barrier.abort()
        results.put({"rank": rank, "error": f"{type(err).__name__}: {err}"})


def _measure(args: argparse.Namespace, k: int) -> list[dict[str, Any]]:
    """The answers of K processes trained side by side."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # CUDA cannot be forked
    barrier, results = ctx.Barrier(k), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(args, rank, barrier, results)) for rank in range(k)]
    for proc in procs:
        proc.start()
    answers: dict[int, dict[str, Any]] = {}
    try:
        while len(answers) < k:  # a process killed outright (the OOM killer) never answers
            answer = results.get(timeout=args.seconds + ANSWER_WAIT_S)
            answers[answer["rank"]] = answer
    except queue.Empty:
        for proc in procs:
            proc.kill()
    missing = {"error": f"no answer within {args.seconds + ANSWER_WAIT_S:.0f} s"}
    for proc in procs:
        proc.join()
    return [answers.get(rank, {"rank": rank, **missing}) for rank in range(k)]


def summarise(k: int, answers: list[dict[str, Any]], steps_per_run: int) -> dict[str, Any]:
    """One K's figures: steps per second of all its processes together and the runs per hour they make."""
    errors = [a["error"] for a in answers if "error" in a]
    if errors:
        return {"k": k, "error": errors[0]}
    steps_per_s = sum(a["steps"] / a["seconds"] for a in answers)
    return {
        "k": k,
        "steps_per_s": steps_per_s,
        "step_s_median": sorted(a["step_s"] for a in answers)[len(answers) // 2],
        "runs_per_hour": steps_per_s * 3600 / steps_per_run,
        "peak_gib": max((a["peak_bytes"] or 0) / 2**30 for a in answers),
    }


def run(args: argparse.Namespace) -> int:
    steps_per_run = math.ceil(LISTOPS_TRAIN_EXAMPLES / args.batch_size) * args.epochs
    rows = []
    print(
        f"ListOps {args.variant}/{args.scale} ({args.path}), L={args.length}, batch {args.batch_size}, "
        f"autocast {args.autocast}: {steps_per_run} steps a run, {args.seconds:.0f} s timed per K"
    )
    print(f"{'K':>3}{'steps/s':>10}{'s/step':>9}{'runs/h':>9}{'gain':>7}{'peak GiB':>10}")
    for k in args.packs:
        log.info("K=%d: %d process(es) side by side", k, k)
        row = summarise(k, _measure(args, k), steps_per_run)
        rows.append(row)
        if "error" in row:
            print(f"{k:>3}  failed: {row['error']}")
            continue
        base = next((r for r in rows if r["k"] == 1 and "error" not in r), None)
        gain = f"{row['runs_per_hour'] / base['runs_per_hour']:>7.2f}" if base else f"{'':>7}"
        print(f"{k:>3}{row['steps_per_s']:>10.2f}{row['step_s_median']:>9.3f}{row['runs_per_hour']:>9.3f}{gain}"
              f"{row['peak_gib']:>10.1f}")  # fmt: skip
    if args.json:
        settings = {k: v for k, v in vars(args).items() if isinstance(v, (str, int, float, list))}
        write_json_atomic(args.json, {"steps_per_run": steps_per_run, "settings": settings, "packs": rows})
    return 0
