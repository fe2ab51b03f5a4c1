"""`pdelra plan CONFIG`: what a workflow config will cost before it runs.

Per task and in total: the training jobs (the union of the selected grids, as the workflow builds it), the
planned optimizer steps per job (ceil(n_train / batch_size) × max_epochs, capped by max_steps: an upper
bound, since early stopping may end a run sooner), device-hours, disk, and each task's peak memory with
whether it needs micro-batching (`train.micro_batch_size`) on this device.

Where the numbers come from (each is labelled in the output):
- example counts: the processed data's manifest (`data.processed_dir/{task}/manifest.json`) when present,
  else the config's `data.generate` sizes (generated data), else the Long Range Arena's published split
  sizes (real data): `manifest`, `config` or `nominal`;
- step time: the median `median_step_time_s` of finished runs of the same (task, variant, scale) under
  `results/{experiment}/runs` when there are any (`runs`), else a calibration on this device (`calibrated`):
  a few timed forward + backward + AdamW steps of the task's baseline model on random tokens at the task's
  max_length, at the job's batch size or, when that is too slow or does not fit, at a smaller batch scaled
  up linearly. Diffusion variants cost 1–6 % more than the baseline (`pdelra bench train-step`); the
  calibration times the baseline only, so its estimate leans low by that much;
- evaluation: each epoch evaluates the validation split, at one third of a training step's cost per
  example (forward only), plus one test pass per job;
- disk: per job metrics.json (~50 kB) and model.safetensors (4 bytes per parameter); while a job trains,
  its checkpoint (weights, AdamW moments, best weights: 16 bytes per parameter).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Mapping
from itertools import product
from pathlib import Path
from typing import Any

from pdelra.atomic import write_json_atomic
from pdelra.errors import UserError

log = logging.getLogger(__name__)


# Published LRA split sizes (Tay et al. 2021; Pathfinder-32 split 80/10/10 and IMDb/CIFAR-10 validation carved
# out of train by preprocessing, as this project does): used only without a manifest or generate sizes.
NOMINAL_COUNTS = {
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


class PlanError(UserError, ValueError):
    """A config that cannot be planned; the message names the file and key."""


# ---------------------------------------------------------------------------------------------------------
# The config, read as the workflow reads it


def load_config(path: Path) -> dict[str, Any]:
    """The workflow config, checked as `pdelra config check` does (YAML syntax with its line, every schema
    problem), with the schema's defaults filled in (as Snakemake's `validate(..., set_default=True)` does)."""
    import jsonschema
    import yaml

    from pdelra.config_check import file_problems, load_schema

    problems = file_problems(path)
    if problems:
        raise PlanError(f"invalid config {path}:\n" + "\n".join(f"  - {problem}" for problem in problems))
    config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    for _ in _defaults_filling(jsonschema.Draft7Validator)(load_schema()).iter_errors(config):
        pass  # valid (checked above): iterating fills in the defaults
    return config


def _defaults_filling(base: Any) -> Any:
    """A jsonschema validator class that writes each property's `default` into the instance."""
    import jsonschema

    validate_properties = base.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(name, json.loads(json.dumps(sub["default"])))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(base, {"properties": set_defaults})


def selected_runs(config: Mapping[str, Any]) -> list[tuple[str, str, str, str, int]]:
    """Each distinct (task, variant, scale, setting, seed) of the selected grids, as the workflow has them."""
    from pdelra import runs as run_layout

    runs: set[tuple[str, str, str, str, int]] = set()
    for name in config["run_grids"]:
        if name not in config.get("grids", {}):
            raise PlanError(f"run_grids names {name!r}, but grids.{name} is not defined in the config")
        grid = config["grids"][name]
        settings = run_layout.grid_settings(grid, f"grids.{name}")
        runs.update(product(grid["tasks"], grid["variants"], grid["scales"], settings, grid["seeds"]))
    return sorted(runs)


def _merged(config: Mapping[str, Any], section: str, task: str) -> dict[str, Any]:
    return {**config["defaults"].get(section, {}), **config["tasks"][task].get(section, {})}


