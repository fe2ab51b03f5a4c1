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
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra import runs as run_layout
from pdelra import tasks
from pdelra.atomic import write_json_atomic
from pdelra.data.store import load_split
from pdelra.errors import UserError
from pdelra.parts import TIMING_FILE, TrainingJob
from pdelra.planning import experiment, flops, priorities
from pdelra.planning.calibration import (
    calibrate,
    calibrated_step,
    calibration_key,
    calibration_threads,
    read_cache,
)
from pdelra.planning.cli import (
    CACHE_NAME,
    DEFAULT_RETRIES,
    DEFAULT_STEPS,
    SLURM_PROFILE,
    WARMUP_STEPS,
)
from pdelra.planning.config_check import file_problems, with_defaults
from pdelra.planning.estimate import planned_job_steps, run_seconds, task_data
from pdelra.planning.plan_text import print_plan, print_power
from pdelra.training import batches as B

if TYPE_CHECKING:
    import pandas as pd


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
# Facts per task (its counts and max_length: pdelra.planning.estimate.task_data) and finished runs


CellKey = tuple[str, str, str, str, str]  # (runs folder, task, variant, scale, setting)
RunFile = tuple[str, str, str, str, str, int]  # (runs folder, task, variant, scale, setting, seed)


def finished_runs(results: Path, runs_dirs: Iterable[str] = ()) -> dict[RunFile, dict[str, Any]]:
    """Every finished run of every training rule under `results` (results/{experiment}): its median step time,
    wall time and device from its metrics.json (written when the run ends, so the workflow will not train it
    again), keyed by (runs folder, task, variant, scale, setting, seed). `runs_dirs` adds the folders of a
    config's own parts, whose run file may be anything: there the run's time is what `pdelra part run`
    measured (pdelra.parts.TIMING_FILE, written once the run file is)."""
    out: dict[RunFile, dict[str, Any]] = {}
    builtin = {spec.runs_dir for spec in experiment.TRAINING_RULES.values()}
    for runs_dir in sorted(set(runs_dirs) - builtin):  # a part's: its run file is its own, the timing ours
        root = results / runs_dir
        for path in run_layout.find_run_files(root, TIMING_FILE) if root.is_dir() else []:
            try:
                timing = json.loads(path.read_text())
                key = (runs_dir, *run_layout.parse_run_dir(path).values())
            except (OSError, ValueError):
                continue
            out[key] = {  # type: ignore[index]
                "step_s": None,
                "wall_s": _positive(timing.get("wall_time_s")),
                "device": timing.get("device") if isinstance(timing.get("device"), str) else None,
            }
    for runs_dir in sorted(builtin):
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
                "device": metrics.get("device") if isinstance(metrics.get("device"), str) else None,
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
    gpu: str | None = None,
) -> dict[str, Any]:
    """The plan of every job of `config` (see the module's docstring); `progress` gets one line per task
    calibrated. `steps`: timed calibration steps per batch size (None: DEFAULT_STEPS of the device's type).
    `cache`: a JSON file of earlier calibrations to reuse and extend (None: calibrate afresh).
    `calibrate_gpu_jobs` False leaves the tasks whose jobs ask for a GPU uncalibrated (on a CPU their
    timing would say nothing of a GPU's). `threads`: torch threads of a CPU calibration, for every task
    (None: each task's jobs' own, `calibration_threads`). `gpu`: a GPU model (pdelra.planning.flops) whose
    FLOPs estimate times the LRA jobs that nothing better times (source `flops`)."""
    try:
        jobs = experiment.training_jobs(config)
        other = experiment.other_jobs(config)
    except ValueError as err:
        raise PlanError(str(err)) from err
    part_dirs = {job.runs_dir for job in jobs if job.rule not in LRA_RULES}
    finished = finished_runs(results or Path("results") / config["experiment"], part_dirs)
    cells = cell_medians(finished)
    members = _pack_members(config)
    groups: dict[tuple[str, str], list[TrainingJob]] = defaultdict(list)
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
    estimate = _flops_estimate(config, jobs, gpu, finished, calibrations, device) if gpu else None
    rows, schedule, failing = [], [], []
    for (rule, task), group in groups.items():
        # A part's jobs run a model of their own: neither the LRA task's counts (its steps) nor the LRA
        # model's calibration times them, even when they name an LRA task; only their own runs do.
        lra = rule in LRA_RULES
        data = task_data(config, task) if lra else {"counts": None, "source": "-"}
        calibration = calibrations.get(task) if lra else None
        estimates = [
            _job_estimate(job, data, _own_runs(job, members, finished), cells.get(_cell(job)),
                          calibration, retries,
                          None if estimate is None else estimate["step_s"].get((job.rule, job.run)))
            for job in group
        ]  # fmt: skip
        schedule += [
            (e["seconds"], job.gpus) for e, job in zip(estimates, group, strict=True) if not e["done"]
        ]
        failing += [job for e, job in zip(estimates, group, strict=True) if e["attempts"] is None]
        rows.append(_row(config, rule, task, group, data, estimates, calibration))
        if estimate is not None:
            margin = estimate["margin"]
            rows[-1]["requested_hours_from_estimate"] = (
                sum(
                    (margin * e["seconds"] if e["source"] == "flops" else job.runtime_min * 60)
                    * max(job.gpus, 1)
                    for e, job in zip(estimates, group, strict=True)
                )
                / 3600
            )
    total = {
        "jobs": len(jobs),
        "done": sum(r["done"] for r in rows),
        "steps": _sum_or_none(r["steps"] for r in rows),
        "device_hours": sum(r["device_hours"] for r in rows),
        "device_hours_to_go": sum(r["device_hours_to_go"] for r in rows),
        "requested_hours": sum(r["requested_hours"] for r in rows),
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
        "priority": priorities.plan_priority(config, jobs),  # the order the cluster gets the jobs in
        "flops": None if estimate is None else {k: v for k, v in estimate.items() if k != "step_s"},
    }


