"""Benchmark: ListOps runs per hour when K training processes share one GPU (`resources.pack: K`).

What it measures and its options: PACK_DESCRIPTION and add_pack_arguments in pdelra.bench.cli
(`pdelra bench pack --help`).
"""

from __future__ import annotations

import argparse
import logging
import math
import queue
import time
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.bench.train_step import _resolve_device, _train_step

log = logging.getLogger(__name__)

LISTOPS_TRAIN_EXAMPLES = 96_000  # the published split (pdelra.planning.estimate.PUBLISHED_COUNTS)
ANSWER_WAIT_S = 600  # beyond --seconds: start-up, compilation and warm-up of a process


def _worker(args: argparse.Namespace, rank: int, barrier: Any, results: Any) -> None:
    """One process of a pack: warm up, wait for the others, count steps for `args.seconds`."""
    try:
        import torch

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