# ---------------------------------------------------------------------------------------------------------
# Facts per task


def task_data(config: Mapping[str, Any], task: str) -> dict[str, Any]:
    """Example counts, vocabulary, classes and max_length of a task, with where the counts came from."""
    manifest_file = Path(config["data"]["processed_dir"]) / task / "manifest.json"
    max_length = int(config["tasks"][task]["max_length"])
    if manifest_file.exists():
        manifest = json.loads(manifest_file.read_text())
        return {
            "counts": dict(manifest["counts"]),
            "vocab_size": int(manifest["vocab_size"]),
            "num_classes": int(manifest["num_classes"]),
            "max_length": int(manifest["max_length"]),
            "source": "manifest",
        }
    generate = config["data"].get("generate", {}).get(task)
    if config["data"].get("source") == "generated":
        from pdelra.data.generate import DEFAULTS

        sizes = {**DEFAULTS[task], **(generate or {})}
        counts = {"train": sizes["n_train"], "val": sizes["n_val"], "test": sizes["n_test"]}
        source = "config"
    else:
        counts, source = dict(NOMINAL_COUNTS[task]), "nominal"
    return {
        "counts": counts,
        "vocab_size": NOMINAL_VOCAB[task],
        "num_classes": NOMINAL_CLASSES[task],
        "max_length": max_length,
        "source": source,
    }


def planned_job_steps(n_train: int, train: Mapping[str, Any]) -> int:
    from pdelra.training.schedule import planned_steps

    return planned_steps(math.ceil(n_train / train["batch_size"]), train["max_epochs"], train["max_steps"])


def finished_step_times(config: Mapping[str, Any], results: Path | None) -> dict[tuple[str, str, str], float]:
    """Median step time of finished runs per (task, variant, scale), from their metrics.json."""
    from pdelra import runs as run_layout

    root = (results or Path("results") / config["experiment"]) / "runs"
    times: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    if root.is_dir():
        for path in run_layout.find_run_files(root):
            try:
                metrics = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if metrics.get("median_step_time_s"):
                key = (metrics["task"], metrics["variant"], metrics["scale"])
                times[key].append(float(metrics["median_step_time_s"]))
    return {key: statistics.median(values) for key, values in times.items()}


# ---------------------------------------------------------------------------------------------------------
# Calibration


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


