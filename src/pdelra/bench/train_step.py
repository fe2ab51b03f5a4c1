"""Benchmark: cost of PDE diffusion in a full train step (forward + backward + AdamW) of the ListOps model.

What it measures and its options: TRAIN_STEP_DESCRIPTION and add_train_step_arguments in pdelra.bench.cli
(`pdelra bench train-step --help`).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.bench.cli import TRAIN_STEP_DESCRIPTION, add_train_step_arguments
from pdelra.nn.model import SCALES, VARIANTS, LRAClassifier, ModelConfig
from pdelra.nn.ops import DiffusionLayer
from pdelra.paper import POSITIONS
from pdelra.runs import BASELINE, MAIN_SCALE

log = logging.getLogger(__name__)


def _goal(variant: str, scale: str) -> float | None:
    if variant == "after_embedding":
        return 1.01
    if variant in POSITIONS:
        return 1.06 if scale == "multi" else 1.03
    return None


def _resolve_device(name: str) -> Any:
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _timer(device: Any, work: Callable[[], None], clock: str = "wall") -> Callable[[], float]:
    """A callable that runs `work` once and returns its time in seconds (synchronising CUDA)."""
    import torch

    now = time.process_time if clock == "cpu" else time.perf_counter

    def timed() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = now()
        work()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return now() - start

    return timed


def interleaved(
    baseline: Callable[[], float], timers: dict[str, Callable[[], float]], rounds: int, warmup: int
) -> tuple[list[float], dict[str, list[float]], dict[str, list[float]]]:
    """Time `baseline` and each timer round after round (baseline, A, baseline, B, baseline, …): (the
    baseline's times, each timer's times, each timer's ratios to the mean of the two baseline times around
    it), over the `rounds` after `warmup` untimed ones."""
    base_times: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in timers}
    ratios: dict[str, list[float]] = {name: [] for name in timers}
    for round_no in range(warmup + rounds):
        timed = round_no >= warmup
        before = baseline()
        for name, timer in timers.items():
            t = timer()
            after = baseline()
            if timed:
                base_times.append(after)
                times[name].append(t)
                ratios[name].append(t / ((before + after) / 2))
            before = after
    return base_times, times, ratios


def _train_step(
    args: argparse.Namespace,
    device: Any,
    batch: tuple[Any, Any, Any],
    variant: str,
    scale: str,
    path: str = "eager",
):
    """A timed forward + backward + AdamW step of the Table 8 ListOps model for one variant."""
    import torch

    tokens, lengths, labels = batch
    cfg = ModelConfig(
        vocab_size=16,
        num_classes=10,
        max_length=tokens.shape[1],
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        d_mlp=args.d_mlp,
        variant=variant,
        scale=scale,
        fused_diffusion=path in ("fused", "compiled"),
    )
    torch.manual_seed(args.seed)
    model = LRAClassifier(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=1e-5)
    # As the trainer compiles it (pdelra.training.runner): the module wrapped, dynamic shapes.
    forward = torch.compile(model, dynamic=True) if path == "compiled" else model

    def work() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            logits = forward(tokens, lengths)
        loss = torch.nn.functional.cross_entropy(logits.float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return _timer(device, work, args.clock)


def _layer_alone(
    args: argparse.Namespace, device: Any, batch: tuple[Any, Any, Any], scale: str, path: str = "eager"
):
    """A timed forward + backward of one DiffusionLayer at the model's activation shape."""
    import torch

    tokens, lengths, _ = batch
    layer = DiffusionLayer(args.d_model, SCALES[scale], fused=path != "eager").to(device)
    x = torch.randn(*tokens.shape, args.d_model, device=device, requires_grad=True)
    grad = torch.randn_like(x)
    return _timer(device, lambda: layer(x, lengths).backward(grad), args.clock)


