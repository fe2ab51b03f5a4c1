"""`cluster.runtime_from: estimate`: an LRA run asks for its FLOPs estimate on `cluster.gpu_model` times
`cluster.runtime_margin`, at least MIN_ESTIMATED_RUNTIME and at most `cluster.max_runtime`, in the plan and in
the workflow's own request (pdelra.planning.estimate). Fast: no training, one dry run of the tiny config."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO, load_config, make_workspace, run_snakemake

from pdelra.planning import estimate, experiment, flops
from pdelra.planning import plan as P
from pdelra.planning.config_check import config_problems

LISTOPS = {"counts": {"train": 96_000, "val": 2_000, "test": 2_000}, "max_length": 2000}


def _run(epochs: int = 5, batch: int = 32) -> dict:
    model = {"d_model": 128, "d_mlp": 512, "n_layers": 2, "n_heads": 8}
    return {
        "task": "listops",
        "model": model,
        "train": {"batch_size": batch, "max_epochs": epochs, "max_steps": None},
    }


def test_the_estimate_scales_with_length_and_epochs_as_the_flops_model_says():
    one = estimate.estimated_seconds(_run(), LISTOPS, "H200")
    longer = estimate.estimated_seconds(_run(), {**LISTOPS, "max_length": 4000}, "H200")
    model = _run()["model"]
    assert longer / one == pytest.approx(
        flops.forward_flops(model, 4000, False) / flops.forward_flops(model, 2000, False)
    )
    # Twice the epochs: twice the training steps and validations; the test set is evaluated once either way.
    step_s = flops.step_seconds(flops.step_flops(model, 2000, False, 32), "H200", flops.DEFAULT_UTILISATION)
    test_eval = step_s / 32 * estimate.EVAL_COST * 2_000
    assert estimate.estimated_seconds(_run(epochs=10), LISTOPS, "H200") == pytest.approx(2 * one - test_eval)
    # A slower card: the ratio of the peaks.
    assert estimate.estimated_seconds(_run(), LISTOPS, "A100") / one == pytest.approx(989 / 312)


def _cluster(**cluster) -> dict:
    return {"cluster": {"runtime_from": "estimate", "gpu_model": "H200", "max_runtime": 1440, **cluster}}


def test_margin_floor_and_cap_are_applied():
    run, resources = _run(epochs=50), {"runtime": 720}
    seconds = estimate.estimated_seconds(run, LISTOPS, "H200")
    asked = estimate.run_minutes(_cluster(runtime_margin=3.0), run, resources, LISTOPS)
    assert asked == math.ceil(3.0 * seconds / 60) > estimate.MIN_ESTIMATED_RUNTIME
    tiny = {"counts": {"train": 64, "val": 16, "test": 16}, "max_length": 64}
    assert estimate.run_minutes(_cluster(runtime_margin=3.0), _run(), resources, tiny) == 30
    assert estimate.run_minutes(_cluster(runtime_margin=1000.0), _run(), resources, LISTOPS) == 1440
    # runtime_from: config (the default) asks for the configured runtime, whatever the estimate.
    assert estimate.run_minutes({"cluster": {}}, _run(), resources, LISTOPS) == 720


def test_an_unknown_or_missing_gpu_model_is_refused_naming_the_key():
    with pytest.raises(
        estimate.EstimateError, match=r"^cluster.gpu_model X100: unknown GPU model; known: A100"
    ):
        estimate.run_minutes(_cluster(gpu_model="X100"), _run(), {"runtime": 1}, LISTOPS)
    config = load_config("tiny")
    config["cluster"] = {"runtime_from": "estimate"}
    problems = config_problems(config)
    assert len(problems) == 1 and problems[0].startswith(
        "cluster.runtime_from is estimate but cluster.gpu_model"
    )
    config["cluster"]["gpu_model"] = "h200"
    assert config_problems(config) == []


def _paper(tmp_path: Path, **cluster) -> dict:
    config = P.load_config(REPO / "config" / "config.yaml")
    config["data"]["processed_dir"] = str(tmp_path / "processed")  # no manifest: published sizes
    config["cluster"].update(cluster)
    return config


def test_runtime_from_estimate_changes_the_planned_request_of_the_lra_jobs_only(tmp_path: Path):
    config = _paper(tmp_path)
    configured = {job.run: job for job in experiment.training_jobs(config)}
    estimated = experiment.training_jobs(_paper(tmp_path, runtime_from="estimate", gpu_model="H200"))
    for job in estimated:
        if job.rule == "train":
            data = estimate.task_data(config, job.task)
            seconds = estimate.estimated_seconds(job.config, data, "H200")
            assert job.runtime_min == min(1440, max(30, math.ceil(seconds * flops.DEFAULT_MARGIN / 60)))
        else:  # the related systems' models: their configured runtime
            assert job.runtime_min == configured[job.run].runtime_min
    changed = [job for job in estimated if job.runtime_min != configured[job.run].runtime_min]
    assert changed and {job.rule for job in changed} == {"train"}


def _dry_run_runtimes(tmp_path: Path, config: dict) -> dict[str, set[int]]:
    """{rule: the runtimes its jobs ask for} from a dry run's job list."""
    ws = make_workspace(tmp_path / "ws", config)
    done = run_snakemake(ws, "-n", timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    runtimes: dict[str, set[int]] = {}
    for block in re.split(r"\n(?=(?:local)?rule )", done.stdout):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        asked = re.search(r"resources: .*\bruntime=(\d+)", block)
        if rule and asked:
            runtimes.setdefault(rule[1], set()).add(int(asked[1]))
    return runtimes


def test_the_workflow_asks_for_the_estimated_runtime(tmp_path: Path):
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    estimated = copy.deepcopy(config)
    estimated["cluster"] = {**(config.get("cluster") or {}), "runtime_from": "estimate", "gpu_model": "H200"}
    before = _dry_run_runtimes(tmp_path / "config", config)
    after = _dry_run_runtimes(tmp_path / "estimate", estimated)
    assert before["train"] != after["train"]
    assert after["train"] == {estimate.MIN_ESTIMATED_RUNTIME}  # a toy run's estimate is seconds: the floor


def test_a_pack_asks_k_estimated_runs_over_its_gain(tmp_path: Path):
    config = load_config("tiny")
    config["grids"]["main"]["seeds"] = [0, 1]
    config["tasks"]["listops"]["resources"] = {"pack": 2, "pack_gain": 1.5}
    config["cluster"] = {"runtime_from": "estimate", "gpu_model": "A100"}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    packs = [job for job in experiment.training_jobs(P.load_config(path)) if job.rule == "train_pack"]
    per_run = estimate.MIN_ESTIMATED_RUNTIME  # a toy run: the floor
    assert packs and {job.runtime_min for job in packs} == {math.ceil(2 * per_run / 1.5)}
