"""`pdelra plan --gpu MODEL`: a budget from the work (the model's FLOPs on a GPU model's datasheet peak at a
stated utilisation), without a GPU. Fast: no calibration, no training."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO, load_config

from pdelra.planning import experiment, flops
from pdelra.planning import plan as P
from pdelra.runs import run_dir

RECORDED_H200_HOURS = 364  # docs/measurements.md: the paper grid calibrated on an H200
FACTOR = 1.25  # the FLOPs estimate of the paper grid lies within this factor of it


def test_flops_of_a_tiny_model_by_hand() -> None:
    model = {"d_model": 4, "d_mlp": 8, "n_layers": 2, "n_heads": 2}
    # per token and layer: QKV + output 8·d² = 128, MLP 4·d·d_mlp = 128, attention 4·L·d = 160 at L = 10
    assert flops.forward_flops(model, 10, two_tower=False) == 2 * 10 * (128 + 128 + 160) == 8320
    assert flops.forward_flops(model, 10, two_tower=True) == 2 * 8320
    assert flops.step_flops(model, 10, two_tower=False, batch_size=3) == 3 * 3 * 8320
    # 1 TFLOP at 312 TFLOP/s (A100) and 10 % utilisation: 1 / 31.2 s
    assert flops.step_seconds(1e12, "a100", 0.1) == pytest.approx(1 / 31.2)


def test_unknown_gpu_is_refused_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    from pdelra.cli import main

    with pytest.raises(flops.GPUError) as err:
        flops.gpu_model("X100")
    message = str(err.value)
    assert "\n" not in message and "X100" in message
    assert all(name in message for name in ("A100", "H100", "H200", "L40S"))
    with caplog.at_level(logging.ERROR, logger="pdelra"):
        assert main(["plan", str(REPO / "config" / "config.yaml"), "--gpu", "X100"]) == 1
    assert "unknown GPU model; known: A100" in caplog.text


def _paper_config(tmp_path: Path) -> dict:
    config = P.load_config(REPO / "config" / "config.yaml")
    config["data"]["processed_dir"] = str(tmp_path / "processed")  # no manifest: published sizes
    return config


def test_paper_grid_on_h200_lands_near_the_recorded_calibration(tmp_path: Path) -> None:
    config = _paper_config(tmp_path)
    plan = P.make_plan(
        config, torch.device("cpu"), calibrate_tasks=False, results=tmp_path / "none", gpu="H200"
    )
    lra = [row for row in plan["tasks"] if row["rule"] in P.LRA_RULES]
    assert {row["step_time_source"] for row in lra} == {"flops"}
    hours = sum(row["device_hours"] for row in lra)
    assert RECORDED_H200_HOURS / FACTOR < hours < RECORDED_H200_HOURS * FACTOR, hours
    # The related systems' own models are not modelled: they stay at their runtime.
    assert {row["step_time_source"] for row in plan["tasks"] if row["rule"] not in P.LRA_RULES} == {
        "requested"
    }
    assert plan["flops"]["utilisation"] == flops.DEFAULT_UTILISATION
    assert plan["total"]["requested_hours"] > plan["total"]["device_hours"]
    # A slower card takes longer, in the ratio of the peaks.
    slower = P.make_plan(
        config, torch.device("cpu"), calibrate_tasks=False, results=tmp_path / "none", gpu="A100"
    )
    slower_hours = sum(row["device_hours"] for row in slower["tasks"] if row["rule"] in P.LRA_RULES)
    assert slower_hours / hours == pytest.approx(989 / 312, rel=0.02)


def test_cli_source_column_says_flops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pdelra.cli import main

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["data"]["processed_dir"] = str(tmp_path / "processed")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "plan.json"
    args = ["plan", str(path), "--gpu", "h200", "--no-calibration", "--results", str(tmp_path / "r")]
    assert main([*args, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert any(line.startswith("train ") and " flops " in line for line in printed.splitlines())
    assert "FLOPs estimate on H200: 989 TFLOP/s" in printed and "flops = estimated" in printed
    assert "FLOPs not modelled, at their runtime" in printed
    assert json.loads(out.read_text())["flops"]["gpu"] == "H200"


def _finish(results: Path, job: experiment.TrainingJob, step_s: float, device: str) -> None:
    task, variant, scale, setting, seed = job.run
    out = run_dir(results / experiment.TRAINING_RULES[job.rule].runs_dir, *job.run)
    out.mkdir(parents=True, exist_ok=True)
    metrics = {"task": task, "variant": variant, "scale": scale, "setting": setting, "seed": seed,
               "median_step_time_s": step_s, "wall_time_s": 60.0, "device": device}  # fmt: skip
    (out / "metrics.json").write_text(json.dumps(metrics))


def test_finished_runs_win_and_set_the_utilisation(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["data"]["processed_dir"] = str(tmp_path / "processed")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    loaded = P.load_config(path)
    jobs = [job for job in experiment.training_jobs(loaded) if job.rule in P.LRA_RULES]
    results = tmp_path / "results"
    # A run on another card says nothing of an H200's utilisation.
    _finish(results, jobs[0], 0.5, "NVIDIA A100-SXM4-80GB")
    plan = P.make_plan(loaded, torch.device("cpu"), calibrate_tasks=False, results=results, gpu="H200")
    assert plan["flops"]["utilisation"] == flops.DEFAULT_UTILISATION
    assert "finished" in plan["total"]["device_hours_source"]
    assert "flops" in plan["total"]["device_hours_source"]
    finished = [row for row in plan["tasks"] if row["task"] == jobs[0].task and row["rule"] == jobs[0].rule]
    assert finished[0]["done"] >= 1
    # One on an H200: its step time fixes the utilisation the others are estimated at.
    _finish(results, jobs[0], 0.5, "NVIDIA H200")
    plan = P.make_plan(loaded, torch.device("cpu"), calibrate_tasks=False, results=results, gpu="H200")
    estimate = plan["flops"]
    length = estimate["lengths"][jobs[0].task]
    work = flops.step_flops(
        jobs[0].config["model"], length, jobs[0].task == "retrieval", jobs[0].config["train"]["batch_size"]
    )
    assert estimate["utilisation"] == pytest.approx(work / (0.5 * 989e12))
    assert "fitted to 1 measured" in estimate["utilisation_source"]


def test_gpu_names_match_their_model_only() -> None:
    assert flops.same_gpu("NVIDIA H200", "H200") and flops.same_gpu("NVIDIA H100 80GB HBM3", "h100")
    assert not flops.same_gpu("NVIDIA H100 80GB HBM3", "H200") and not flops.same_gpu(None, "H200")
    assert not flops.same_gpu("Intel(R) Xeon(R) CPU", "A100")
