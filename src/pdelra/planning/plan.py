"""`pdelra plan CONFIG`: what a workflow config will cost before it runs.

The jobs are the workflow's own (pdelra.planning.experiment, the expansion workflow/rules/common.smk uses).
What is counted per training rule and task, and where each number comes from (manifest, finished runs,
calibration, requested runtime; the wall-clock schedule; disk; padding), is the command's description,
`pdelra plan --help` (PLAN_DESCRIPTION in pdelra.planning.cli).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pdelra import runs as run_layout
from pdelra.atomic import write_json_atomic
from pdelra.data.generate import DEFAULTS
from pdelra.data.store import load_split
from pdelra.errors import UserError
from pdelra.nn.model import LRAClassifier, ModelConfig
from pdelra.planning import experiment
from pdelra.planning.cli import (
    CACHE_NAME,
    CPU_STEP_BUDGET_S,
    DEFAULT_RETRIES,
    DEFAULT_STEPS,
    MAX_TIMED_STEPS,
    MIN_TIMED_S,
    SLURM_PROFILE,
    WARMUP_STEPS,
)
from pdelra.planning.config_check import file_problems, with_defaults
from pdelra.results import seeds
from pdelra.runs import BASELINE, MAIN_SCALE
from pdelra.training import batches as B
from pdelra.training.schedule import planned_steps

# Published LRA split sizes (Tay et al. 2021; Pathfinder-32 split 80/10/10 and IMDb/CIFAR-10 validation carved
# out of train by preprocessing, as this project does): used only without a manifest or generate sizes.
PUBLISHED_COUNTS = {
    "listops": {"train": 96_000, "val": 2_000, "test": 2_000},
    "text": {"train": 22_500, "val": 2_500, "test": 25_000},
    "retrieval": {"train": 147_086, "val": 18_090, "test": 17_437},
    "pathfinder": {"train": 160_000, "val": 20_000, "test": 20_000},
    "image": {"train": 45_000, "val": 5_000, "test": 10_000},
}
NOMINAL_VOCAB = {"listops": 20, "text": 257, "retrieval": 257, "pathfinder": 256, "image": 256}
NOMINAL_CLASSES = {"listops": 10, "text": 2, "retrieval": 2, "pathfinder": 2, "image": 10}
EVAL_COST = 1 / 3  # an evaluation example costs about a third of a training example (forward only)
METRICS_BYTES = 50_000
REFERENCE_BUCKETS = 8  # the bucket count the padding column shows for a task that does not bucket


class PlanError(UserError, ValueError):
    """A config that cannot be planned; the message names the file and key."""


# ---------------------------------------------------------------------------------------------------------
# The config, read as the workflow reads it


def load_config(path: Path) -> dict[str, Any]:
    """The workflow config, checked as `pdelra config check` does (YAML syntax with its line, every problem
    the workflow refuses), with the schema's defaults filled in (as Snakemake's `validate(...,
    set_default=True)` does)."""
    import yaml

    problems = file_problems(path)
    if problems:
        raise PlanError(f"invalid config {path}:\n" + "\n".join(f"  - {problem}" for problem in problems))
    return with_defaults(yaml.safe_load(Path(path).read_text(encoding="utf-8")))


# ---------------------------------------------------------------------------------------------------------
# Facts per task


def task_data(config: Mapping[str, Any], task: str) -> dict[str, Any]:
    """Example counts, vocabulary, classes and max_length of a task, with where the counts came from.

    A task outside the config's LRA tasks (the LM's `lm_{corpus}`, Continuous-Time Attention's own) has no
    counts (None): its jobs are timed by finished runs or counted at their runtime."""
    if task not in config["tasks"]:
        return {"counts": None, "source": "-"}
    manifest_file = Path(config["data"]["processed_dir"]) / task / "manifest.json"
    if manifest_file.exists():
        manifest = json.loads(manifest_file.read_text())
        return {
            "counts": dict(manifest["counts"]),
            "vocab_size": int(manifest["vocab_size"]),
            "num_classes": int(manifest["num_classes"]),
            "max_length": int(manifest["max_length"]),
            "source": "manifest",
        }
    if config["data"].get("source") == "generated":
        sizes = {**DEFAULTS[task], **(config["data"].get("generate", {}).get(task) or {})}
        counts = {"train": sizes["n_train"], "val": sizes["n_val"], "test": sizes["n_test"]}
        source = "config"
    else:
        counts, source = dict(PUBLISHED_COUNTS[task]), "published"
    return {
        "counts": counts,
        "vocab_size": NOMINAL_VOCAB[task],
        "num_classes": NOMINAL_CLASSES[task],
        "max_length": int(config["tasks"][task]["max_length"]),
        "source": source,
    }


def planned_job_steps(n_train: int, train: Mapping[str, Any]) -> int:
    return planned_steps(math.ceil(n_train / train["batch_size"]), train["max_epochs"], train["max_steps"])


CellKey = tuple[str, str, str, str, str]  # (runs folder, task, variant, scale, setting)
RunFile = tuple[str, str, str, str, str, int]  # (runs folder, task, variant, scale, setting, seed)


def finished_runs(results: Path) -> dict[RunFile, dict[str, float | None]]:
    """Every finished run of every training rule under `results` (results/{experiment}): its median step time
    and wall time from its metrics.json (written when the run ends, so the workflow will not train it again),
    keyed by (runs folder, task, variant, scale, setting, seed)."""
    out: dict[RunFile, dict[str, float | None]] = {}
    for runs_dir in sorted({spec.runs_dir for spec in experiment.TRAINING_RULES.values()}):
        root = results / runs_dir
        for path in run_layout.find_run_files(root) if root.is_dir() else []:
            try:
                metrics = json.loads(path.read_text())
                key = (runs_dir, *(str(metrics[k]) for k in ("task", "variant", "scale", "setting")))
                key += (int(metrics["seed"]),)
            except (OSError, ValueError, KeyError, TypeError):
                continue  # unreadable or not a run's metrics: not evidence
            out[key] = {  # type: ignore[index]
                "step_s": _positive(metrics.get("median_step_time_s")),
                "wall_s": _positive(metrics.get("wall_time_s")),
            }
    return out


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def cell_medians(finished: Mapping[RunFile, Mapping[str, float | None]]) -> dict[CellKey, dict[str, float]]:
    """Median step time and wall time of the finished runs of each grid cell (every seed): the estimate for
    the cell's runs that have not run yet."""
    values: dict[CellKey, dict[str, list[float]]] = defaultdict(lambda: {"step_s": [], "wall_s": []})
    for key, times in finished.items():
        for name in ("step_s", "wall_s"):
            if times[name] is not None:
                values[key[:5]][name].append(times[name])  # type: ignore[arg-type]
    return {
        cell: {name: statistics.median(v) for name, v in lists.items() if v} for cell, lists in values.items()
    }