LRA_RULES = ("train", "train_pack")  # the rules whose tasks calibration can time (the LRA classifier)


def _task_gpus(config: Mapping[str, Any], task: str) -> int:
    return int(experiment.merged(config, "resources", task)["gpu"])


def _cell(job: TrainingJob) -> CellKey:
    task, variant, scale, setting, _ = job.run
    return (job.runs_dir, task, variant, scale, setting)


def _pack_members(config: Mapping[str, Any]) -> dict[tuple[str, str, str, str, int], tuple[int, ...]]:
    """{first run of a pack: the seeds of its pack} (a train_pack job names its first run only)."""
    return {(*cell, seeds[0]): seeds for *cell, seeds in experiment.run_packs(config)}  # type: ignore[misc]


def _own_runs(
    job: TrainingJob,
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

    known = read_cache(cache)
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


def _flops_estimate(
    config: Mapping[str, Any],
    jobs: list[TrainingJob],
    gpu: str,
    finished: Mapping[RunFile, Mapping[str, Any]],
    calibrations: Mapping[str, Mapping[str, Any]],
    device: Any,
) -> dict[str, Any]:
    """Each LRA job's step time on GPU model `gpu` from its FLOPs (pdelra.planning.flops), keyed by (rule,
    run), at a utilisation fitted to the finished runs on that GPU model and a calibration on it, if any."""
    import torch

    lra = [job for job in jobs if job.rule in LRA_RULES]
    lengths = {
        task: mean_batch_width(config, task, experiment.merged(config, "train", task))
        or task_data(config, task)["max_length"]
        for task in sorted({job.task for job in lra})
    }

    def work(job: TrainingJob) -> float:
        model, batch = job.config["model"], job.config["train"]["batch_size"]
        return flops.step_flops(model, lengths[job.task], tasks.is_two_tower(job.task), batch)

    by_cell = {_cell(job): job for job in lra}
    samples = [
        (work(by_cell[key[:5]]), times["step_s"])
        for key, times in finished.items()
        if key[:5] in by_cell and times["step_s"] and flops.same_gpu(times.get("device"), gpu)
    ]
    if device.type == "cuda" and flops.same_gpu(torch.cuda.get_device_name(device), gpu):
        for task, cal in calibrations.items():
            model = experiment.merged(config, "model", task)
            work_done = flops.step_flops(model, cal["length"], tasks.is_two_tower(task), cal["batch_size"])
            samples.append((work_done, calibrated_step(cal, cal["batch_size"])))
    utilisation, source = flops.fit_utilisation(gpu, samples)
    return {
        "gpu": flops.gpu_model(gpu),
        "peak_tflops": flops.GPU_PEAK_TFLOPS[flops.gpu_model(gpu)],
        "utilisation": utilisation,
        "utilisation_source": source,
        "lengths": lengths,
        "margin": float(config.get("cluster", {}).get("runtime_margin", flops.DEFAULT_MARGIN)),
        "step_s": {(job.rule, job.run): flops.step_seconds(work(job), gpu, utilisation) for job in lra},
    }


def _job_estimate(
    job: TrainingJob,
    data: Mapping[str, Any],
    own: list[Mapping[str, float | None]] | None,
    cell: Mapping[str, float] | None,
    calibration: Mapping[str, Any] | None,
    retries: int,
    flops_step: float | None = None,
) -> dict[str, Any]:
    """One job's planned steps, step time and its source, seconds, device seconds, attempts, and whether it
    is done. Sources, best first: the job's own finished runs (`finished`: their wall time, side by side in a
    pack); the finished runs of its grid cell (`runs`: their median step time x the planned steps, or their
    median wall time where the steps are unknown); the calibration (`calibrated`); the FLOPs estimate on
    `--gpu` (`flops`: `flops_step` s/step); its runtime (`requested`, a bound)."""
    train, counts = job.config.get("train") or {}, data["counts"]
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
    elif flops_step is not None and steps is not None:
        step_s, source = flops_step, "flops"
    if step_s is not None:
        seconds = run_seconds(train, counts, steps, step_s)
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


def _row(
    config: Mapping[str, Any],
    rule: str,
    task: str,
    group: list[TrainingJob],
    data: Mapping[str, Any],
    estimates: list[dict[str, Any]],
    calibration: Mapping[str, Any] | None,
) -> dict[str, Any]:
    train = group[0].config.get("train") or {}  # a part's run config may carry none
    step_times = [e["step_s"] for e in estimates if e["step_s"] is not None]
    # Attempts of the estimated jobs only: a job counted at its requested runtime fits one by definition.
    attempts = [e["attempts"] for e in estimates if e["source"] != "requested"]
    params = calibration["parameters"] if calibration else None
    peak = calibration["peak_memory_bytes"] if calibration else None
    micro = _micro_batch(calibration, train.get("batch_size"))
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
        "batch_size": train.get("batch_size"),
        "not_estimated": None if rule in LRA_RULES else _not_estimated(rule, estimates),
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
        "requested_hours": sum(job.runtime_min * max(job.gpus, 1) for job in group) / 60,  # first attempts
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


def _not_estimated(rule: str, estimates: list[dict[str, Any]]) -> str | None:
    """Why a part's jobs count at their requested runtime (None when each is timed by runs of its own): the
    plan times another model only by its own runs, and borrows no other model's step time."""
    untimed = sum(e["source"] == "requested" for e in estimates)
    if not untimed:
        return None
    return (
        f"{untimed} of {len(estimates)} {rule} job(s) have no finished run of their own or of their grid "
        "cell to time them, and the plan does not calibrate a part's model: counted at their requested "
        "runtime (a bound, not an estimate)"
    )


def _micro_batch(calibration: Mapping[str, Any] | None, batch_size: int | None) -> int | None:
    """The micro-batch that fits in 90 % of the device's memory, when the whole batch does not."""
    if (
        calibration is None
        or batch_size is None
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


def _deviations(jobs: list[TrainingJob]) -> list[str]:
    """Choices in this config that depart from the paper's recipe and that the plan can see."""
    lra = [job for job in jobs if job.rule in LRA_RULES]
    bucketed = sorted({job.task for job in lra if job.config["train"].get("length_buckets")})
    if not bucketed:
        return []
    return [
        f"train.length_buckets is on for {', '.join(bucketed)}: batches are drawn from buckets of similar "
        "length (every example once per epoch), not the paper's uniform shuffle"
    ]


def _sum_or_none(values: Any) -> float | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


# ---------------------------------------------------------------------------------------------------------
# CLI


def run(args: argparse.Namespace) -> int:
    """`pdelra plan CONFIG` (declared in pdelra.planning.cli)."""
    import torch

    if args.gpus < 1:
        raise PlanError(f"--gpus {args.gpus}: give at least 1")
    if args.threads is not None and args.threads < 1:
        raise PlanError(f"--threads {args.threads}: give at least 1")
    if args.effect is not None and not 0 < args.effect < 1:  # (power_effect: its schema bounds it)
        raise PlanError(f"--effect {args.effect:g}: an accuracy difference between 0 and 1 (0.01 = 1 pp)")
    name = args.device
    # auto on a machine without CUDA: timing a GPU job's model on the CPU takes minutes and says nothing of
    # the GPU, so those tasks count at their runtime (the output says how to time them).
    calibrate_gpu_jobs = name != "auto" or torch.cuda.is_available()
    if args.gpu is not None:
        flops.gpu_model(args.gpu)  # refused before anything runs
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
        gpu=args.gpu,
    )
    print_plan(plan, title=f"plan of {args.config}")
    if args.power:
        effect = config.get("power_effect") if args.effect is None else args.effect
        print_power(config, _pilot_runs(args.tables), *_lra_hours(config, plan), effect=effect)
    elif args.tables is not None:
        raise PlanError("--tables PILOT goes with --power")
    elif args.effect is not None:
        raise PlanError("--effect goes with --power")
    if args.json is not None:
        write_json_atomic(args.json, plan)
    return 0


def _pilot_runs(pilot: Path | None) -> pd.DataFrame | None:
    """--tables PILOT: its runs.csv; PlanError naming the file when the folder has none."""
    import pandas as pd

    if pilot is None:
        return None
    runs_csv = pilot / "runs.csv"
    if not runs_csv.is_file():
        raise PlanError(f"{runs_csv}: no runs table; give --tables a folder `pdelra aggregate` wrote")
    return pd.read_csv(runs_csv)


def _lra_hours(config: Mapping[str, Any], plan: Mapping[str, Any]) -> tuple[float, str]:
    """The plan's device-hours of LRA training, every job counted (finished ones at what they took), and
    their unit: GPU-hours when the jobs ask for a GPU."""
    lra = [t for t in plan["tasks"] if t["rule"] in LRA_RULES]
    on_gpus = any(_task_gpus(config, t["task"]) for t in lra)
    return sum(t["device_hours"] for t in lra), "GPU-hours" if on_gpus else "device-hours"
