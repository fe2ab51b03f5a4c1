"""The workflow at a hundred times the paper's grid: DAG build and aggregation over >= 10,000 runs.

What it measures and its options: WORKFLOW_SCALE_DESCRIPTION and add_workflow_scale_arguments in
pdelra.bench.cli (`pdelra bench workflow-scale --help`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pdelra.bench.args import positive_int
from pdelra.nn.model import SCALES, VARIANTS
from pdelra.runs import BASE_SETTING, COMPLETED, run_dir

WORKFLOW_PATHS = ("Snakefile", "workflow", "config", "envs", "profiles")
MAX_ARG_STRLEN = 128 * 1024  # Linux: one argv string (bash -c "<command>") may not exceed this
GOALS = {"dry_run_s": 30.0, "aggregate_s": 30.0, "aggregate_peak_rss_mb": 2048.0}


# A small parent that runs the measured command and reports its children's peak RSS: measured from this
# (large) process, the peak would include the copy of this process that exists between fork and exec.
_WRAPPER = (
    "import json, resource, subprocess, sys; status = subprocess.run(sys.argv[1:]).returncode; "
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "print(json.dumps([status, usage.ru_maxrss, usage.ru_utime + usage.ru_stime]), file=sys.stderr)"
)


def _timed(command: list[str], cwd: Path) -> dict[str, Any]:
    """Run `command`; its wall time, CPU time (user + system), exit status, peak RSS (KiB → MB) and output
    (stdout + stderr)."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, *command], cwd=cwd, env=env,
                          capture_output=True, text=True)  # fmt: skip
    wall = time.perf_counter() - start
    *rest, last = proc.stderr.rstrip("\n").split("\n")
    status, peak_kb, cpu = json.loads(last)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "status": status,
            "peak_rss_mb": round(peak_kb / 1024, 1), "output": proc.stdout + "\n".join(rest)}  # fmt: skip


def _job_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    table = re.search(r"job\s+count\n[-\s]+\n(.*?)\n\s*total\s+(\d+)", text, flags=re.S)
    if table:
        for line in table.group(1).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                counts[parts[0]] = int(parts[1])
        counts["total"] = int(table.group(2))
    return counts


def scale_config(repo: Path, runs: int) -> dict[str, Any]:
    """The paper config with grids.scale = 5 tasks x every variant x 4 scales x enough seeds, alone."""
    import yaml

    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    tasks = list(config["tasks"])
    variants = [v for v in VARIANTS if v != "none"]
    per_seed = len(tasks) * len(variants) * len(SCALES)
    seeds = math.ceil(runs / per_seed)
    config["experiment"] = "scale"
    config["grids"] = {
        "scale": {"tasks": tasks, "variants": variants, "scales": list(SCALES), "seeds": list(range(seeds))}
    }
    config["run_grids"] = ["scale"]
    config.pop("lm", None)  # the grid is what is measured
    return config


def dry_run(repo: Path, work: Path, runs: int) -> dict[str, Any]:
    import yaml

    for name in WORKFLOW_PATHS:
        source = repo / name
        if source.is_dir():
            shutil.copytree(source, work / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", ".snakemake"))  # fmt: skip
        elif source.is_file():
            shutil.copy2(source, work / name)
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(scale_config(repo, runs), sort_keys=False))
    snakemake = str(Path(sys.executable).parent / "snakemake")
    result = _timed([snakemake, "-n", "--workflow-profile", "workflow/profiles/default"], work)
    output = result.pop("output")
    result["jobs"] = _job_counts(output)
    # printshellcmds is on: each job's shell command is printed as "Shell command: ..." (run: blocks are not).
    commands = [
        line.split("Shell command: ", 1)[1] for line in output.splitlines() if "Shell command: " in line
    ]
    longest = max(map(len, commands), default=0)
    result["longest_command"] = {"chars": longest, "limit": MAX_ARG_STRLEN, "fits": longest < MAX_ARG_STRLEN}
    if result["status"] != 0:
        result["error"] = output[-2000:]
    quiet = _timed([snakemake, "-n", "--quiet", "--workflow-profile", "workflow/profiles/default"], work)
    quiet.pop("output")
    result["quiet_wall_s"], result["quiet_cpu_s"] = quiet["wall_s"], quiet["cpu_s"]
    return result


def growth(small: dict[str, Any], large: dict[str, Any]) -> dict[str, Any]:
    """How the dry run's time grows with its jobs between the two grids: linear when the time ratio is about
    the jobs ratio (less, with a fixed start-up), quadratic near its square."""
    jobs = large["jobs"]["total"] / small["jobs"]["total"]
    out: dict[str, Any] = {"jobs_ratio": round(jobs, 2)}
    for key in ("wall_s", "cpu_s"):
        ratio = large[key] / small[key]
        out[f"{key.removesuffix('_s')}_ratio"] = round(ratio, 2)
        # the exponent k of time ∝ jobs^k between the two sizes: 1 linear, 2 quadratic
        out[f"{key.removesuffix('_s')}_exponent"] = round(math.log(ratio) / math.log(jobs), 2)
    return out