def padding_ratios(
    config: Mapping[str, Any], task: str, train: Mapping[str, Any]
) -> tuple[float, float, int]:
    """(padding ÷ real tokens of one epoch's plain batches, the same bucketed, the bucket count), from the
    processed training split's length arrays."""
    import numpy as np

    split = load_split(Path(config["data"]["processed_dir"]) / task, "train")
    lengths = [np.asarray(split.lengths)] + ([np.asarray(split.lengths2)] if B.is_pair_split(split) else [])
    size, buckets = train["batch_size"], train.get("length_buckets") or REFERENCE_BUCKETS
    plain, bucketed = B.train_order(split, 0, 0, size), B.train_order(split, 0, 0, size, buckets)
    return B.padding_ratio(lengths, plain, size), B.padding_ratio(lengths, bucketed, size), buckets


# ---------------------------------------------------------------------------------------------------------
# Time limits and the schedule


def attempts_needed(
    seconds: float, runtime_min: float, retries: int, max_runtime: float = math.inf
) -> int | None:
    """Attempts a job of `seconds` needs when attempt a may run a × runtime, at most `max_runtime`
    (`pdelra.planning.slurm_site.attempt_runtime`, what the workflow asks Slurm for), and resumes where
    the last stopped; None when even retries + 1 attempts are not enough."""
    done, attempt = 0.0, 0
    while attempt <= retries:
        attempt += 1
        done += min(attempt * runtime_min, max_runtime) * 60
        if done >= seconds:
            return attempt
    return None


def time_used(seconds: float, runtime_min: float, retries: int, max_runtime: float = math.inf) -> float:
    """Device seconds a job takes: its time, or every allowed attempt's full limit when it cannot finish."""
    if attempts_needed(seconds, runtime_min, retries, max_runtime) is not None:
        return seconds
    return sum(min(a * runtime_min, max_runtime) for a in range(1, retries + 2)) * 60


def makespan(jobs: list[tuple[float, int]], gpus: int) -> float:
    """Greedy longest-job-first list schedule of (seconds, GPUs) jobs on `gpus` GPUs: each job, longest
    first, starts when as many GPUs as it asks for (at least one, at most all) are free. Its makespan is
    within 4/3 of the optimum for one-GPU jobs (Graham 1969)."""
    free = [0.0] * gpus  # when each GPU is next free
    for seconds, asks in sorted(jobs, key=lambda job: -job[0]):
        free.sort()
        width = min(max(asks, 1), gpus)
        end = free[width - 1] + seconds
        free[:width] = [end] * width
    return max(free, default=0.0)


