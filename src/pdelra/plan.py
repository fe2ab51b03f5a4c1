"""`pdelra plan CONFIG`: what a workflow config will cost before it runs.

The jobs are the workflow's own (pdelra.experiment, the expansion workflow/rules/common.smk uses): every
training rule's jobs (`train`: the LRA runs of every grid in `run_grids`; `lm_train`: PhysQK-AD's LM), and
the other jobs (data, diagnostics, tables, report, DVC) counted per rule. Per training rule and task: jobs,
the planned optimizer steps per job (ceil(n_train / batch_size) × max_epochs, capped by max_steps, with each
run's own setting: an upper bound, since early stopping may end a run sooner), step time, device-hours, the
attempts a job needs within its `runtime`, peak memory and whether it needs micro-batching
(`train.micro_batch_size`) on this device, disk, and padding tokens ÷ real tokens without and with
length-bucketed batches (`train.length_buckets`). In total: device-hours and the wall-clock on `--gpus N`.

Where the numbers come from (each is labelled in the output):
- example counts: the processed data's manifest (`data.processed_dir/{task}/manifest.json`) when present
  (`manifest`), else the config's `data.generate` sizes for generated data (`config`), else the Long Range
  Arena's published split sizes for real data (`published`);
- step time: the median `median_step_time_s` of finished runs of the same rule, task, variant, scale and
  setting under `results/{experiment}` (`runs`), else a calibration on this device (`calibrated`): a few
  timed forward + backward + AdamW steps of the task's baseline model on random tokens at the task's
  max_length, at the job's batch size or, when that is too slow or does not fit, at a smaller batch scaled
  up linearly. Every sequence at max_length: an upper bound where batches are trimmed to their longest.
  Diffusion variants cost 1-6 % more than the baseline (`pdelra bench train-step`), CTA variants more with
  more pseudo-time steps; the calibration times the baseline only. The LM is not calibrated: without
  finished LM runs its jobs count at their requested `runtime` (`requested`), a bound, not an estimate;
- evaluation: each epoch evaluates the validation split, at one third of a training step's cost per
  example (forward only), plus one test pass per job;
- wall-clock: the makespan of a greedy longest-job-first list schedule of the jobs' estimated times on
  N GPUs (each job on its `gpu` count of them), the standard estimate (within 4/3 of the best schedule).
  A job longer than its `runtime` is stopped at the limit and resumes from its checkpoint on the retry,
  which asks for attempt × runtime (profiles/slurm): it needs the attempts shown, and with more than
  retries + 1 it fails (listed), its time then counted up to its last attempt. Queueing, data preparation
  and the report are not included;
- disk: per job metrics.json (~50 kB) and model.safetensors (4 bytes per parameter); while a job trains,
  its checkpoint (weights, AdamW moments, best weights: 16 bytes per parameter);
- padding: from the processed length arrays (so only with a manifest), over one epoch of the job's batch
  size, with the task's `train.length_buckets` or, where it is off, REFERENCE_BUCKETS buckets.
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

from pdelra import experiment
from pdelra.atomic import write_json_atomic
from pdelra.errors import UserError

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
DEFAULT_RETRIES = 2  # `retries` of profiles/slurm/profile.yaml when it cannot be read
SLURM_PROFILE = Path("profiles/slurm/profile.yaml")


class PlanError(UserError, ValueError):
    """A config that cannot be planned; the message names the file and key."""


# ---------------------------------------------------------------------------------------------------------
# The config, read as the workflow reads it


def load_config(path: Path) -> dict[str, Any]:
    """The workflow config, checked as `pdelra config check` does (YAML syntax with its line, every problem
    the workflow refuses), with the schema's defaults filled in (as Snakemake's `validate(...,
    set_default=True)` does)."""
    import yaml

    from pdelra.config_check import file_problems, with_defaults

    problems = file_problems(path)
    if problems:
        raise PlanError(f"invalid config {path}:\n" + "\n".join(f"  - {problem}" for problem in problems))
    return with_defaults(yaml.safe_load(Path(path).read_text(encoding="utf-8")))


# ---------------------------------------------------------------------------------------------------------
# Facts per task


def task_data(config: Mapping[str, Any], task: str) -> dict[str, Any]:
    """Example counts, vocabulary, classes and max_length of a task, with where the counts came from.

    A task without a manifest and outside the LRA's five (the LM's `lm_{corpus}`) has no counts (None)."""
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
    if task not in config["tasks"]:
        return {"counts": None, "source": "-"}
    if config["data"].get("source") == "generated":
        from pdelra.data.generate import DEFAULTS

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
    from pdelra.training.schedule import planned_steps

    return planned_steps(math.ceil(n_train / train["batch_size"]), train["max_epochs"], train["max_steps"])


RunKey = tuple[str, str, str, str, str]  # (rule, task, variant, scale, setting)


def finished_step_times(results: Path) -> dict[RunKey, float]:
    """Median step time of finished runs per (rule, task, variant, scale, setting), from metrics.json."""
    from pdelra import runs as run_layout

    times: dict[RunKey, list[float]] = defaultdict(list)
    for rule, spec in experiment.TRAINING_RULES.items():
        root = results / spec.runs_dir
        for path in run_layout.find_run_files(root) if root.is_dir() else []:
            try:
                metrics = json.loads(path.read_text())
                step_s = float(metrics["median_step_time_s"])
                key = (rule, *(str(metrics[k]) for k in ("task", "variant", "scale", "setting")))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # unreadable, unfinished or without timings: not evidence
            times[key].append(step_s)  # type: ignore[index]
    return {key: statistics.median(values) for key, values in times.items()}


def padding_ratios(
    config: Mapping[str, Any], task: str, train: Mapping[str, Any]
) -> tuple[float, float, int]:
    """(padding ÷ real tokens of one epoch's plain batches, the same bucketed, the bucket count), from the
    processed training split's length arrays."""
    import numpy as np

    from pdelra.data.store import load_split
    from pdelra.training import batches as B

    split = load_split(Path(config["data"]["processed_dir"]) / task, "train")
    lengths = [np.asarray(split.lengths)] + ([np.asarray(split.lengths2)] if B.is_pair_split(split) else [])
    size, buckets = train["batch_size"], train.get("length_buckets") or REFERENCE_BUCKETS
    plain, bucketed = B.train_order(split, 0, 0, size), B.train_order(split, 0, 0, size, buckets)
    return B.padding_ratio(lengths, plain, size), B.padding_ratio(lengths, bucketed, size), buckets


# ---------------------------------------------------------------------------------------------------------
# Time limits and the schedule


def attempts_needed(seconds: float, runtime_min: float, retries: int) -> int | None:
    """Attempts a job of `seconds` needs when attempt a may run a × runtime and resumes where the last stopped
    (the train rule's `runtime × attempt`); None when even retries + 1 attempts are not enough."""
    done, attempt = 0.0, 0
    while attempt <= retries:
        attempt += 1
        done += attempt * runtime_min * 60
        if done >= seconds:
            return attempt
    return None


def time_used(seconds: float, runtime_min: float, retries: int) -> float:
    """Device seconds a job takes: its time, or every allowed attempt's full limit when it cannot finish."""
    if attempts_needed(seconds, runtime_min, retries) is not None:
        return seconds
    return runtime_min * 60 * (retries + 1) * (retries + 2) / 2


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
) -> dict[str, Any]:
    """Time `steps` train steps of the task's baseline model at (batch, max_length) on random tokens.

    Returns seconds per step at the job's batch size, the peak memory estimate (bytes, CUDA: measured
    allocator peak, CPU: not measured) and the batch the timing ran at.
    """
    import torch

    from pdelra.model import LRAClassifier, ModelConfig

    keys = {k: v for k, v in model_cfg.items() if k in {f for f in ModelConfig.__dataclass_fields__}}
    keys["fused_diffusion"] = fused
    keys.pop("operators", None)  # the baseline: a config variant's operators are not part of it
    cfg = ModelConfig(
        vocab_size=int(data["vocab_size"]),
        num_classes=int(data["num_classes"]),
        max_length=int(data["max_length"]),
        variant="none",
        scale="h1",
        two_tower=task == "retrieval",
        **keys,
    )
    torch.manual_seed(0)
    model = LRAClassifier(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    params = sum(p.numel() for p in model.parameters())
    length = int(data["max_length"])
    micro = batch_size if max_calibration_batch is None else min(batch_size, max_calibration_batch)
    while True:
        try:
            seconds, peak = _time_steps(model, opt, cfg, micro, length, device, steps)
            break
        except torch.OutOfMemoryError:
            if micro == 1:
                raise
            micro = max(1, micro // 2)
            opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
    scale = batch_size / micro
    static = params * 16  # weights, gradients, two AdamW moments (float32)
    peak_full = None if peak is None else static + (peak - static) * scale
    return {
        "step_s": seconds * scale,
        "batch_size": batch_size,
        "measured_batch": micro,
        "peak_memory_bytes": peak_full,
        "parameters": params,
        "two_tower": cfg.two_tower,
        "_device_memory": torch.cuda.get_device_properties(device).total_memory
        if device.type == "cuda"
        else None,
    }


def _time_steps(
    model: Any, opt: Any, cfg: Any, batch: int, length: int, device: Any, steps: int
) -> tuple[float, int | None]:
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.vocab_size, (batch, length), generator=gen).to(device)
    lengths = torch.full((batch,), length).to(device)
    labels = torch.randint(0, cfg.num_classes, (batch,), generator=gen).to(device)
    inputs = (tokens, lengths, tokens, lengths) if cfg.two_tower else (tokens, lengths)
    autocast = device.type == "cuda" and torch.cuda.is_bf16_supported()

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            logits = model(*inputs)
        loss = F.cross_entropy(logits.float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step()  # warm-up (and compilation of the fused operator, if any)
    times = []
    for _ in range(steps):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    peak = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None
    return statistics.median(times), peak


# ---------------------------------------------------------------------------------------------------------
# The plan


def stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_plan(
    config: Mapping[str, Any],
    device: Any,
    steps: int = 3,
    max_calibration_batch: int | None = None,
    results: Path | None = None,
    calibrate_tasks: bool = True,
    gpus: int = 1,
    retries: int = DEFAULT_RETRIES,
    progress: Callable[[str], None] = stderr_progress,
) -> dict[str, Any]:
    """The plan of every job of `config` (see the module's docstring); `progress` gets one line per task
    calibrated."""
    try:
        jobs = experiment.training_jobs(config)
        other = experiment.other_jobs(config)
    except ValueError as err:
        raise PlanError(str(err)) from err
    finished = finished_step_times(results or Path("results") / config["experiment"])
    groups: dict[tuple[str, str], list[experiment.TrainingJob]] = defaultdict(list)
    for job in jobs:
        groups[(job.rule, job.task)].append(job)
    untimed = sorted(
        {job.task for job in jobs if job.rule in ("train", "train_pack") and _run_key(job) not in finished}
    )  # the LRA tasks with a job no finished run times: only these are calibrated
    calibrations = (
        _calibrate_tasks(config, untimed, device, steps, max_calibration_batch, progress)
        if calibrate_tasks
        else {}
    )
    rows, schedule, failing = [], [], []
    for (rule, task), group in groups.items():
        data = task_data(config, task)
        estimates = [_job_estimate(job, data, finished, calibrations.get(task), retries) for job in group]
        schedule += [(e["seconds"], job.gpus) for e, job in zip(estimates, group, strict=True)]
        failing += [job for e, job in zip(estimates, group, strict=True) if e["attempts"] is None]
        rows.append(_row(config, rule, task, group, data, estimates, calibrations.get(task)))
    total = {
        "jobs": len(jobs),
        "steps": _sum_or_none(r["steps"] for r in rows),
        "device_hours": sum(r["device_hours"] for r in rows),
        "device_hours_source": "+".join(sorted({r["step_time_source"] for r in rows})),
        "wall_clock_hours": makespan(schedule, gpus) / 3600,
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
        "deviations": _deviations(jobs),
    }


def _run_key(job: experiment.TrainingJob) -> RunKey:
    task, variant, scale, setting, _ = job.run
    return (job.rule, task, variant, scale, setting)


def _calibrate_tasks(
    config: Mapping[str, Any],
    tasks: list[str],
    device: Any,
    steps: int,
    max_calibration_batch: int | None,
    progress: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    if tasks:
        progress(f"calibrating {len(tasks)} task(s) on {device}: {steps} timed steps each, after one warm-up")
    started, out = time.monotonic(), {}
    for number, task in enumerate(tasks, start=1):
        model_cfg = experiment.merged(config, "model", task)
        batch = experiment.merged(config, "train", task)["batch_size"]
        fused = bool(model_cfg.get("fused_diffusion", True))
        out[task] = calibrate(
            task, task_data(config, task), model_cfg, batch, device, steps, max_calibration_batch, fused
        )
        elapsed = time.monotonic() - started
        progress(
            f"  {task}: {out[task]['step_s']:.3f} s/step at batch {batch} (timed at "
            f"{out[task]['measured_batch']}) [{number}/{len(tasks)}, {elapsed:.0f} s elapsed]"
        )
    return out


def _job_estimate(
    job: experiment.TrainingJob,
    data: Mapping[str, Any],
    finished: Mapping[RunKey, float],
    calibration: Mapping[str, Any] | None,
    retries: int,
) -> dict[str, Any]:
    """One job's planned steps, step time and its source, seconds, device seconds and attempts."""
    train, counts = job.config["train"], data["counts"]
    steps = None if counts is None else planned_job_steps(counts["train"], train)
    step_s, source = finished.get(_run_key(job)), "runs"
    if step_s is None and calibration is not None:
        step_s, source = calibration["step_s"] / calibration["batch_size"] * train["batch_size"], "calibrated"
    if steps is None or step_s is None:
        seconds, source = job.runtime_min * 60.0, "requested"  # a bound, not an estimate
    else:
        epochs = min(train["max_epochs"], math.ceil(steps / math.ceil(counts["train"] / train["batch_size"])))
        per_example = step_s / train["batch_size"]
        seconds = steps * step_s + per_example * EVAL_COST * (epochs * counts["val"] + counts["test"])
        # A packed job's runs share its GPU: until benchmarks/gpu_check.sh measures what that gains,
        # the plan assumes nothing (the runs' times add up), a bound its runtime request must also meet.
        seconds *= job.runs
    return {
        "steps": steps,
        "step_s": None if source == "requested" else step_s,
        "source": source,
        "seconds": time_used(seconds, job.runtime_min, retries),
        "attempts": attempts_needed(seconds, job.runtime_min, retries),
    }


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
        "n_train": None if data["counts"] is None else data["counts"]["train"],
        "counts_source": data["source"],
        "batch_size": train["batch_size"],
        "steps_per_job": max((e["steps"] for e in estimates if e["steps"] is not None), default=None),
        "steps": _sum_or_none(e["steps"] for e in estimates),
        "step_time_s": statistics.median(step_times) if step_times else None,
        "step_time_source": "+".join(sorted({e["source"] for e in estimates})),
        "device_hours": sum(e["seconds"] * max(job.gpus, 1) for e, job in zip(estimates, group, strict=True))
        / 3600,
        "runtime_min": group[0].runtime_min,
        "max_attempts": None if None in attempts else max(attempts, default=None),
        "failing_jobs": attempts.count(None),
        "calibration_batch": None if calibration is None else calibration["measured_batch"],
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


def _fmt(value: Any, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


SOURCES = (
    "from: manifest = the processed data's counts; config = data.generate sizes; published = the LRA's "
    "split sizes.\ntime from: runs = median step time of finished runs; calibrated = timed here on {device} "
    "(baseline model, every sequence at max_length); requested = the job's runtime (no estimate: not "
    "calibrated)."
)


def print_plan(plan: Mapping[str, Any]) -> None:
    gpus = plan["gpus"]
    print(
        f"plan on {plan['device']}: {plan['total']['jobs']} training jobs; steps are upper bounds (early "
        f"stopping may end runs sooner); runtime retries {plan['retries']} (attempt n asks for n x runtime)"
    )
    print(
        f"{'rule':<9}{'task':<11}{'jobs':>5}{'n_train':>9} {'from':<10}{'steps/job':>10}{'steps':>10}"
        f"{'s/step':>9} {'time from':<17}{'dev-hours':>10}{'attempts':>9}{'peak mem':>10}{'micro':>6}"
        f"{'disk':>10}  padding: plain -> bucketed"
    )
    for t in plan["tasks"]:
        micro = (
            "-"
            if t["needs_micro_batching"] is None
            else (str(t["suggested_micro_batch_size"]) if t["needs_micro_batching"] else "no")
        )
        attempts = f"{t['failing_jobs']} fail" if t["failing_jobs"] else _fmt(t["max_attempts"])
        padding = (
            "-"
            if t["padding_ratio"] is None
            else f"{t['padding_ratio']:.2f} -> {t['padding_ratio_bucketed']:.2f} "
            f"({t['length_buckets']} buckets)"
        )
        print(
            f"{t['rule']:<9}{t['task']:<11}{t['jobs']:>5}{_fmt(t['n_train']):>9} {t['counts_source']:<10}"
            f"{_fmt(t['steps_per_job']):>10}{_fmt(t['steps']):>10}{_fmt(t['step_time_s'], '.3f'):>9} "
            f"{t['step_time_source']:<17}{t['device_hours']:>10.3g}{attempts:>9}"
            f"{_fmt_bytes(t['peak_memory_bytes']):>10}{micro:>6}{_fmt_bytes(t['disk_bytes']):>10}  {padding}"
        )
    total = plan["total"]
    print(
        f"{'total':<20}{total['jobs']:>5}{'':>9} {'':<10}{'':>10}{_fmt(total['steps']):>10}{'':>9} "
        f"{total['device_hours_source']:<17}{total['device_hours']:>10.3g}{'':>9}{'':>10}{'':>6}"
        f"{_fmt_bytes(total['disk_bytes']):>10}"
    )
    print(
        f"wall-clock on {gpus} GPU{'s' if gpus > 1 else ''} ({gpus} training job{'s' if gpus > 1 else ''} "
        f"at a time): {total['wall_clock_hours']:.3g} h (makespan of "
        "a greedy longest-job-first list schedule of the jobs' times above; queueing and data preparation "
        "not included)"
    )
    other = ", ".join(f"{rule} {count}" for rule, count in plan["other_jobs"].items())
    print(f"other jobs (CPU; data, diagnostics, tables, report, DVC): {other}")
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


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="jobs, optimizer steps, device-hours, wall-clock, disk and peak memory a config will cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", type=Path, help="workflow config (e.g. config/config.yaml)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument(
        "--gpus", type=int, default=1, help="GPUs the training jobs share, for the wall-clock"
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=None,
        help=f"resubmissions of a job that ran out of time (default: `retries` of {SLURM_PROFILE}, else "
        f"{DEFAULT_RETRIES})",
    )
    parser.add_argument(
        "--steps", type=int, default=3, help="timed calibration steps per task (after one warm-up)"
    )
    parser.add_argument(
        "--max-calibration-batch",
        type=int,
        default=None,
        help="time at most this many examples per step, scaled up linearly (default: 8 on CPU, all on GPU)",
    )
    parser.add_argument(
        "--no-calibration", action="store_true", help="jobs and steps only (and finished runs' times)"
    )
    parser.add_argument(
        "--results", type=Path, default=None, help="results/{experiment} folder with finished runs"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads for the CPU calibration")
    parser.add_argument("--json", type=Path, default=None, help="also write the plan to this JSON file")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    if args.gpus < 1:
        raise PlanError(f"--gpus {args.gpus}: give at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    name = args.device
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    max_batch = args.max_calibration_batch
    if max_batch is None and device.type == "cpu":
        max_batch = 8
    config = load_config(args.config)
    plan = make_plan(
        config,
        device,
        steps=args.steps,
        max_calibration_batch=max_batch,
        results=args.results,
        calibrate_tasks=not args.no_calibration,
        gpus=args.gpus,
        retries=slurm_retries() if args.retries is None else args.retries,
    )
    print_plan(plan)
    if args.json is not None:
        write_json_atomic(args.json, plan)
    return 0
