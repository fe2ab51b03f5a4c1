"""How stable and how right `pdelra plan --device cpu` is: its calibrated step times against real runs.

Prepares the config's LRA data as the workflow does (`pdelra generate`, `pdelra preprocess`, into a temporary
folder; or `--data` an already processed folder), calls `pdelra plan CONFIG --device cpu --no-cache` CALLS
times (a fresh process and no cache each), then trains each task's baseline run (variant none, seed 0) with
`pdelra train --device cpu`, as its workflow job would, and compares. Per task: the median calibrated step
time of the calls, their spread (max / min - 1) and the ratio of the median to the trained run's
`median_step_time_s`:

    PYTHONPATH=src .venv/bin/python benchmarks/plan_cpu_stability.py [config/demo.yaml] [--calls 5]

About 3 minutes for the demo on 2 cores. Run it on an idle machine (`uptime`): step times are wall-clock.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

import pdelra.builtin_parts  # (declares the built-in parts, as every entry does)
from pdelra.planning import experiment
from pdelra.planning.plan import load_config

ROOT = Path(__file__).resolve().parents[1]


def pdelra(*args: str) -> None:
    """Run one `pdelra` command of this checkout as the workflow does (a process of its own), stopping on
    failure."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-c", "import sys; from pdelra.cli import main; sys.exit(main())", *args]
    subprocess.run(command, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)


def prepare(config: dict[str, Any], tasks: list[str], work: Path) -> Path:
    """The tasks' processed data, as rules generate and preprocess make it: the processed folder."""
    processed = work / "processed"
    for task in tasks:
        settings = {"seed": config["data"]["seed"], **config["data"]["generate"].get(task, {})}
        raw = work / "raw" / task
        pdelra("generate", task, "--out", str(raw), "--params", json.dumps(settings))
        pdelra(
            "preprocess",
            task,
            "--raw",
            str(raw),
            "--out",
            str(processed / task),
            "--max-length",
            str(config["tasks"][task]["max_length"]),
            "--seed",
            str(config["data"]["seed"]),
        )
    return processed


def planned_step_times(config_file: Path, results: Path, json_out: Path) -> dict[str, float]:
    """{task: calibrated seconds per step} of the train rule, from one fresh `pdelra plan --device cpu`."""
    pdelra(
        "plan",
        str(config_file),
        "--device",
        "cpu",
        "--no-cache",
        "--results",
        str(results),
        "--json",
        str(json_out),
    )
    plan = json.loads(json_out.read_text())
    return {row["task"]: row["step_time_s"] for row in plan["tasks"] if row["rule"] == "train"}


def measured_step_time(config: dict[str, Any], task: str, processed: Path, out: Path) -> float:
    """`median_step_time_s` of the task's baseline run (none, seed 0) trained as its workflow job would."""
    job = next(
        job
        for job in experiment.training_jobs(config)
        if job.rule == "train" and job.task == task and job.run[1] == "none" and str(job.run[4]) == "0"
    )
    pdelra(
        "train",
        "--run-config",
        json.dumps(dict(job.config)),
        "--data",
        str(processed / task),
        "--out",
        str(out / task),
        "--checkpoint-dir",
        str(out / "checkpoints" / task),
        "--device",
        "cpu",
    )
    return float(json.loads((out / task / "metrics.json").read_text())["median_step_time_s"])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("config", type=Path, nargs="?", default=ROOT / "config" / "demo.yaml")
    parser.add_argument("--calls", type=int, default=5, help="fresh `pdelra plan` calls (default 5)")
    parser.add_argument(
        "--data", type=Path, default=None, help="processed data folder (default: generate it)"
    )
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.2f} (1-min average)")
    with tempfile.TemporaryDirectory(prefix="plan-cpu-") as tmp:
        work = Path(tmp)
        config = yaml.safe_load(args.config.read_text())
        tasks = sorted(
            {job.task for job in experiment.training_jobs(load_config(args.config)) if job.rule == "train"}
        )
        processed = args.data or prepare(config, tasks, work)
        config["data"]["processed_dir"] = str(processed)
        config_file = work / "config.yaml"
        config_file.write_text(yaml.safe_dump(config))
        calls = [
            planned_step_times(config_file, work / "results", work / "plan.json") for _ in range(args.calls)
        ]
        loaded = load_config(config_file)
        measured = {task: measured_step_time(loaded, task, processed, work / "runs") for task in tasks}
    print(f"load after: {os.getloadavg()[0]:.2f} (1-min average)")
    print("| task | calibrated s/step, each call | median | spread (max/min - 1) | trained s/step | ratio |")
    print("| :--- | :--- | ---: | ---: | ---: | ---: |")
    for task in tasks:
        times = [call[task] for call in calls]
        median = statistics.median(times)
        print(
            f"| {task} | {', '.join(f'{t:.4f}' for t in times)} | {median:.4f} | "
            f"{max(times) / min(times) - 1:.0%} | {measured[task]:.4f} | {median / measured[task]:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