def slurm_retries(profile: Path = SLURM_PROFILE) -> int:
    """`retries` of the Slurm profile (the cluster's resubmissions of a failed or timed-out job)."""
    import yaml

    try:
        return int(yaml.safe_load(profile.read_text())["retries"])
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError):
        return DEFAULT_RETRIES


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
        two_tower=task == "retrieval",
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


def _read_cache(cache: Path | None) -> dict[str, dict[str, Any]]:
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


# ---------------------------------------------------------------------------------------------------------
# The plan


def stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_plan(
    config: Mapping[str, Any],
    device: Any,
    steps: int | None = None,
    max_calibration_batch: int | None = None,
    results: Path | None = None,
    calibrate_tasks: bool = True,
    gpus: int = 1,
    retries: int = DEFAULT_RETRIES,
    progress: Callable[[str], None] = stderr_progress,
    cache: Path | None = None,
    calibrate_gpu_jobs: bool = True,
    threads: int | None = None,
) -> dict[str, Any]:
    """The plan of every job of `config` (see the module's docstring); `progress` gets one line per task
    calibrated. `steps`: timed calibration steps per batch size (None: DEFAULT_STEPS of the device's type).
    `cache`: a JSON file of earlier calibrations to reuse and extend (None: calibrate afresh).
    `calibrate_gpu_jobs` False leaves the tasks whose jobs ask for a GPU uncalibrated (on a CPU their
    timing would say nothing of a GPU's). `threads`: torch threads of a CPU calibration, for every task
    (None: each task's jobs' own, `calibration_threads`)."""
    try:
        jobs = experiment.training_jobs(config)
        other = experiment.other_jobs(config)
    except ValueError as err:
        raise PlanError(str(err)) from err
    finished = finished_runs(results or Path("results") / config["experiment"])
    cells = cell_medians(finished)
    members = _pack_members(config)
    groups: dict[tuple[str, str], list[experiment.TrainingJob]] = defaultdict(list)
    for job in jobs:
        groups[(job.rule, job.task)].append(job)
    # The LRA tasks with a job that no finished run times: only these are calibrated.
    untimed = {job.task for job in jobs if job.rule in LRA_RULES and _cell(job) not in cells}
    skipped = sorted(t for t in untimed if not calibrate_gpu_jobs and _task_gpus(config, t) > 0)
    steps = DEFAULT_STEPS[device.type] if steps is None else steps
    timed = sorted(untimed - set(skipped))
    calibrations = (
        _calibrate_tasks(config, timed, device, steps, max_calibration_batch, progress, cache, threads)
        if calibrate_tasks
        else {}
    )
    rows, schedule, failing = [], [], []
    for (rule, task), group in groups.items():
        data = task_data(config, task)
        estimates = [
            _job_estimate(job, data, _own_runs(job, members, finished), cells.get(_cell(job)),
                          calibrations.get(task), retries)
            for job in group
        ]  # fmt: skip
        schedule += [
            (e["seconds"], job.gpus) for e, job in zip(estimates, group, strict=True) if not e["done"]
        ]
        failing += [job for e, job in zip(estimates, group, strict=True) if e["attempts"] is None]
        rows.append(_row(config, rule, task, group, data, estimates, calibrations.get(task)))
    total = {
        "jobs": len(jobs),
        "done": sum(r["done"] for r in rows),
        "steps": _sum_or_none(r["steps"] for r in rows),
        "device_hours": sum(r["device_hours"] for r in rows),
        "device_hours_to_go": sum(r["device_hours_to_go"] for r in rows),
        "device_hours_source": "+".join(sorted({s for r in rows for s in r["step_time_source"].split("+")})),
        "wall_clock_hours": makespan(schedule, gpus) / 3600,  # of the jobs still to run
        "disk_bytes": _sum_or_none(r["disk_bytes"] for r in rows),
    }
    return {
        "device": str(device),
        "gpus": gpus,
        "retries": retries,
        "tasks": rows,
        "total": total,
        "other_jobs": other,
        "failing_jobs": [{"rule": job.rule, "run": list(job.run)} for job in failing],
        "uncalibrated_gpu_tasks": skipped if calibrate_tasks else [],
        "deviations": _deviations(jobs),
    }


LRA_RULES = ("train", "train_pack")  # the rules whose tasks calibration can time (the LRA classifier)


