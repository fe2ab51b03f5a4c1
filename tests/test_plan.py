"""`pdelra plan`: the workflow's own jobs, estimates checked against a real run, the schedule's wall-clock."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from conftest import REPO, dry_run_jobs, load_config, make_workspace
from test_training import make_task, train_in_process

from pdelra.planning import estimate, experiment
from pdelra.planning import plan as P
from pdelra.runs import run_dir


def _config(tmp_path: Path, **data: Any) -> Path:
    config = load_config("tiny")  # the demo-like test experiment: 2 tasks × (none, after_embedding), 1 seed
    config["data"].update(processed_dir=str(tmp_path / "processed"), **data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("name", ["demo", "config"])
def test_jobs_are_the_workflows_own(tmp_path: Path, name: str) -> None:
    # The demo and the paper config with every grid selected (and the LM): the plan's jobs per rule are
    # those of a real `snakemake -n` from scratch (one dry run each, ~15-30 s).
    config = yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())
    config["run_grids"] = sorted(config["grids"])
    dry_run = dry_run_jobs(make_workspace(tmp_path / "ws", config), timeout=180)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    loaded = P.load_config(path)
    assert experiment.workflow_jobs(loaded) == dry_run
    plan = P.make_plan(loaded, torch.device("cpu"), calibrate_tasks=False)
    training = {(t["rule"], t["task"]): t["jobs"] for t in plan["tasks"]}
    trained = sum(dry_run.get(rule, 0) for rule in experiment.TRAINING_RULES)
    assert sum(training.values()) == plan["total"]["jobs"] == trained
    assert plan["other_jobs"] == {k: v for k, v in dry_run.items() if k not in experiment.TRAINING_RULES}
    # Continuous-Time Attention's own grid: 4 tasks (demo: 2) × 2 variants × 5 seeds (demo: 1); its
    # WikiText-103 LM: 16 cells (standard, diffusion at 1/2/4/8 steps, 3 more kinds at 4, standard and
    # diffusion at 4 data sizes) × 5 seeds (demo: 6 cells, one of each experiment, 1 seed); its data from
    # DVC downloads (demo: generated; + WikiText-103 and its tokenizer) and one table job.
    if name == "config":  # the figures the README quotes
        assert dry_run["train"] == 680 and dry_run["lm_train"] == 18  # 245 + 125 + 300 + 10
        assert len(experiment.lra_runs({**loaded, "run_grids": ["main", "multiscale"]})) == 245
        assert dry_run["cta_official_train"] == 40 and dry_run["cta_lm_train"] == 16 * 5
        assert (dry_run["cta_fetch"], dry_run["cta_extract"], dry_run["cta_preprocess"]) == (5, 3, 4)
    else:  # and the demo's figures the README quotes: 109 jobs, 76 training runs (62 + 4 + 4 + 6), 7 diagnose
        assert dry_run["cta_official_train"] == 4 and dry_run["cta_lm_train"] == 6
        assert dry_run["train"] == 62 and dry_run["lm_train"] == 4 and dry_run["diagnose"] == 7
        assert trained == 76 and sum(dry_run.values()) == 109
        assert (dry_run["cta_generate"], dry_run["cta_preprocess"]) == (4, 2)
    assert dry_run["cta_official_aggregate"] == 1 and dry_run["cta_lm_preprocess"] == 1


def test_runs_of_the_official_backbone_are_trained_but_not_diagnosed() -> None:
    """pdelra diagnose measures the pre-LN encoder's insertion points; CTA's own model has none of them."""
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    runs = experiment.lra_runs(config)
    official = {run for run in runs if run[3] == "official"}
    assert {run[1] for run in official} == {"none", "cta_official_diffusion"}
    diagnosed = experiment.diagnosed_runs(config, runs)
    assert set(diagnosed) == set(runs) - official


def test_steps_follow_each_runs_setting_and_the_generate_sizes(tmp_path: Path) -> None:
    config = P.load_config(_config(tmp_path))
    config["grids"]["main"]["settings"] = {"short": {"train": {"max_epochs": 1}}, "base2": {}}
    plan = P.make_plan(config, torch.device("cpu"), calibrate_tasks=False)
    by_task = {t["task"]: t for t in plan["tasks"]}
    assert set(by_task) == {"listops", "retrieval"}
    # 64 training examples / batch 16 = 4 steps per epoch: 2 epochs capped by max_steps 6, or 1 epoch = 4.
    for task in by_task.values():
        assert task["jobs"] == 4 and task["counts_source"] == "config"
        assert task["steps_per_job"] == 6 and task["steps"] == 2 * 6 + 2 * 4
        # Neither calibrated nor timed by finished runs: each job counts at its requested runtime, said so.
        assert task["step_time_source"] == "requested" and task["device_hours"] == pytest.approx(4 * 5 / 60)
    assert plan["total"]["jobs"] == 8 and plan["total"]["steps"] == 40


def test_schema_errors_name_the_key(tmp_path: Path) -> None:
    path = _config(tmp_path)
    config = yaml.safe_load(path.read_text())
    config["defaults"]["train"]["batch_size"] = 0
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(P.PlanError, match=r"batch_size"):
        P.load_config(path)


def test_schedule_is_longest_job_first_and_retries_double_the_limit() -> None:
    # Graham's example: LPT puts 3, 3 then 2, 2, 2 on two GPUs → 7 (the optimum is 6: 3+3 | 2+2+2).
    assert P.makespan([(3, 1), (3, 1), (2, 1), (2, 1), (2, 1)], gpus=2) == 7
    assert P.makespan([(3, 1), (2, 1)], gpus=1) == 5
    assert P.makespan([(5, 2), (1, 1), (1, 1)], gpus=2) == 6  # a two-GPU job holds both
    assert P.makespan([], gpus=4) == 0
    # Attempt n may run n × runtime and resumes from the checkpoint: 60 + 120 + 180 minutes with 2 retries.
    assert P.attempts_needed(59 * 60, 60, retries=2) == 1
    assert P.attempts_needed(90 * 60, 60, retries=2) == 2
    assert P.attempts_needed(360 * 60, 60, retries=2) == 3
    assert P.attempts_needed(361 * 60, 60, retries=2) is None
    assert P.time_used(361 * 60, 60, retries=2) == 360 * 60  # every allowed attempt ran to its limit
    assert P.time_used(90 * 60, 60, retries=2) == 90 * 60


def test_retries_come_from_the_slurm_profile(tmp_path: Path) -> None:
    assert P.slurm_retries(REPO / "profiles" / "slurm" / "profile.yaml") == 2
    assert P.slurm_retries(tmp_path / "absent.yaml") == P.DEFAULT_RETRIES


def test_estimate_matches_an_actual_run(tmp_path: Path) -> None:
    # Data with a manifest, the plan calibrated on this CPU, then one of the planned jobs trained for real.
    make_task(tmp_path / "processed", "listops", n=(80, 24, 24))
    config = P.load_config(_config(tmp_path))
    config["run_grids"] = ["main"]
    config["grids"]["main"]["tasks"] = ["listops"]
    config["defaults"]["train"]["max_steps"] = None  # 80 / 16 = 5 steps × 2 epochs = 10
    torch.set_num_threads(1)
    lines: list[str] = []
    plan = P.make_plan(config, torch.device("cpu"), steps=3, progress=lines.append)
    (task,) = plan["tasks"]
    assert task["counts_source"] == "manifest" and task["n_train"] == 80 and task["steps_per_job"] == 10
    assert task["step_time_source"] == "calibrated" and task["device_hours"] > 0
    assert task["disk_bytes"] == 2 * (4 * task["parameters"] + P.METRICS_BYTES)
    # One line per task calibrated, with its elapsed time, after a header.
    assert len(lines) == 2 and lines[1].startswith("  listops:") and "s elapsed]" in lines[1]
    # Padding of trimmed batches, from the length arrays (4-24 tokens): bucketing cuts it.
    assert task["padding_ratio"] > 0.2 and task["padding_ratio_bucketed"] < task["padding_ratio"] / 2

    run_config = {
        "task": "listops",
        "variant": "none",
        "scale": "h1",
        "seed": 0,
        "model": experiment.merged(config, "model", "listops"),
        "train": {**experiment.merged(config, "train", "listops"), "patience": 10},
    }
    _, metrics = train_in_process(run_config, tmp_path / "processed" / "listops", tmp_path / "run")
    assert metrics is not None and metrics["steps_run"] == task["steps_per_job"]
    # On the CPU, calibration times the job's batch at the mean width of its trimmed batches (with clipping,
    # but not the trainer's scheduler and logging): within a factor of 4 either way (the README's bound for
    # a GPU, where every sequence is at max_length), generous for steps of milliseconds on a shared machine;
    # benchmarks/plan_cpu_stability.py measures how close it is (docs/measurements.md).
    ratio = task["step_time_s"] / metrics["median_step_time_s"]
    assert 0.25 < ratio < 4, (
        f"calibrated step {task['step_time_s']:.4f} s vs actual {metrics['median_step_time_s']:.4f} s"
    )

    # Finished runs take precedence over calibration. With seed 0 of both variants finished, its jobs count
    # at their own wall time and are done; seed 1's jobs are timed by their cell's finished runs (median
    # step time × planned steps); nothing is calibrated.
    config["grids"]["main"]["seeds"] = [0, 1]
    results = tmp_path / "results"
    for variant in ("none", "after_embedding"):
        out = run_dir(results / "runs", "listops", variant, "h1", "base", 0)
        out.mkdir(parents=True)
        (out / "metrics.json").write_text(
            json.dumps({**metrics, "variant": variant, "median_step_time_s": 0.5, "wall_time_s": 90.0})
        )
    lines.clear()
    plan = P.make_plan(config, torch.device("cpu"), results=results, progress=lines.append)
    (task,) = plan["tasks"]
    assert lines == [] and task["step_time_source"] == "finished+runs" and task["step_time_s"] == 0.5
    assert task["jobs"] == 4 and task["done"] == 2
    evaluation = 0.5 / 16 * estimate.EVAL_COST * (2 * 24 + 24)
    to_go = 2 * (10 * 0.5 + evaluation) / 3600
    assert task["device_hours_to_go"] == pytest.approx(to_go)
    assert task["device_hours"] == pytest.approx(to_go + 2 * 90 / 3600)
    assert plan["total"]["wall_clock_hours"] == pytest.approx(to_go)  # one GPU: the jobs to go in series
    assert P.make_plan(config, torch.device("cpu"), results=results, gpus=2)["total"][
        "wall_clock_hours"
    ] == pytest.approx(to_go / 2)

    # A runtime too short for three attempts (1 + 2 + 3 minutes) is reported as failing: seed 1 of the
    # variant whose finished run took 60 s a step (10 steps: 10 minutes).
    config["defaults"]["resources"]["runtime"] = 1
    slow = run_dir(results / "runs", "listops", "none", "h1", "base", 0) / "metrics.json"
    slow.write_text(json.dumps({**metrics, "median_step_time_s": 60.0, "wall_time_s": 600.0}))
    plan = P.make_plan(config, torch.device("cpu"), results=results)
    assert [job["run"][1::3] for job in plan["failing_jobs"]] == [["none", 1]]


def _finish(results: Path, job: experiment.TrainingJob, wall_s: float) -> None:
    """A finished run's metrics.json for the job's run, where its rule leaves it."""
    task, variant, scale, setting, seed = job.run
    out = run_dir(results / experiment.TRAINING_RULES[job.rule].runs_dir, *job.run)
    out.mkdir(parents=True, exist_ok=True)
    metrics = {"task": task, "variant": variant, "scale": scale, "setting": setting, "seed": seed,
               "median_step_time_s": 0.01, "wall_time_s": wall_s}  # fmt: skip
    (out / "metrics.json").write_text(json.dumps(metrics))


def test_finished_runs_of_every_training_rule_count_at_their_wall_time(tmp_path: Path) -> None:
    # The demo trains runs of all four rules (LRA, PhysQK-AD's LM, CTA's official classification and
    # WikiText-103 runs). Once they have finished, the plan says what they took, not their runtime requests:
    # before, CTA's official and LM runs counted at their runtime ("1.78 h" for a 4.5-minute demo).
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(config))
    loaded = P.load_config(path)
    jobs = experiment.training_jobs(loaded)
    assert {job.rule for job in jobs} >= {"train", "lm_train", "cta_official_train", "cta_lm_train"}
    results = tmp_path / "results"
    for job in jobs:
        _finish(results, job, wall_s=3.0)
    plan = P.make_plan(loaded, torch.device("cpu"), results=results, calibrate_tasks=False)
    for row in plan["tasks"]:
        assert (row["step_time_source"], row["done"]) == ("finished", row["jobs"]), row
        assert row["device_hours"] == pytest.approx(row["jobs"] * 3.0 / 3600)
    total = plan["total"]
    assert total["done"] == total["jobs"] == len(jobs)
    assert total["device_hours"] == pytest.approx(len(jobs) * 3.0 / 3600)
    assert total["device_hours_to_go"] == 0 and total["wall_clock_hours"] == 0

    # A second seed of CTA's official runs: its jobs are estimated from their cells' finished runs (median
    # wall time), not at their runtime.
    official = [job for job in jobs if job.rule == "cta_official_train"]
    config["cta_official"]["seeds"] = [0, 1]
    path.write_text(yaml.safe_dump(config))
    plan = P.make_plan(P.load_config(path), torch.device("cpu"), results=results, calibrate_tasks=False)
    rows = [row for row in plan["tasks"] if row["rule"] == "cta_official_train"]
    assert sum(row["jobs"] for row in rows) == 2 * len(official)
    assert sum(row["done"] for row in rows) == len(official)
    assert {row["step_time_source"] for row in rows} == {"finished+runs"}
    assert sum(row["device_hours"] for row in rows) == pytest.approx(2 * len(official) * 3.0 / 3600)
    assert sum(row["device_hours_to_go"] for row in rows) == pytest.approx(len(official) * 3.0 / 3600)


def test_calibrations_are_cached_by_model_and_device(tmp_path: Path) -> None:
    config = P.load_config(_config(tmp_path))
    config["grids"]["main"]["tasks"] = ["listops"]
    cache = tmp_path / "results" / P.CACHE_NAME
    lines: list[str] = []
    first = P.make_plan(config, torch.device("cpu"), steps=1, cache=cache, progress=lines.append)
    assert cache.is_file() and any(line.startswith("calibrating 1 task") for line in lines)
    lines.clear()
    again = P.make_plan(config, torch.device("cpu"), steps=1, cache=cache, progress=lines.append)
    assert lines == [f"calibrations of listops reused from {cache}"]
    assert again["tasks"][0]["step_time_s"] == first["tasks"][0]["step_time_s"]
    # Another model is another calibration (the cache keeps both).
    config["tasks"]["listops"]["model"] = {"d_model": 32}
    lines.clear()
    P.make_plan(config, torch.device("cpu"), steps=1, cache=cache, progress=lines.append)
    assert any(line.startswith("calibrating 1 task") for line in lines)
    assert len(json.loads(cache.read_text())) == 2


def test_gpu_jobs_are_not_timed_on_a_cpu_unless_asked(tmp_path: Path) -> None:
    # `--device auto` without CUDA: the paper config's GPU jobs count at their runtime at once (timing them
    # on the CPU took minutes and says nothing of a GPU), and the plan says how to time them.
    config = P.load_config(_config(tmp_path))
    config["defaults"]["resources"]["gpu"] = 1
    lines: list[str] = []
    plan = P.make_plan(config, torch.device("cpu"), calibrate_gpu_jobs=False, progress=lines.append)
    assert lines == [] and plan["uncalibrated_gpu_tasks"] == ["listops", "retrieval"]
    assert {row["step_time_source"] for row in plan["tasks"]} == {"requested"}


def test_cli_prints_jobs_wall_clock_sources_and_deviations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pdelra.cli import main

    path = _config(tmp_path)
    config = yaml.safe_load(path.read_text())
    config["tasks"]["listops"]["train"] = {"length_buckets": 4}
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "plan.json"
    assert main(["plan", str(path), "--no-calibration", "--gpus", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "listops" in printed and "2 at a time (--gpus 2)" in printed and "requested = " in printed
    assert "deviation: train.length_buckets is on for listops" in printed
    saved = json.loads(out.read_text())
    assert saved["total"]["jobs"] == 4 and saved["gpus"] == 2
    assert saved["other_jobs"]["preprocess"] == 2


def test_cli_table_columns_stay_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The demo's rules include cta_official_train: every cell of every row is its own column (a rule name
    # longer than a fixed width once ran into its task: `cta_lm_trainwikitext103`).
    from pdelra.cli import main

    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["plan", str(path), "--no-calibration", "--results", str(tmp_path / "none")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("rule "))
    columns = re.split(r"\s{2,}", lines[header].strip())
    rows = lines[header + 1 : header + 1 + len(experiment.workflow_jobs(P.load_config(path)))]
    body = [line for line in rows if not line.startswith(("wall-clock", "other jobs"))]
    assert any(line.startswith("cta_lm_train ") for line in body)
    for line in body:
        if line.startswith("total"):
            break
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(columns), line
        assert cells[0] in experiment.TRAINING_RULES


def test_the_plan_prints_what_each_job_asks_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Host memory and cores per job come from the resources (a pack asks K × one run's)."""
    from pdelra.cli import main

    path = _config(tmp_path)
    config = yaml.safe_load(path.read_text())
    config["defaults"]["resources"] |= {"mem_mb": 12000, "cpus_per_task": 4}
    config["tasks"]["listops"]["resources"] = {"pack": 2}
    for grid in config["grids"].values():
        grid["seeds"] = [0, 1]
    path.write_text(yaml.safe_dump(config))
    assert main(["plan", str(path), "--no-calibration", "--results", str(tmp_path / "none")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("rule "))
    assert "asks mem" in header and "cpus" in header
    pack = next(line for line in lines if line.startswith("train_pack"))
    assert "24.0 GB" in pack and re.search(r"\s8\s", pack)


def test_attempts_never_ask_for_more_than_the_cap() -> None:
    """cluster.max_runtime caps every attempt (what the workflow asks Slurm for): a 3 h job of 1 h runtime
    finishes in its 2nd attempt (1 + 2 h) uncapped, in its 3rd at a 1 h cap; a pack asks K runs' time."""
    assert P.attempts_needed(3 * 3600, 60, 2) == 2
    assert P.attempts_needed(3 * 3600, 60, 2, max_runtime=60) == 3
    assert P.attempts_needed(4 * 3600, 60, 2, max_runtime=60) is None
    assert P.time_used(4 * 3600, 60, 2, max_runtime=60) == 3 * 3600  # three capped attempts, all used
    config = load_config("tiny")
    config["tasks"]["listops"]["resources"] = {"pack": 2, "runtime": 30}
    config["cluster"] = {"max_runtime": 45}
    for grid in config["grids"].values():
        grid["seeds"] = [0, 1]
    pack = next(job for job in experiment.training_jobs(config) if job.rule == "train_pack")
    assert (pack.runtime_min, pack.max_runtime) == (60, 45)
