"""A config's own part whose jobs name an LRA task, as docs/add-a-related-system.md's `TrainingJob` does: the
plan prices it from its own finished runs or says "not estimated" and why (it never borrows the LRA model's
step time, and never crashes on a key the LRA's run config has and the part's has not), and the DAG
prepares the task's data before the part's jobs read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from conftest import load_config

from pdelra import parts
from pdelra.planning import experiment
from pdelra.planning import plan as P
from pdelra.runs import run_dir

# A part of two recurrent variants on processed ListOps; its run config carries only its own keys (no
# max_epochs or max_steps, which the LRA's has).
MODULE = """
from pdelra.parts import TrainingJob, TrainingRule, job_asks

NAME = "rnn"
TABLES = ("rnn_runs",)
RUNS = "rnn/runs"
RUN_FILE = "metrics.json"
TRAINING = (TrainingRule("rnn_train", "rnn/runs"),)


def training_jobs(config):
    section = config["rnn"]
    return [
        TrainingJob("rnn_train", ("listops", variant, "h1", "base", seed),
                    {"variant": variant, "seed": seed, "train": {"batch_size": 8}}, 0, section["runtime"],
                    **job_asks(config, {}), runs_dir="rnn/runs")
        for variant in ("lstm", "bilstm") for seed in section["seeds"]
    ]


def build(files, tables):
    pass


def run(run_config, out, device):
    pass
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "rnn_part.py").write_text(MODULE)
    config = load_config("tiny")
    config["data"]["processed_dir"] = str(tmp_path / "processed")
    config["parts"] = ["rnn_part"]
    config["rnn"] = {"seeds": [0, 1], "runtime": 7}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return P.load_config(path)


def _rows(plan: dict, rule: str = "rnn_train") -> list[dict]:
    return [row for row in plan["tasks"] if row["rule"] == rule]


def test_a_part_on_an_lra_task_is_not_priced_at_the_lra_step_time(config: dict, tmp_path: Path) -> None:
    # Calibrating listops times the LRA model; before, the part's jobs on listops took its step time (and
    # crashed first on the run config's missing `max_epochs`).
    lines: list[str] = []
    plan = P.make_plan(config, torch.device("cpu"), steps=1, results=tmp_path / "r", progress=lines.append)
    assert any(line.startswith("calibrating") for line in lines)  # the LRA's listops was timed
    (row,) = _rows(plan)
    assert row["jobs"] == 4 and row["step_time_source"] == "requested" and row["step_time_s"] is None
    assert row["steps"] is None and row["n_train"] is None  # the LRA task's counts are not its steps
    assert row["device_hours"] == pytest.approx(4 * 7 / 60)  # its runtime: a bound
    assert "4 of 4 rnn_train job(s) have no finished run" in row["not_estimated"]
    assert row["batch_size"] == 8
    lra = [r for r in plan["tasks"] if r["rule"] == "train" and r["task"] == "listops"]
    assert lra[0]["step_time_source"] == "calibrated" and lra[0]["not_estimated"] is None


def test_a_part_is_priced_from_its_own_finished_runs(config: dict, tmp_path: Path) -> None:
    # `pdelra part run` records each run's wall time beside its run file (pdelra.parts.TIMING_FILE); the
    # part's runs of a cell price the seeds of that cell still to run.
    results = tmp_path / "r"
    for variant, wall in (("lstm", 30.0), ("bilstm", 42.0)):
        out = run_dir(results / "rnn/runs", "listops", variant, "h1", "base", 0)
        out.mkdir(parents=True)
        (out / "metrics.json").write_text("{}")
        (out / parts.TIMING_FILE).write_text(json.dumps({"wall_time_s": wall, "device": "cpu"}))
    plan = P.make_plan(config, torch.device("cpu"), results=results, calibrate_tasks=False)
    (row,) = _rows(plan)
    assert row["done"] == 2 and row["step_time_source"] == "finished+runs"
    assert row["device_hours"] == pytest.approx(2 * (30 + 42) / 3600)
    assert row["device_hours_to_go"] == pytest.approx((30 + 42) / 3600)
    assert row["not_estimated"] is None


def test_the_plan_says_why_a_part_is_not_estimated(config: dict, tmp_path: Path, capsys) -> None:
    plan = P.make_plan(config, torch.device("cpu"), results=tmp_path / "r", calibrate_tasks=False)
    P.print_plan(plan)
    printed = capsys.readouterr().out
    assert "not estimated: rnn_train listops: 4 of 4 rnn_train job(s)" in printed


def test_the_lra_task_a_part_names_is_prepared_for_it(config: dict) -> None:
    # The LRA grid runs retrieval only; the part reads processed ListOps, so the DAG generates and
    # preprocesses it too (its jobs wait for the manifest: workflow/rules/parts.smk).
    config["grids"]["main"]["tasks"] = ["retrieval"]
    assert experiment.part_processed_tasks(config) == {"listops"}
    other = experiment.other_jobs(config)
    assert other["preprocess"] == 2 and other["generate"] == 2


def test_the_dag_runs_the_parts_jobs_after_their_data(config: dict, tmp_path: Path) -> None:
    """In a fresh data folder, each of the part's jobs has the processed manifest of its task as an input (so
    Snakemake prepares the data first: before, all four failed on "manifest.json: not found"), and the plan's
    job counts are the dry run's."""
    from conftest import make_workspace, run_snakemake
    from test_parts import _dry_run_jobs

    config["grids"]["main"]["tasks"] = ["retrieval"]  # ListOps is prepared for the part alone
    config["data"]["processed_dir"] = "data/fresh"
    ws = make_workspace(tmp_path / "ws", config)
    (ws / "rnn_part.py").write_text(MODULE)
    proc = run_snakemake(ws, "-n", timeout=180, check=True)
    jobs = _dry_run_jobs(proc.stdout + proc.stderr)
    assert len(jobs["rnn_train"]) == 4
    assert all("data/fresh/listops/manifest.json" in job["input"] for job in jobs["rnn_train"])
    counted = {rule: len(found) for rule, found in jobs.items()}
    assert experiment.workflow_jobs(config) == counted