def _task_gpus(config: Mapping[str, Any], task: str) -> int:
    return int(experiment.merged(config, "resources", task)["gpu"])


def _cell(job: experiment.TrainingJob) -> CellKey:
    task, variant, scale, setting, _ = job.run
    return (experiment.TRAINING_RULES[job.rule].runs_dir, task, variant, scale, setting)


def _pack_members(config: Mapping[str, Any]) -> dict[tuple[str, str, str, str, int], tuple[int, ...]]:
    """{first run of a pack: the seeds of its pack} (a train_pack job names its first run only)."""
    return {(*cell, seeds[0]): seeds for *cell, seeds in experiment.run_packs(config)}  # type: ignore[misc]


def _own_runs(
    job: experiment.TrainingJob,
    members: Mapping[tuple[str, str, str, str, int], tuple[int, ...]],
    finished: Mapping[RunFile, Mapping[str, float | None]],
) -> list[Mapping[str, float | None]] | None:
    """The finished metrics of every run the job trains, or None while one of them is unfinished."""
    seeds = members.get(job.run, (job.run[4],)) if job.rule == "train_pack" else (job.run[4],)
    own = [finished.get((*_cell(job), int(seed))) for seed in seeds]
    return None if any(times is None for times in own) else own  # type: ignore[return-value]


def _calibrate_tasks(
    config: Mapping[str, Any],
    tasks: list[str],
    device: Any,
    steps: int,
    max_calibration_batch: int | None,
    progress: Callable[[str], None],
    cache: Path | None = None,
    threads: int | None = None,
) -> dict[str, dict[str, Any]]:
    """{task: calibration}: each task's from `cache` when an earlier plan timed the same model, batch, data
    shape, code, device and threads, else timed now (and added to the cache). On the CPU each task is timed
    with its jobs' threads (`calibration_threads`; `threads` overrides), and torch's are restored after."""
    import torch

    known = _read_cache(cache)
    keys, data, task_threads, out = {}, {}, {}, {}
    for task in tasks:
        model_cfg = experiment.merged(config, "model", task)
        train = experiment.merged(config, "train", task)
        width = mean_batch_width(config, task, train) if device.type == "cpu" else None
        data[task] = {**task_data(config, task), "batch_length": width}
        task_threads[task] = calibration_threads(train, device, threads)
        keys[task] = calibration_key(task, data[task], model_cfg, train["batch_size"], device, steps,
                                     max_calibration_batch, task_threads[task])  # fmt: skip
        if keys[task] in known:
            out[task] = known[keys[task]]
    todo = [task for task in tasks if task not in out]
    if out:
        progress(f"calibrations of {', '.join(sorted(out))} reused from {cache}")
    if todo:
        progress(
            f"calibrating {len(todo)} task(s) on {device}: the median of {steps} timed step(s) per batch "
            f"size, after {WARMUP_STEPS} warm-up step(s)"
        )
    started, before = time.monotonic(), torch.get_num_threads()
    try:
        for number, task in enumerate(todo, start=1):
            if task_threads[task] is not None:
                torch.set_num_threads(task_threads[task])
            model_cfg = experiment.merged(config, "model", task)
            batch = experiment.merged(config, "train", task)["batch_size"]
            fused = bool(model_cfg.get("fused_diffusion", True))
            out[task] = calibrate(
                task, data[task], model_cfg, batch, device, steps, max_calibration_batch, fused
            )
            progress(_calibrated_line(task, out[task], number, len(todo), time.monotonic() - started))
    finally:
        torch.set_num_threads(before)
    if cache is not None and todo:
        write_json_atomic(cache, {**known, **{keys[task]: out[task] for task in todo}})
    return out


def calibration_threads(train: Mapping[str, Any], device: Any, threads: int | None = None) -> int | None:
    """The torch threads a task is timed with on the CPU: `threads` (--threads) when given, else those its
    training jobs take (`pdelra.training.device.cpu_threads`: train.num_threads, else $SLURM_CPUS_PER_TASK,
    else the CPU affinity); None on a GPU (where the threads do not set the step time)."""
    from pdelra.training.device import cpu_threads

    if device.type != "cpu":
        return None
    return threads if threads is not None else cpu_threads(train.get("num_threads"))