def _bench_length(args: argparse.Namespace, device: Any, length: int) -> list[dict[str, Any]]:
    import torch

    gen = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(1, 16, (args.batch_size, length), generator=gen)
    if args.ragged:
        lengths = torch.randint(length // 2, length + 1, (args.batch_size,), generator=gen)
    else:
        lengths = torch.full((args.batch_size,), length)
    labels = torch.randint(0, 10, (args.batch_size,), generator=gen)
    batch = (tokens.to(device), lengths.to(device), labels.to(device))

    cases = [(v, s, p) for v in args.variants for s in args.scales for p in args.paths]
    baseline = _train_step(args, device, batch, BASELINE, MAIN_SCALE)
    steps = {case: _train_step(args, device, batch, *case) for case in cases}
    layers = {(s, p): _layer_alone(args, device, batch, s, p) for s in args.scales for p in args.paths}
    ratios: dict[tuple[str, str, str], list[float]] = {case: [] for case in cases}
    layer_times: dict[tuple[str, str], list[float]] = {key: [] for key in layers}
    none_times: list[float] = []
    total = args.warmup + args.rounds
    for round_no in range(total):
        timed = round_no >= args.warmup
        before = baseline()
        for case in cases:  # none, A, none, B, none, …: each ratio against its two neighbours
            t = steps[case]()
            after = baseline()
            if timed:
                ratios[case].append(t / ((before + after) / 2))
                none_times.append(after)
            before = after
        for key, layer in layers.items():
            t = layer()
            if timed:
                layer_times[key].append(t)
        log.info("L=%d: round %d/%d done (none step %.3f s)", length, round_no + 1, total, before)

    none_median = statistics.median(none_times)
    kind = "ragged" if args.ragged else "full"
    print(
        f"\nL={length}, batch {args.batch_size}, {kind} lengths, {device.type}, {args.rounds} rounds, "
        f"{torch.get_num_threads()} threads, {args.clock} clock, autocast {args.autocast}: "
        f"none step median {none_median * 1e3:.1f} ms"
    )
    print(f"{'variant':<18}{'scale':<7}{'path':<7}{'ratio':>7}{'min':>7}{'max':>7}{'goal':>7}  met")
    results: list[dict[str, Any]] = []
    for (variant, scale, path), values in ratios.items():
        ratio, goal = statistics.median(values), _goal(variant, scale)
        met = "" if goal is None else ("yes" if ratio <= goal else "NO")
        goal_text = "" if goal is None else f"{goal:.2f}"
        print(
            f"{variant:<18}{scale:<7}{path:<7}{ratio:>7.3f}{min(values):>7.3f}{max(values):>7.3f}{goal_text:>7}"
            f"  {met}"
        )
        results.append(
            {
                "length": length,
                "variant": variant,
                "scale": scale,
                "path": path,
                "ratio": ratio,
                "ratios": values,
                "goal": goal,
                "none_median_s": none_median,
            }
        )
    for (scale, path), values in layer_times.items():
        layer_median = statistics.median(values)
        share = layer_median / none_median
        print(
            f"diffusion layer alone ({scale}, {path}): {layer_median * 1e3:.2f} ms = {100 * share:.2f} % "
            f"of a none step; × {args.n_layers} blocks = {100 * args.n_layers * share:.1f} %"
        )
        results.append(
            {"length": length, "layer_alone": scale, "path": path, "median_s": layer_median, "share": share}
        )
    return results


def run(args: argparse.Namespace) -> int:
    import torch

    for name in args.variants:
        if name not in VARIANTS or name == BASELINE:
            raise SystemExit(
                f"--variants: {name!r} is not a diffusion variant; choose from {', '.join(VARIANTS)}"
            )
    for scale in args.scales:
        if scale not in SCALES:
            raise SystemExit(f"--scales: unknown scale {scale!r}; choose from {', '.join(SCALES)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = _resolve_device(args.device)
    results = [row for length in args.lengths for row in _bench_length(args, device, length)]
    if args.json is not None:
        info = {
            "batch_size": args.batch_size,
            "ragged": args.ragged,
            "device": device.type,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "rounds": args.rounds,
            "autocast": args.autocast,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        }
        write_json_atomic(args.json, {**info, "results": results})
        log.info("wrote %s", args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="benchmarks/train_step.py",
        description=TRAIN_STEP_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_train_step_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    return run(args)