def _metrics(task: str, variant: str, scale: str, seed: int, rng: random.Random) -> dict[str, Any]:
    layers = {f"encoder.blocks.{i}.mlp_output": {"mean": 0.1, "min": 0.05, "max": 0.2} for i in range(6)}
    history = [
        {"epoch": e, "steps": 100 * e, "train_loss": rng.random(), "train_accuracy": rng.random(),
         "val_loss": rng.random(), "val_accuracy": rng.random(), "lr": 1e-3, "alpha": layers}
        for e in range(1, 51)
    ]  # fmt: skip
    return {
        "schema_version": 1, "task": task, "variant": variant, "scale": scale, "setting": BASE_SETTING,
        "seed": seed,
        "status": COMPLETED, "diverged_at_step": None, "stop_reason": "max_epochs",
        "test_accuracy": rng.random(), "test_loss": rng.random(), "best_val_accuracy": rng.random(),
        "best_epoch": 50, "epochs_run": 50, "steps_run": 5000, "steps_per_epoch": 100, "planned_steps": 5000,
        "stopped_early": False, "history": history, "parameter_count": 1_000_000,
        "diffusion_parameter_count": 1000, "seeds": {"python": 42 + seed, "numpy": seed, "torch": 1 + seed},
        "config_hash": "0" * 64, "data_manifest_hash": "1" * 64, "run_config": {},
        "code_version": {"package": "0.1.0", "git": "bench"}, "versions": {}, "device": "bench",
        "num_threads": 1, "wall_time_s": 3600.0, "median_step_time_s": 0.1, "peak_memory_bytes": 2**30,
        "peak_memory_kind": "cuda", "resumed_count": 0,
    }  # fmt: skip


def aggregate_many(repo: Path, work: Path, runs: int) -> dict[str, Any]:
    grid = scale_config(repo, runs)["grids"]["scale"]
    rng = random.Random(0)
    root = work / "runs"
    count = 0
    started = time.perf_counter()
    for task in grid["tasks"]:
        for variant in grid["variants"]:
            for scale in grid["scales"]:
                for seed in grid["seeds"]:
                    folder = run_dir(root, task, variant, scale, BASE_SETTING, seed)
                    folder.mkdir(parents=True, exist_ok=True)
                    text = json.dumps(_metrics(task, variant, scale, seed, rng), indent=2)
                    (folder / "metrics.json").write_text(text)
                    count += 1
    generated = time.perf_counter() - started
    pdelra = [
        sys.executable,
        "-m",
        "pdelra.cli",
        "aggregate",
        "--runs",
        str(root),
        "--out",
        str(work / "tables"),
    ]
    result = _timed(pdelra, work)
    output = result.pop("output")
    if result["status"] != 0:
        result["error"] = output[-2000:]
    size = sum(p.stat().st_size for p in root.rglob("metrics.json"))
    return {**result, "files": count, "total_mb": round(size / 2**20, 1), "generate_s": round(generated, 1)}


def run(args: argparse.Namespace) -> int:
    repo = args.workflow.resolve()
    if not (repo / "Snakefile").is_file():
        print(f"no Snakefile in {repo}: run from the repository root or give --workflow", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"runs": args.runs, "goals": GOALS, "loadavg": os.getloadavg(),
                              "cpus": os.cpu_count()}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pdelra-scale-") as name:
        work = args.keep or Path(name)
        work.mkdir(parents=True, exist_ok=True)
        # Each measurement in a fresh child of its own, so RUSAGE_CHILDREN's peak is that child's.
        small = args.small_runs or max(1, args.runs // 4)
        measurements = [("dry_run_small", "dry_run", small), ("dry_run", "dry_run", args.runs)]
        measurements = [] if args.skip_dry_run else measurements
        measurements += [] if args.skip_aggregate else [("aggregate", "aggregate", args.runs)]
        for key, only, runs in measurements:
            child = [sys.executable, "-m", "pdelra.bench.workflow_scale", f"--only={only}",
                     f"--runs={runs}", f"--workflow={repo}", f"--work={work / key}"]  # fmt: skip
            print(f"{key}: {runs} runs ...", file=sys.stderr, flush=True)
            proc = subprocess.run(child, capture_output=True, text=True)
            if proc.returncode != 0:
                result[key] = {"error": proc.stderr[-2000:]}
            else:
                result[key] = json.loads(proc.stdout)
        if all("jobs" in result.get(key, {}) for key in ("dry_run_small", "dry_run")):
            result["dry_run_growth"] = growth(result["dry_run_small"], result["dry_run"])
    result["loadavg_after"] = os.getloadavg()
    result["met"] = {
        "dry_run_s": result.get("dry_run", {}).get("wall_s", math.inf) < GOALS["dry_run_s"],
        "aggregate_s": result.get("aggregate", {}).get("wall_s", math.inf) < GOALS["aggregate_s"],
        "aggregate_peak_rss_mb": result.get("aggregate", {}).get("peak_rss_mb", math.inf)
        < GOALS["aggregate_peak_rss_mb"],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    return 0


def _child(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=("dry_run", "aggregate"), required=True)
    parser.add_argument("--runs", type=positive_int, required=True)
    parser.add_argument("--workflow", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    measure = dry_run if args.only == "dry_run" else aggregate_many
    print(json.dumps(measure(args.workflow, args.work, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