def mean_batch_width(config: Mapping[str, Any], task: str, train: Mapping[str, Any]) -> int | None:
    """The mean width of one epoch's training batches (each trimmed to its longest example; of a pair, the
    longer document), in the order a job draws them (with the task's `train.length_buckets`): the length
    calibration times. None without processed data (calibration then times max_length)."""
    if task not in config["tasks"] or task_data(config, task)["source"] != "manifest":
        return None
    split = load_split(Path(config["data"]["processed_dir"]) / task, "train")
    lengths, size = B.example_lengths(split), train["batch_size"]
    order = B.train_order(split, 0, 0, size, train.get("length_buckets"))
    widths = [int(lengths[order[begin : begin + size]].max()) for begin in range(0, len(order), size)]
    return max(1, round(statistics.mean(widths))) if widths else None


def _calibrated_line(
    task: str, calibration: Mapping[str, Any], number: int, total: int, elapsed: float
) -> str:
    """One progress line: the step time, the batches and length timed, and the threads."""
    timed = " and ".join(str(batch) for batch in calibration["timed_batches"])
    threads = "" if calibration["threads"] is None else f", {calibration['threads']} thread(s)"
    return (
        f"  {task}: {calibration['step_s']:.3f} s/step at batch {calibration['batch_size']} (timed at "
        f"{timed}, length {calibration['length']}{threads}) [{number}/{total}, {elapsed:.0f} s elapsed]"
    )


def _job_estimate(
    job: experiment.TrainingJob,
    data: Mapping[str, Any],
    own: list[Mapping[str, float | None]] | None,
    cell: Mapping[str, float] | None,
    calibration: Mapping[str, Any] | None,
    retries: int,
) -> dict[str, Any]:
    """One job's planned steps, step time and its source, seconds, device seconds, attempts, and whether it
    is done. Sources, best first: the job's own finished runs (`finished`: their wall time, side by side in a
    pack); the finished runs of its grid cell (`runs`: their median step time x the planned steps, or their
    median wall time where the steps are unknown); the calibration (`calibrated`); its runtime
    (`requested`, a bound)."""
    train, counts = job.config["train"], data["counts"]
    steps = None if counts is None else planned_job_steps(counts["train"], train)
    if own is not None and all(times["wall_s"] is not None for times in own):
        seconds = max(times["wall_s"] for times in own)  # type: ignore[type-var]
        step_times = [times["step_s"] for times in own if times["step_s"] is not None]
        return {
            "steps": steps,
            "step_s": statistics.median(step_times) if step_times else None,
            "source": "finished",
            "seconds": seconds,
            "attempts": attempts_needed(seconds, job.runtime_min, retries, job.max_runtime) or retries + 1,
            "done": True,
        }
    step_s, source, seconds = None, "requested", None
    if cell is not None and steps is not None and "step_s" in cell:
        step_s, source = cell["step_s"], "runs"
    elif cell is not None and "wall_s" in cell:
        seconds, source = cell["wall_s"] * job.runs, "runs"
    elif calibration is not None and steps is not None:
        step_s, source = calibrated_step(calibration, train["batch_size"]), "calibrated"
    if step_s is not None:
        epochs = min(train["max_epochs"], math.ceil(steps / math.ceil(counts["train"] / train["batch_size"])))
        per_example = step_s / train["batch_size"]
        seconds = steps * step_s + per_example * EVAL_COST * (epochs * counts["val"] + counts["test"])
        # A packed job's runs share its GPU: until benchmarks/gpu_check.sh measures what that gains,
        # the plan assumes nothing (the runs' times add up), a bound its runtime request must also meet.
        seconds *= job.runs
    if seconds is None:
        seconds = job.runtime_min * 60.0  # a bound, not an estimate
    return {
        "steps": steps,
        "step_s": step_s,
        "source": source,
        "seconds": time_used(seconds, job.runtime_min, retries, job.max_runtime),
        "attempts": attempts_needed(seconds, job.runtime_min, retries, job.max_runtime),
        "done": own is not None,
    }


def calibrated_step(calibration: Mapping[str, Any], batch_size: int) -> float:
    """A calibration's seconds per step at a job's `batch_size` (a setting may change it): its fixed part
    as timed, its part per example scaled by the batch."""
    fixed = min(float(calibration.get("fixed_s", 0.0)), calibration["step_s"])  # older caches: all scaled
    return fixed + (calibration["step_s"] - fixed) * batch_size / calibration["batch_size"]


