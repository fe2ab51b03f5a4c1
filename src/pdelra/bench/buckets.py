"""Benchmark: train-step time with length-bucketed batches against the plain shuffle, same model and data.

What it measures and its options: BUCKETS_DESCRIPTION and add_buckets_arguments in pdelra.bench.cli
(`pdelra bench buckets --help`).
"""

from __future__ import annotations

import argparse
import logging
import statistics
from types import SimpleNamespace
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.bench.train_step import _resolve_device, _timer
from pdelra.nn.model import LRAClassifier, ModelConfig
from pdelra.runs import BASELINE, MAIN_SCALE
from pdelra.training import batches as B

log = logging.getLogger(__name__)


def _split(args: argparse.Namespace) -> SimpleNamespace:
    """Lengths only; tokens are made per batch (the split would not fit in memory at paper sizes)."""
    import numpy as np

    rng = np.random.default_rng(args.seed)
    lengths = rng.integers(args.min_length, args.max_length + 1, size=args.examples)
    return SimpleNamespace(labels=np.zeros(args.examples), lengths=lengths, tokens2=None, lengths2=None)


def _stratified(order: Any, lengths: Any, size: int, count: int) -> list[Any]:
    """`count` full batches of `order` at evenly spaced quantiles of their trimmed width: their mean step
    time estimates the epoch's mean with far less spread than random picks (bucketed widths vary 4x)."""
    import numpy as np

    batches = [order[begin : begin + size] for begin in range(0, len(order) - size + 1, size)]
    by_width = np.argsort([int(lengths[rows].max()) for rows in batches], kind="stable")
    quantiles = ((np.arange(count) + 0.5) / count * len(batches)).astype(int)
    return [batches[by_width[q]] for q in quantiles]


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    device = _resolve_device(args.device)
    split = _split(args)
    cfg = ModelConfig(
        vocab_size=16,
        num_classes=10,
        max_length=args.max_length,
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        d_mlp=args.d_mlp,
        variant=BASELINE,
        scale=MAIN_SCALE,
    )
    torch.manual_seed(args.seed)
    model = LRAClassifier(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=1e-5)
    gen = torch.Generator().manual_seed(args.seed)

    def step_on(rows: np.ndarray) -> Any:
        lengths = torch.from_numpy(np.asarray(split.lengths[rows], dtype=np.int64))
        tokens = torch.randint(1, 16, (len(rows), int(lengths.max())), generator=gen)
        labels = torch.randint(0, 10, (len(rows),), generator=gen)
        tokens, lengths, labels = tokens.to(device), lengths.to(device), labels.to(device)

        def work() -> None:
            loss = torch.nn.functional.cross_entropy(model(tokens, lengths).float(), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return _timer(device, work, args.clock)

    size, lengths = args.batch_size, [split.lengths]
    ratios, padding = [], {"plain": [], "bucketed": []}
    for round_no in range(args.warmup + args.rounds):
        orders = {
            "plain": B.train_order(split, args.seed, round_no, size),
            "bucketed": B.train_order(split, args.seed, round_no, size, args.buckets),
        }
        rows = {kind: _stratified(order, split.lengths, size, args.batches) for kind, order in orders.items()}
        times = {"plain": 0.0, "bucketed": 0.0}
        for plain_rows, bucketed_rows in zip(rows["plain"], rows["bucketed"], strict=True):
            times["plain"] += step_on(plain_rows)()
            times["bucketed"] += step_on(bucketed_rows)()
        if round_no >= args.warmup:
            ratios.append(times["bucketed"] / times["plain"])
            for kind in padding:
                padding[kind].append(B.padding_ratio(lengths, np.concatenate(rows[kind]), size))
        log.info("round %d: bucketed/plain %.3f", round_no + 1, times["bucketed"] / times["plain"])

    epoch = {
        kind: B.padding_ratio(lengths, B.train_order(split, args.seed, 0, size, buckets), size)
        for kind, buckets in (("plain", None), ("bucketed", args.buckets))
    }
    result = {
        "device": str(device),
        "threads": torch.get_num_threads(),
        "lengths": [args.min_length, args.max_length],
        "examples": args.examples,
        "batch_size": size,
        "buckets": args.buckets,
        "rounds": args.rounds,
        "batches_per_round": args.batches,
        "step_time_ratio_median": statistics.median(ratios),
        "step_time_ratios": ratios,
        "padding_timed_batches": {kind: statistics.median(v) for kind, v in padding.items()},
        "padding_epoch": epoch,
    }
    print(
        f"lengths {args.min_length}-{args.max_length}, batch {size}, {args.buckets} buckets, {device.type}, "
        f"{result['threads']} threads, {args.rounds} rounds of {args.batches} batches each, "
        f"{args.clock} clock"
    )
    print(
        f"step time bucketed / plain: median {result['step_time_ratio_median']:.3f} "
        f"(rounds {', '.join(f'{r:.3f}' for r in ratios)})"
    )
    print(
        f"padding ÷ real tokens, one epoch: plain {epoch['plain']:.3f}, bucketed {epoch['bucketed']:.3f}; "
        f"batches timed (median over rounds): plain {result['padding_timed_batches']['plain']:.3f}, "
        f"bucketed {result['padding_timed_batches']['bucketed']:.3f}"
    )
    if args.json is not None:
        write_json_atomic(args.json, result)
    return 0
