"""Timing a task's model before its jobs run (`pdelra plan`): one task's baseline model timed on random
tokens, on a GPU at the whole batch and max_length (its allocator peak measured), on a CPU with the jobs'
own threads at the fixed cost, batch 1 and the job's batch (or the largest that takes 2 s) at the mean
trimmed batch length; and the cache key that says when a calibration can be reused."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pdelra import tasks
from pdelra.nn.model import LRAClassifier, ModelConfig
from pdelra.planning.cli import (
    CPU_STEP_BUDGET_S,
    MAX_TIMED_STEPS,
    MIN_TIMED_S,
    WARMUP_STEPS,
)
from pdelra.runs import BASELINE, MAIN_SCALE


def calibrate(
    task: str,
    data: Mapping[str, Any],
    model_cfg: Mapping[str, Any],
    batch_size: int,
    device: Any,
    steps: int,
    max_calibration_batch: int | None,
    fused: bool,
    warmup: int = WARMUP_STEPS,
    budget_s: float = CPU_STEP_BUDGET_S,
) -> dict[str, Any]:
    """Seconds per train step of the task's baseline model at the job's batch size, on random tokens of
    `calibration_length(data)`, with torch's current threads (the caller sets them).

    Each batch size timed runs `warmup` untimed steps, then `steps` timed ones, whose median counts. On a
    GPU: the job's batch (at most `max_calibration_batch`), halved until it fits, scaled up linearly. On the
    CPU: `cpu_timing` (a step's fixed cost, and the largest batch within `budget_s` a step, its cost beyond
    the fixed one scaled to the job's batch). Also: the peak memory estimate (bytes; CUDA: measured
    allocator peak, CPU: not measured), the batches timed, and the fixed part of a step (`fixed_s`, which
    a job's other batch size does not scale).
    """
    import torch

    model, opt, cfg = _baseline_model(task, data, model_cfg, fused, device)
    params = sum(p.numel() for p in model.parameters())
    length = calibration_length(data)
    cap = batch_size if max_calibration_batch is None else max(1, min(batch_size, max_calibration_batch))

    def timed(batch: int, width: int = length) -> tuple[float, int | None]:
        times, peak = _time_steps(model, opt, cfg, batch, width, device, steps, warmup)
        return step_time(times), peak

    if device.type == "cpu":
        timing = cpu_timing(lambda batch, width: timed(batch, width)[0], batch_size, cap, length, budget_s)
        peak_full = None
    else:
        timing, peak = _gpu_timing(timed, opt, batch_size, cap)
        static = params * 16  # weights, gradients, two AdamW moments (float32)
        peak_full = None if peak is None else static + (peak - static) * batch_size / timing["measured_batch"]
    return {
        **timing,
        "batch_size": batch_size,
        "length": length,
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "peak_memory_bytes": peak_full,
        "parameters": params,
        "two_tower": cfg.two_tower,
        "_device_memory": torch.cuda.get_device_properties(device).total_memory
        if device.type == "cuda"
        else None,
    }


def _baseline_model(
    task: str, data: Mapping[str, Any], model_cfg: Mapping[str, Any], fused: bool, device: Any
) -> tuple[Any, Any, Any]:
    """(model, AdamW, ModelConfig) of the task's baseline, in train mode (dropout on, as a job's)."""
    import torch

    keys = {k: v for k, v in model_cfg.items() if k in {f for f in ModelConfig.__dataclass_fields__}}
    keys["fused_diffusion"] = fused
    keys.pop("operators", None)  # the baseline: a config variant's operators are not part of it
    cfg = ModelConfig(
        vocab_size=int(data["vocab_size"]),
        num_classes=int(data["num_classes"]),
        max_length=int(data["max_length"]),
        variant=BASELINE,
        scale=MAIN_SCALE,
        two_tower=tasks.is_two_tower(task),
        **keys,
    )
    torch.manual_seed(0)
    model = LRAClassifier(cfg).to(device).train()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4), cfg


def calibration_length(data: Mapping[str, Any]) -> int:
    """The sequence length calibration times: the mean width of one epoch's trimmed batches where the
    processed lengths give it (`batch_length`, on the CPU), else max_length (every batch full: an upper
    bound; on a GPU also the peak memory of the widest batch, which is what must fit)."""
    return int(data.get("batch_length") or data["max_length"])


FIXED_COST_LENGTH = 1  # tokens of the one-example step that times a step's fixed cost (one token's is in it)


def cpu_timing(
    seconds_at: Callable[[int, int], float], batch_size: int, cap: int, length: int, budget_s: float
) -> dict[str, Any]:
    """Seconds per step at `batch_size` and `length` from `seconds_at(batch, length)` (a timed median), on
    the CPU.

    A step has a fixed cost (AdamW, clipping, per-layer dispatch) besides its cost per example, so the
    batch-1 time scaled by the batch overestimates it (3-8x on the demo's small models). The fixed cost is
    timed directly, as a step of one example of FIXED_COST_LENGTH tokens; then batch 1 at `length`, which
    says the largest batch up to `cap` whose step stays within `budget_s`: that batch is timed, and is the
    answer when it is the job's; else its time beyond the fixed cost is scaled to `batch_size`. (A line
    fitted through two small batches instead extrapolates their noise a hundredfold: 1.0 s and 843 s a step
    for the paper's Image and ListOps.)"""
    fixed = seconds_at(1, min(FIXED_COST_LENGTH, length))
    one = seconds_at(1, length)
    larger = min(cap, max(1, int(budget_s / max(one, 1e-9))))
    at_larger = one if larger == 1 else seconds_at(larger, length)
    fixed = min(fixed, at_larger)
    step_s = at_larger if larger == batch_size else fixed + (at_larger - fixed) * batch_size / larger
    return {
        "step_s": step_s,
        "fixed_s": fixed,
        "measured_batch": larger,
        "timed_batches": sorted({1, larger}),
    }


def _gpu_timing(
    timed: Callable[[int], tuple[float, int | None]], opt: Any, batch_size: int, cap: int
) -> tuple[dict[str, Any], int | None]:
    """Seconds per step at `batch_size` on a GPU, timed at `cap` or, while that runs out of memory, half of
    it, scaled up linearly (at the batches a GPU runs, a step's fixed cost is small); and the peak memory."""
    import torch

    micro = cap
    while True:
        try:
            seconds, peak = timed(micro)
            break
        except torch.OutOfMemoryError:
            if micro == 1:
                raise
            micro = max(1, micro // 2)
            opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
    timing = {"step_s": seconds * batch_size / micro, "fixed_s": 0.0, "measured_batch": micro}
    return {**timing, "timed_batches": [micro]}, peak


def step_time(times: list[float]) -> float:
    """The typical step of a timed series: its median, which one step slowed by another process (or a
    garbage collection) does not move, as it moves a mean."""
    if not times:
        raise ValueError("no timed steps: give at least one")
    return statistics.median(times)


def time_calls(
    call: Callable[[], None],
    steps: int,
    warmup: int,
    sync: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
    min_seconds: float = 0.0,
    max_steps: int = MAX_TIMED_STEPS,
) -> list[float]:
    """Seconds of each timed call after `warmup` untimed ones: `steps` calls, and more while they add up to
    less than `min_seconds` (at most `max_steps`): the median of five 10-ms steps moves with any burst of
    another process, that of half a second of them much less. `sync` waits for queued device work before
    each clock reading, so that a time is the call's work and not its launch."""
    for _ in range(warmup):
        call()
    times: list[float] = []
    while len(times) < steps or (sum(times) < min_seconds and len(times) < max_steps):
        sync()
        start = clock()
        call()
        sync()
        times.append(clock() - start)
    return times


# The sources a calibration exercises (besides TIMING_FUNCTIONS themselves): an edit of one of them
# times the model again.
CALIBRATED_SOURCES = ("nn/model.py", "nn/ops.py", "nn/fused.py")  # under the package root


def calibration_key(
    task: str,
    data: Mapping[str, Any],
    model_cfg: Mapping[str, Any],
    batch_size: int,
    device: Any,
    steps: int,
    max_calibration_batch: int | None,
    threads: int | None = None,
) -> str:
    """What a calibration depends on, hashed: the task's model, batch and data shape (with the batch width
    timed), the timed steps, warm-up, probe batch and CPU budget, the code (CALIBRATED_SOURCES and the timing
    functions), torch and the device (its name; on the CPU also the `threads` the timing runs with)."""
    import hashlib
    import inspect
    import platform

    import torch

    code = hashlib.sha256()
    for name in CALIBRATED_SOURCES:
        code.update(name.encode() + b"\0" + (Path(__file__).parents[1] / name).read_bytes())
    for function in TIMING_FUNCTIONS:
        code.update(inspect.getsource(function).encode())
    if device.type == "cuda":
        where = torch.cuda.get_device_name(device)
    else:
        where = f"{device.type} {platform.machine()} {platform.processor()} threads={threads}"
    identity = {
        "task": task,
        "data": {k: data.get(k) for k in ("vocab_size", "num_classes", "max_length", "batch_length")},
        "model": dict(model_cfg),
        "batch_size": batch_size,
        "steps": steps,
        "warmup": WARMUP_STEPS,
        "cpu_budget_s": CPU_STEP_BUDGET_S,
        "min_timed_s": MIN_TIMED_S,
        "max_calibration_batch": max_calibration_batch,
        "code": code.hexdigest(),
        "torch": torch.__version__,
        "device": where,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:24]


def read_cache(cache: Path | None) -> dict[str, dict[str, Any]]:
    """The cached calibrations; none when there is no cache or it cannot be read (it is only a cache)."""
    if cache is None or not cache.is_file():
        return {}
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _time_steps(
    model: Any, opt: Any, cfg: Any, batch: int, length: int, device: Any, steps: int, warmup: int
) -> tuple[list[float], int | None]:
    """The times of `steps` train steps at (batch, length) after `warmup` untimed ones, and the CUDA
    allocator's peak (None on the CPU). A step is what the trainer times (pdelra.training.runner._step):
    forward, loss and its value, backward, gradient clipping, AdamW."""
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.vocab_size, (batch, length), generator=gen).to(device)
    lengths = torch.full((batch,), length).to(device)
    labels = torch.randint(0, cfg.num_classes, (batch,), generator=gen).to(device)
    inputs = (tokens, lengths, tokens, lengths) if cfg.two_tower else (tokens, lengths)
    autocast = device.type == "cuda" and torch.cuda.is_bf16_supported()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            logits = model(*inputs)
        loss = F.cross_entropy(logits.float(), labels)
        loss.item()  # the trainer reads each step's loss (a device sync on a GPU)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # its cost, whatever the bound
        opt.step()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = time_calls(step, steps, warmup, sync, min_seconds=MIN_TIMED_S)
    peak = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None
    return times, peak


# Whose source is part of the calibration key: an edit of the timing procedure times the model again.
TIMING_FUNCTIONS = (calibrate, _baseline_model, calibration_length, cpu_timing, _gpu_timing,
                    step_time, time_calls, _time_steps)  # fmt: skip


def calibration_threads(train: Mapping[str, Any], device: Any, threads: int | None = None) -> int | None:
    """The torch threads a task is timed with on the CPU: `threads` (--threads) when given, else those its
    training jobs take (`pdelra.training.device.cpu_threads`: train.num_threads, else $SLURM_CPUS_PER_TASK,
    else the CPU affinity); None on a GPU (where the threads do not set the step time)."""
    from pdelra.training.device import cpu_threads

    if device.type != "cpu":
        return None
    return threads if threads is not None else cpu_threads(train.get("num_threads"))


def calibrated_step(calibration: Mapping[str, Any], batch_size: int) -> float:
    """A calibration's seconds per step at a job's `batch_size` (a setting may change it): its fixed part
    as timed, its part per example scaled by the batch."""
    fixed = min(float(calibration.get("fixed_s", 0.0)), calibration["step_s"])  # older caches: all scaled
    return fixed + (calibration["step_s"] - fixed) * batch_size / calibration["batch_size"]