def _row(
    config: Mapping[str, Any],
    rule: str,
    task: str,
    group: list[experiment.TrainingJob],
    data: Mapping[str, Any],
    estimates: list[dict[str, Any]],
    calibration: Mapping[str, Any] | None,
) -> dict[str, Any]:
    train = group[0].config["train"]
    step_times = [e["step_s"] for e in estimates if e["step_s"] is not None]
    # Attempts of the estimated jobs only: a job counted at its requested runtime fits one by definition.
    attempts = [e["attempts"] for e in estimates if e["source"] != "requested"]
    params = calibration["parameters"] if calibration else None
    peak = calibration["peak_memory_bytes"] if calibration else None
    micro = _micro_batch(calibration, train["batch_size"])
    padding = (
        padding_ratios(config, task, train) if rule == "train" and data["source"] == "manifest" else None
    )
    return {
        "rule": rule,
        "task": task,
        "jobs": len(group),
        "done": sum(e["done"] for e in estimates),  # finished: the workflow will not run them again
        "n_train": None if data["counts"] is None else data["counts"]["train"],
        "counts_source": data["source"],
        "batch_size": train["batch_size"],
        "steps_per_job": max((e["steps"] for e in estimates if e["steps"] is not None), default=None),
        "steps": _sum_or_none(e["steps"] for e in estimates),
        "step_time_s": statistics.median(step_times) if step_times else None,
        "step_time_source": "+".join(sorted({e["source"] for e in estimates})),
        "device_hours": sum(e["seconds"] * max(job.gpus, 1) for e, job in zip(estimates, group, strict=True))
        / 3600,
        "device_hours_to_go": sum(
            e["seconds"] * max(job.gpus, 1) for e, job in zip(estimates, group, strict=True) if not e["done"]
        )
        / 3600,
        "runtime_min": group[0].runtime_min,
        "mem_mb": group[0].mem_mb,  # what each job asks for (config resources; measured: runs.csv)
        "cpus": group[0].cpus,
        "max_attempts": None if None in attempts else max(attempts, default=None),
        "failing_jobs": attempts.count(None),
        "calibration_batch": None if calibration is None else calibration["measured_batch"],
        "calibration_threads": None if calibration is None else calibration.get("threads"),
        "calibration_length": None if calibration is None else calibration.get("length"),
        "peak_memory_bytes": peak,
        "needs_micro_batching": None if peak is None else micro is not None,
        "suggested_micro_batch_size": micro,
        "parameters": params,
        "disk_bytes": None if params is None else len(group) * (4 * params + METRICS_BYTES),
        "checkpoint_bytes": None if params is None else 16 * params,
        "padding_ratio": None if padding is None else padding[0],
        "padding_ratio_bucketed": None if padding is None else padding[1],
        "length_buckets": None if padding is None else padding[2],
    }


