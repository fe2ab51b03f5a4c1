"""The workflow for real (slow): the tiny experiment end to end, incremental reruns, resume after a kill.

One completed run of tests/configs/tiny.yaml is made per session (conftest's `finished_tiny`, shared with
the DVC and diagnostics tests); each test that changes anything works on its own copy of it (copied with
mtimes, and with Snakemake's metadata, so the copy is exactly as up to date as the original).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import copy_workspace, dry_run_jobs, load_config, run_snakemake, start_snakemake

from pdelra.runs import BASE_SETTING, RUN_KEYS, run_dir

pytestmark = pytest.mark.slow

EXPERIMENT = "tiny"


@pytest.fixture
def completed(finished_tiny: Path) -> Path:
    return finished_tiny


@pytest.fixture
def copy_of_completed(finished_tiny: Path, tmp_path: Path) -> Path:
    return copy_workspace(finished_tiny, tmp_path / "ws")


def _edit_config(workspace: Path, edit) -> None:  # type: ignore[no-untyped-def]
    path = workspace / "config" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    edit(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _jobs_beyond_training(jobs: dict[str, int]) -> dict[str, int]:
    """The jobs that follow training (aggregate, report, all and the optional DVC `version`)."""
    return {rule: n for rule, n in jobs.items() if rule not in ("train",)}


def test_tiny_experiment_end_to_end_then_nothing_to_do(completed: Path) -> None:
    results = completed / "results" / EXPERIMENT
    config = load_config("tiny")
    grid = config["grids"]["main"]
    n_runs = len(grid["tasks"]) * len(grid["variants"]) * len(grid["scales"]) * len(grid["seeds"])

    runs = pd.read_csv(results / "tables" / "runs.csv")
    assert len(runs) == n_runs
    assert not runs.duplicated(list(RUN_KEYS)).any()
    assert set(runs["setting"]) == {BASE_SETTING}
    assert set(runs["status"]) <= {"completed", "diverged"}

    assert '<a href="report.html">' in (results / "report" / "index.html").read_text()
    page = (results / "report" / "report.html").read_text()
    assert "<table" in page and "<img" in page
    assert list((results / "report" / "figures").glob("*.png"))

    # Checkpoints are removed once a run's metrics exist, and once Snakemake has stored the outputs, so are
    # the runs' kept final files (finished/) and their locks: no file is left; logs exist for every job.
    assert not [path for path in (results / "checkpoints").rglob("*") if path.is_file()]
    assert len(list((results / "logs" / "train").rglob("*.log"))) == n_runs

    proc = run_snakemake(completed, "-n", timeout=120, check=True)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_editing_one_task_lr_reruns_only_that_tasks_training(copy_of_completed: Path) -> None:
    def edit(config: dict) -> None:
        config["tasks"]["listops"].setdefault("train", {})["lr"] = 0.001

    _edit_config(copy_of_completed, edit)
    proc = run_snakemake(copy_of_completed, "-n", timeout=120, check=True)
    output = proc.stdout + proc.stderr
    train_jobs = [
        block for block in re.split(r"\n(?=(?:local)?rule \w+:)", output) if block.startswith("rule train:")
    ]
    tasks_to_train = [
        t for block in train_jobs for t in re.findall(r"wildcards: task=(\w+), variant=", block)
    ]
    assert sorted(tasks_to_train) == ["listops", "listops"], output[-3000:]
    jobs = dry_run_jobs(copy_of_completed)
    assert jobs.pop("train") == 2
    assert jobs.pop("diagnose", 0) == 1  # the part of listops' runs holding them (it measures only those two)
    assert set(jobs) <= {"aggregate", "diagnostics_table", "report", "all", "version"}
    assert "preprocess" not in jobs and "generate" not in jobs


def test_editing_the_report_notebook_reruns_only_the_report(copy_of_completed: Path) -> None:
    notebook_path = copy_of_completed / "workflow" / "notebooks" / "report.ipynb"
    notebook = json.loads(notebook_path.read_text())
    notebook["cells"].append(
        {"id": "extra", "cell_type": "markdown", "metadata": {}, "source": "One more note."}
    )
    notebook_path.write_text(json.dumps(notebook, indent=1))
    jobs = dry_run_jobs(copy_of_completed)
    assert jobs.get("report") == 1
    assert "train" not in jobs and "aggregate" not in jobs
    assert set(jobs) <= {"report", "all", "version"}


def test_a_killed_training_job_resumes_from_its_checkpoint(copy_of_completed: Path) -> None:
    """Kill snakemake and its job mid-training (as a node failure would); the rerun resumes the checkpoint."""
    workspace = copy_of_completed

    def edit(config: dict) -> None:
        # One new, longer run on the data already prepared: a checkpoint every step, no early stop.
        config["grids"]["main"] = {"tasks": ["listops"], "variants": ["none"], "scales": ["h1"], "seeds": [7]}
        config["defaults"]["train"].update(
            max_steps=400, max_epochs=200, patience=200, checkpoint_every_steps=1, num_threads=1
        )

    _edit_config(workspace, edit)
    run = run_dir(Path("results", EXPERIMENT, "runs"), "listops", "none", "h1", BASE_SETTING, 7)
    checkpoint = run_dir(
        workspace / "results" / EXPERIMENT / "checkpoints", "listops", "none", "h1", BASE_SETTING, 7
    )
    process = start_snakemake(workspace, "--cores", "1")
    try:
        deadline = time.monotonic() + 240
        while not (checkpoint / "checkpoint.pt").exists():
            assert process.poll() is None, (workspace / "snakemake-background.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.05)
        # Paused as soon as its first checkpoint exists, so it cannot finish and unlock meanwhile however fast
        # the CPU (a fixed sleep first would race it). A second user (or a second terminal) on the same
        # folder is refused in one line: the lock's owner, a Snakemake of this host, still runs
        # (pdelra.planning.stale_lock).
        os.killpg(process.pid, signal.SIGSTOP)
        second = run_snakemake(workspace, "--cores", "1", timeout=120)
        assert second.returncode != 0
        refusal = [line for line in second.stderr.splitlines() if line.startswith("Cannot start")]
        assert len(refusal) == 1 and "still runs this workflow" in refusal[0], second.stderr[-3000:]
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    assert not (workspace / run / "metrics.json").exists(), "the run finished before it could be killed"
    assert (checkpoint / "checkpoint.pt").exists()

    # A killed snakemake leaves its lock behind (as after a power loss): the same command again removes it
    # (its owner is gone) and resumes; no --unlock.
    rerun = run_snakemake(workspace, timeout=600, check=True)
    assert "Removed the lock left by Snakemake pid" in rerun.stderr, rerun.stderr[-3000:]
    metrics = json.loads((workspace / run / "metrics.json").read_text())
    assert metrics["resumed_count"] >= 1
    assert metrics["steps_run"] == 400
    log = run_dir(
        workspace / "results" / EXPERIMENT / "logs" / "train", "listops", "none", "h1", BASE_SETTING, 7
    )
    log = log.with_name(log.name + ".log")
    assert "resum" in log.read_text().lower()
