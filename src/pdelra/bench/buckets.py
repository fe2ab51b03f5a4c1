"""Benchmark: train-step time with length-bucketed batches against the plain shuffle, same model and data.

A synthetic split with lengths drawn uniformly from [--min-length, --max-length] (ListOps-like by default:
500-2,000 tokens) is batched two ways each round: the plain seeded shuffle and `train.length_buckets`
(pdelra.training.batches). The same number of batches of each is timed, interleaved (plain, bucketed,
plain, …), each batch trimmed to its longest sequence as the trainer does, picked at evenly spaced quantiles
of the epoch's batch widths (so their mean estimates the epoch's mean step); a round's ratio is its bucketed
time over its plain time, and the median over rounds is reported with the padding (padding ÷ real tokens)
of the batches timed and of the whole epoch. The model is Table 8's ListOps model (baseline).
"""

from __future__ import annotations

import argparse
import logging
import statistics
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.bench.train_step import _resolve_device, _timer

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--min-length", type=int, default=500, help="shortest sequence (ListOps: 500)")
    parser.add_argument("--max-length", type=int, default=2000, help="longest sequence (ListOps: 2,000)")
    parser.add_argument("--examples", type=int, default=4096, help="examples in the synthetic split")
    parser.add_argument("--batch-size", type=int, default=8, help="batch size (default 8: fits a CPU)")
    parser.add_argument("--buckets", type=int, default=8, help="train.length_buckets")
    parser.add_argument("--batches", type=int, default=4, help="batches of each kind timed per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is reported")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="wall or process CPU time")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    # Table 8, ListOps.
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--n-layers", type=int, default=6)
    parser.add_argument("--n-heads", type=int, default=8)
    parser.add_argument("--d-mlp", type=int, default=512)


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

    from pdelra.nn.model import LRAClassifier, ModelConfig
    from pdelra.training import batches as B

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
        variant="none",
        scale="h1",
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
