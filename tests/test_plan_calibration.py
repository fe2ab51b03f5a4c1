"""`pdelra plan`'s calibration: the threads its jobs take, a robust timing procedure, the batch and length
a job runs at (the timings on this machine are checked by benchmarks/plan_cpu_stability.py, not here: a
timed bound would be flaky on a shared machine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from conftest import load_config
from test_training import make_task

from pdelra.planning import calibration as K
from pdelra.planning import plan as P

CPU = torch.device("cpu")


def _listops_config(tmp_path: Path, num_threads: int | None) -> Path:
    """The tiny test experiment on ListOps alone, with processed data and `train.num_threads`."""
    make_task(tmp_path / "processed", "listops", n=(48, 16, 16))
    config = load_config("tiny")
    config["data"]["processed_dir"] = str(tmp_path / "processed")
    config["run_grids"] = ["main"]
    config["grids"]["main"]["tasks"] = ["listops"]
    config["defaults"]["train"]["num_threads"] = num_threads
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_threads_are_the_jobs_unless_given() -> None:
    # The rule of pdelra.training.device.cpu_threads: config, else Slurm's grant, else the affinity.
    assert K.calibration_threads({"num_threads": 3}, CPU) == 3
    assert K.calibration_threads({"num_threads": 3}, CPU, threads=2) == 2
    assert K.calibration_threads({"num_threads": 3}, torch.device("cuda")) is None


def test_threads_fall_back_to_slurms_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    assert K.calibration_threads({"num_threads": None}, CPU) == 3
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    import os

    assert K.calibration_threads({}, CPU) == len(os.sched_getaffinity(0))


def test_the_plan_calibrates_with_the_configs_threads_and_flag_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pdelra.cli import main

    path = _listops_config(tmp_path, num_threads=1)
    out, results = tmp_path / "plan.json", tmp_path / "results"
    common = ["plan", str(path), "--device", "cpu", "--steps", "1", "--results", str(results)]
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # what the plan process has: the config's 1 must win over it
    try:
        assert main([*common, "--json", str(out)]) == 0
        assert torch.get_num_threads() == 2  # restored after calibrating
        (row,) = [row for row in json.loads(out.read_text())["tasks"] if row["rule"] == "train"]
        assert row["calibration_threads"] == 1 and row["step_time_source"] == "calibrated"
        assert "1 thread(s)" in capsys.readouterr().err
        # --threads wins, and is another calibration (the cache keys on threads: it keeps both).
        assert main([*common, "--threads", "2", "--json", str(out)]) == 0
        (row,) = [row for row in json.loads(out.read_text())["tasks"] if row["rule"] == "train"]
        assert row["calibration_threads"] == 2
        assert len(json.loads((results / P.CACHE_NAME).read_text())) == 2
        # The config's threads again: the first calibration, reused.
        assert main([*common, "--json", str(out)]) == 0
        assert "calibrations of listops reused" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)


def test_the_key_follows_the_threads() -> None:
    data = {"vocab_size": 10, "num_classes": 2, "max_length": 24}
    one, two = (K.calibration_key("listops", data, {}, 16, CPU, 5, None, threads) for threads in (1, 2))
    assert one != two and one == K.calibration_key("listops", data, {}, 16, CPU, 5, None, 1)


def test_the_median_step_ignores_the_warm_up_and_one_slow_step() -> None:
    # A fake clock: the warm-up step takes 10 s (allocation), one timed step 5 s (another process took the
    # core), the others 0.1 s. The first-step or mean timing this replaces would say 10 s or 1.08 s.
    costs = iter([10.0, 0.1, 0.1, 5.0, 0.1, 0.1])
    now = [0.0]

    def step() -> None:
        now[0] += next(costs)

    times = K.time_calls(step, steps=5, warmup=1, clock=lambda: now[0])
    assert times == pytest.approx([0.1, 0.1, 5.0, 0.1, 0.1])
    assert K.step_time(times) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        K.step_time([])


def test_short_steps_are_timed_for_a_minimum_time() -> None:
    # 10-ms steps: five of them are 50 ms, which one burst of another process can dominate; they are timed
    # until they add up to min_seconds, at most max_steps of them.
    now = [0.0]

    def step() -> None:
        now[0] += 0.01

    def clock() -> float:
        return now[0]

    assert len(K.time_calls(step, steps=5, warmup=1, clock=clock, min_seconds=0.5)) == 50
    assert len(K.time_calls(step, steps=5, warmup=1, clock=clock, min_seconds=0.5, max_steps=20)) == 20
    assert len(K.time_calls(step, steps=5, warmup=1, clock=clock)) == 5  # long enough already


def test_a_steps_fixed_cost_is_not_multiplied_by_the_batch() -> None:
    # A step of 20 ms plus 1 ms per example of 46 tokens: batch 32 takes 52 ms, and is timed itself. Batch 1
    # scaled by the batch (the old CPU default) said 0.67 s.
    timed: list[tuple[int, int]] = []

    def seconds_at(batch: int, length: int) -> float:
        timed.append((batch, length))
        return 0.020 + 0.001 * batch * length / 46

    small = K.cpu_timing(seconds_at, batch_size=32, cap=32, length=46, budget_s=2.0)
    assert timed == [(1, K.FIXED_COST_LENGTH), (1, 46), (32, 46)]
    assert small["step_s"] == pytest.approx(0.052) and small["timed_batches"] == [1, 32]
    assert small["fixed_s"] == pytest.approx(0.020, rel=0.01)

    # Half a second per example: within a 2 s budget only batch 3 is timed; its time beyond the fixed
    # cost scales to batch 32 (exact for this cost).
    timed.clear()
    slow = K.cpu_timing(lambda b, n: seconds_at(b, n) + 0.499 * b * n / 46, 32, 32, 46, budget_s=2.0)
    assert timed[-1] == (3, 46) and slow["measured_batch"] == 3
    assert slow["step_s"] == pytest.approx(0.020 + 0.5 * 32, rel=0.01)  # less one token's cost

    # --max-calibration-batch 1: batch 1, its cost beyond the fixed one scaled.
    one = K.cpu_timing(seconds_at, 32, cap=1, length=46, budget_s=2.0)
    assert one["step_s"] == pytest.approx(0.052, rel=0.02)  # less one token's cost per example


def test_noise_in_small_batches_is_not_extrapolated() -> None:
    # Batch 1 and 2 cost about the same (threads idle at batch 1: the paper's Image on 2 cores) and batch 2
    # timed a little faster: a line through them had no cost per example and said 1.0 s at batch 1024. The
    # time beyond the fixed cost scales instead.
    times = {(1, 1): 0.01, (1, 1024): 0.9, (2, 1024): 0.88}
    image = K.cpu_timing(lambda b, n: times[(b, n)], batch_size=1024, cap=1024, length=1024, budget_s=2.0)
    assert image["measured_batch"] == 2 and image["step_s"] == pytest.approx(0.01 + 0.87 * 512)
    # A fixed-cost step timed slower than the batch (noise): never more than the batch's time.
    times[(1, 1)] = 1.5
    assert K.cpu_timing(lambda b, n: times[(b, n)], 1024, 1024, 1024, 2.0)["fixed_s"] == 0.88


def test_a_job_batch_other_than_the_calibrated_scales_only_the_per_example_part() -> None:
    calibration = {"step_s": 0.052, "fixed_s": 0.020, "batch_size": 32}
    assert K.calibrated_step(calibration, 32) == pytest.approx(0.052)
    assert K.calibrated_step(calibration, 64) == pytest.approx(0.084)
    assert K.calibrated_step({"step_s": 0.052, "batch_size": 32}, 64) == pytest.approx(0.104)  # older cache


def test_calibration_times_the_width_of_trimmed_batches(tmp_path: Path) -> None:
    # make_task's lengths are 4-24 (max_length 24): a batch of 16 (the tiny config's) is as wide as its
    # longest, so the mean width lies between the mean length and 24; length buckets make batches narrower.
    config = P.load_config(_listops_config(tmp_path, num_threads=1))
    train = {"batch_size": 16}
    width = P.mean_batch_width(config, "listops", train)
    lengths = P.load_split(tmp_path / "processed" / "listops", "train").lengths
    assert width is not None and float(lengths.mean()) < width <= 24
    bucketed = P.mean_batch_width(config, "listops", {**train, "length_buckets": 3})
    assert bucketed is not None and bucketed < width
    # The plan times that width.
    (row,) = P.make_plan(config, CPU, steps=1, progress=lambda _: None)["tasks"]
    assert row["batch_size"] == 16 and row["calibration_length"] == width
    # Without processed data: None, and calibration times max_length.
    config["data"]["processed_dir"] = str(tmp_path / "absent")
    assert P.mean_batch_width(config, "listops", train) is None
    assert K.calibration_length({"max_length": 64, "batch_length": None}) == 64