def make_plan(
    config: Mapping[str, Any],
    device: Any,
    steps: int = 3,
    max_calibration_batch: int | None = None,
    results: Path | None = None,
    calibrate_tasks: bool = True,
) -> dict[str, Any]:
    runs = selected_runs(config)
    finished = finished_step_times(config, results)
    by_task: dict[str, list[tuple[str, str, str, str, int]]] = defaultdict(list)
    for run in runs:
        by_task[run[0]].append(run)
    tasks = []
    for task, task_runs in sorted(by_task.items()):
        if task not in config["tasks"]:
            raise PlanError(f"the selected grids use task {task!r}, which has no entry under 'tasks'")
        data = task_data(config, task)
        model_cfg, train = _merged(config, "model", task), _merged(config, "train", task)
        job_steps = planned_job_steps(data["counts"]["train"], train)
        calibration = None
        if calibrate_tasks:
            calibration = calibrate(
                task,
                data,
                model_cfg,
                train["batch_size"],
                device,
                steps,
                max_calibration_batch,
                bool(model_cfg.get("fused_diffusion", True)),
            )
        seconds = 0.0
        step_sources: set[str] = set()
        for _, variant, scale, _, _ in task_runs:
            step_s = finished.get((task, variant, scale))
            if step_s is not None:
                step_sources.add("runs")
            elif calibration is not None:
                step_s = calibration["step_s"]
                step_sources.add("calibrated")
            else:
                step_sources.add("unknown")
                continue
            per_example = step_s / train["batch_size"]
            epochs = min(
                train["max_epochs"],
                math.ceil(job_steps / math.ceil(data["counts"]["train"] / train["batch_size"])),
            )
            evaluation = per_example * EVAL_COST * (epochs * data["counts"]["val"] + data["counts"]["test"])
            seconds += job_steps * step_s + evaluation
        params = calibration["parameters"] if calibration else None
        peak = calibration["peak_memory_bytes"] if calibration else None
        device_memory = calibration["_device_memory"] if calibration else None
        micro = None
        if peak is not None and device_memory is not None and peak > 0.9 * device_memory:
            static = params * 16
            per_example = (peak - static) / train["batch_size"]
            micro = max(1, int((0.9 * device_memory - static) // per_example))
        tasks.append(
            {
                "task": task,
                "jobs": len(task_runs),
                "n_train": data["counts"]["train"],
                "counts_source": data["source"],
                "batch_size": train["batch_size"],
                "max_length": data["max_length"],
                "steps_per_job": job_steps,
                "steps": job_steps * len(task_runs),
                "step_time_s": None if calibration is None else calibration["step_s"],
                "step_time_source": "+".join(sorted(step_sources)),
                "calibration_batch": None if calibration is None else calibration["measured_batch"],
                "device_hours": seconds / 3600 if "unknown" not in step_sources else None,
                "peak_memory_bytes": peak,
                "needs_micro_batching": None if peak is None else micro is not None,
                "suggested_micro_batch_size": micro,
                "parameters": params,
                "disk_bytes": None if params is None else len(task_runs) * (4 * params + METRICS_BYTES),
                "checkpoint_bytes": None if params is None else 16 * params,
            }
        )
    total = {
        "jobs": sum(t["jobs"] for t in tasks),
        "steps": sum(t["steps"] for t in tasks),
        "device_hours": _sum_or_none(t["device_hours"] for t in tasks),
        "disk_bytes": _sum_or_none(t["disk_bytes"] for t in tasks),
    }
    return {"device": str(device), "tasks": tasks, "total": total}


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


def print_plan(plan: Mapping[str, Any]) -> None:
    print(f"plan on {plan['device']} (steps: upper bound, early stopping may end runs sooner)")
    header = (
        f"{'task':<11}{'jobs':>5}{'n_train':>9} {'from':<9}{'steps/job':>10}{'steps':>10}{'s/step':>9} "
        f"{'time from':<11}{'dev-hours':>10}{'peak mem':>10}{'micro':>7}{'disk':>10}"
    )
    print(header)
    for t in plan["tasks"]:
        step = "-" if t["step_time_s"] is None else f"{t['step_time_s']:.3f}"
        hours = "-" if t["device_hours"] is None else f"{t['device_hours']:.3g}"
        micro = (
            "-"
            if t["needs_micro_batching"] is None
            else (str(t["suggested_micro_batch_size"]) if t["needs_micro_batching"] else "no")
        )
        print(
            f"{t['task']:<11}{t['jobs']:>5}{t['n_train']:>9} {t['counts_source']:<9}{t['steps_per_job']:>10}"
            f"{t['steps']:>10}{step:>9} {t['step_time_source']:<11}{hours:>10}"
            f"{_fmt_bytes(t['peak_memory_bytes']):>10}{micro:>7}{_fmt_bytes(t['disk_bytes']):>10}"
        )
    total = plan["total"]
    hours = "-" if total["device_hours"] is None else f"{total['device_hours']:.3g}"
    print(
        f"{'total':<11}{total['jobs']:>5}{'':>9} {'':<9}{'':>10}{total['steps']:>10}{'':>9} {'':<11}"
        f"{hours:>10}{'':>10}{'':>7}{_fmt_bytes(total['disk_bytes']):>10}"
    )


# ---------------------------------------------------------------------------------------------------------
# CLI


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="jobs, optimizer steps, device-hours, disk and peak memory a config will cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", type=Path, help="workflow config (e.g. config/config.yaml)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
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
        "--no-calibration", action="store_true", help="steps and jobs only (and finished runs' times)"
    )
    parser.add_argument(
        "--results", type=Path, default=None, help="results/{experiment} folder with finished runs"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads for the CPU calibration")
    parser.add_argument("--json", type=Path, default=None, help="also write the plan to this JSON file")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

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
    )
    print_plan(plan)
    if args.json is not None:
        write_json_atomic(args.json, plan)
    return 0