def _micro_batch(calibration: Mapping[str, Any] | None, batch_size: int) -> int | None:
    """The micro-batch that fits in 90 % of the device's memory, when the whole batch does not."""
    if (
        calibration is None
        or calibration["peak_memory_bytes"] is None
        or calibration["_device_memory"] is None
    ):
        return None
    peak, budget, static = (
        calibration["peak_memory_bytes"],
        0.9 * calibration["_device_memory"],
        16 * calibration["parameters"],
    )
    if peak <= budget:
        return None
    return max(1, int((budget - static) // ((peak - static) / batch_size)))


def _deviations(jobs: list[experiment.TrainingJob]) -> list[str]:
    """Choices in this config that depart from the paper's recipe and that the plan can see."""
    bucketed = sorted({job.task for job in jobs if job.config["train"].get("length_buckets")})
    if not bucketed:
        return []
    return [
        f"train.length_buckets is on for {', '.join(bucketed)}: batches are drawn from buckets of similar "
        "length (every example once per epoch), not the paper's uniform shuffle"
    ]


def _sum_or_none(values: Any) -> float | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _hours(hours: float) -> str:
    return f"{hours:,.0f}" if hours >= 100 else f"{hours:.3g}"


def _fmt(value: Any, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


SOURCES = (
    "from: manifest = the processed data's counts; config = data.generate sizes; published = the LRA's "
    "split sizes.\ntime from: finished = the job's own finished runs (their wall time; not run again); "
    "runs = the finished runs of the job's grid cell (median step time x planned steps, or median wall "
    "time); calibrated = timed here on {device} (baseline model, every sequence at max_length: an upper "
    "bound); requested = the job's runtime (a bound, not an estimate).\nasks mem, cpus: each job's "
    "request (resources mem_mb, cpus_per_task; a pack K x one run's), set from measured peak host memory "
    "(runs.csv peak_host_memory_mb; config/README.md) with a margin; peak mem: the calibrated device memory."
)


def plan_table(plan: Mapping[str, Any]) -> list[dict[str, str]]:
    """The per-rule-and-task rows of a plan as display strings, with a total row."""
    rows = []
    for t in plan["tasks"]:
        micro = (
            "-"
            if t["needs_micro_batching"] is None
            else (str(t["suggested_micro_batch_size"]) if t["needs_micro_batching"] else "no")
        )
        padding = (
            "-"
            if t["padding_ratio"] is None
            else f"{t['padding_ratio']:.2f} -> {t['padding_ratio_bucketed']:.2f} ({t['length_buckets']})"
        )
        rows.append({
            "rule": t["rule"],
            "task": t["task"],
            "jobs": str(t["jobs"]),
            "done": str(t["done"]),
            "n_train": _fmt(t["n_train"]),
            "from": t["counts_source"],
            "steps/job": _fmt(t["steps_per_job"]),
            "s/step": _fmt(t["step_time_s"], ".3f"),
            "time from": t["step_time_source"],
            "device-h": _hours(t["device_hours"]),
            "to go": _hours(t["device_hours_to_go"]),
            "attempts": f"{t['failing_jobs']} fail" if t["failing_jobs"] else _fmt(t["max_attempts"]),
            "asks mem": _fmt_bytes(None if t["mem_mb"] is None else t["mem_mb"] * 1_000_000),  # MB
            "cpus": _fmt(t["cpus"]),
            "peak mem": _fmt_bytes(t["peak_memory_bytes"]),
            "micro": micro,
            "disk": _fmt_bytes(t["disk_bytes"]),
            "padding (buckets)": padding,
        })  # fmt: skip
    total = plan["total"]
    rows.append({
        "rule": "total", "task": "", "jobs": str(total["jobs"]), "done": str(total["done"]),
        "time from": total["device_hours_source"], "device-h": _hours(total["device_hours"]),
        "to go": _hours(total["device_hours_to_go"]), "disk": _fmt_bytes(total["disk_bytes"]),
    })  # fmt: skip
    return rows


TEXT_COLUMNS = ("rule", "task", "from", "time from", "padding (buckets)")  # aligned left; numbers right


def format_table(rows: list[dict[str, str]]) -> str:
    """Rows as fixed-width columns, two spaces apart, each as wide as its widest cell or heading."""
    columns = list(rows[0])
    widths = {col: max(len(col), *(len(row.get(col, "")) for row in rows)) for col in columns}

    def line(cells: Mapping[str, str]) -> str:
        return "  ".join(
            cells.get(col, "").ljust(widths[col])
            if col in TEXT_COLUMNS
            else cells.get(col, "").rjust(widths[col])
            for col in columns
        ).rstrip()

    return "\n".join([line({col: col for col in columns}), *map(line, rows)])


def print_plan(plan: Mapping[str, Any], title: str = "plan") -> None:
    gpus, total = plan["gpus"], plan["total"]
    other = sum(plan["other_jobs"].values())
    if "calibrated" in total["device_hours_source"]:
        title += f" (calibrated on {plan['device']})"
    print(
        f"{title}: {total['jobs']} training jobs ({total['done']} finished) and {other} other jobs; steps "
        f"are upper bounds (early stopping may end runs sooner); retries {plan['retries']} (attempt n asks "
        "for n x runtime, at most cluster.max_runtime)"
    )
    print(format_table(plan_table(plan)))
    print(
        f"wall-clock of the {total['jobs'] - total['done']} training jobs to go, {gpus} at a time (--gpus "
        f"{gpus}): {_hours(total['wall_clock_hours'])} h (a greedy longest-job-first schedule of their times "
        "above; queueing and data preparation not included)"
    )
    print(
        "other jobs (data, diagnostics, tables, report, DVC): "
        + ", ".join(f"{rule} {count}" for rule, count in plan["other_jobs"].items())
    )
    if plan.get("uncalibrated_gpu_tasks"):
        print(
            f"not calibrated: {', '.join(plan['uncalibrated_gpu_tasks'])} (their jobs ask for a GPU and this "
            "machine has none: they count at their runtime; run the plan on a GPU node, e.g. `srun --gpus 1 "
            "pdelra plan ...`, or pass --device cpu to time them on this CPU)"
        )
    if plan["failing_jobs"]:
        print(
            f"warning: {len(plan['failing_jobs'])} job(s) need more than {plan['retries'] + 1} attempts of "
            "their runtime and would fail: raise tasks.TASK.resources.runtime (minutes)"
        )
    for deviation in plan["deviations"]:
        print(f"deviation: {deviation}")
    print(SOURCES.format(device=plan["device"]))


# ---------------------------------------------------------------------------------------------------------
# CLI


def run(args: argparse.Namespace) -> int:
    """`pdelra plan CONFIG` (declared in pdelra.planning.cli)."""
    import torch

    if args.gpus < 1:
        raise PlanError(f"--gpus {args.gpus}: give at least 1")
    if args.threads is not None and args.threads < 1:
        raise PlanError(f"--threads {args.threads}: give at least 1")
    name = args.device
    # auto on a machine without CUDA: timing a GPU job's model on the CPU takes minutes and says nothing of
    # the GPU, so those tasks count at their runtime (the output says how to time them).
    calibrate_gpu_jobs = name != "auto" or torch.cuda.is_available()
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    config = load_config(args.config)
    results = args.results or Path("results") / config["experiment"]
    plan = make_plan(
        config,
        device,
        steps=args.steps,
        max_calibration_batch=args.max_calibration_batch,
        results=results,
        calibrate_tasks=not args.no_calibration,
        gpus=args.gpus,
        retries=slurm_retries() if args.retries is None else args.retries,
        cache=None if args.no_cache else results / CACHE_NAME,
        calibrate_gpu_jobs=calibrate_gpu_jobs,
        threads=args.threads,
    )
    print_plan(plan, title=f"plan of {args.config}")
    if args.power:
        print_power(config, plan, args.tables)
    elif args.tables is not None:
        raise PlanError("--tables PILOT goes with --power")
    if args.json is not None:
        write_json_atomic(args.json, plan)
    return 0


def print_power(config: Mapping[str, Any], plan: Mapping[str, Any], pilot: Path | None) -> None:
    """The seeds each claim of the config needs (the paper's claims on the cells it runs, and its own
    variants'; `pdelra.results.seeds`) and what seed counts cost, priced from the plan."""
    import pandas as pd

    runs = None
    if pilot is not None:
        runs_csv = pilot / "runs.csv"
        if not runs_csv.is_file():
            raise PlanError(f"{runs_csv}: no runs table; give --tables a folder `pdelra aggregate` wrote")
        runs = pd.read_csv(runs_csv)
    planned = experiment.lra_runs(config)
    n_seeds = len({run[4] for run in planned}) or 1
    cells = {run[:4] for run in planned}
    table, unplanned = seeds.seeds_table(runs, n_seeds, cells, seeds.own_positions(config))
    # Priced from the plan: every LRA training job's estimate, finished or not (an extra seed costs what one
    # ran or is expected to), per seed of the config.
    lra_hours = sum(t["device_hours"] for t in plan["tasks"] if t["rule"] in LRA_RULES)
    hours_per_seed = lra_hours / n_seeds if lra_hours else None
    where = "at the paper's effect, or for your own variants the one assumed or the pilot's"
    print(f"\nseeds each claim of this config needs for 80 % power {where} ({n_seeds} in this config):")
    if table.empty:
        print("  none: the config runs no cell a claim compares")
    else:
        print(_power_shown(table, n_seeds).to_string(index=False))
    if unplanned:
        print(f"\n{len(unplanned)} of the paper's claims compare cells this config does not run: "
              f"{', '.join(unplanned)}")  # fmt: skip
    if table.empty:
        return
    unit = (
        "GPU-hours"
        if any(_task_gpus(config, t["task"]) for t in plan["tasks"] if t["rule"] in LRA_RULES)
        else "device-hours"
    )
    choices = seeds.choices(table, hours_per_seed, unit=unit)
    choices[f"{unit} (training)"] = choices[f"{unit} (training)"].map(
        lambda x: "—" if pd.isna(x) else _hours(x)
    )
    what = f"this plan's {_hours(lra_hours)} h of LRA training / {n_seeds} seed(s)"
    print(f"\nwhat seed counts buy ({unit}: {what}):")
    print(choices.to_string(index=False))


def _power_shown(table: Any, n_seeds: int) -> Any:
    """The power table as printed: effects and spreads in accuracy units, powers in percent."""
    import pandas as pd

    def number(spec: str) -> Any:
        return lambda x: "—" if pd.isna(x) else format(x, spec)

    return table.assign(
        effect_aimed_at=table["effect_aimed_at"].map(number("+.4f")),
        sd_per_seed=table["sd_per_seed"].map(number(".4f")),
        level=table["level"].map(number(".4f")),
        **{f"power_at_{n_seeds}": table[f"power_at_{n_seeds}"].map(number(".0%"))},
        seeds_for_80=[
            ("—" if pd.isna(p) else ">200") if pd.isna(x) else f"{int(x)}"  # —: no effect to aim at
            for x, p in zip(table["seeds_for_80"], table[f"power_at_{n_seeds}"], strict=True)
        ],
        **{f"detectable_at_{n_seeds}": table[f"detectable_at_{n_seeds}"].map(number(".4f"))},
    )
