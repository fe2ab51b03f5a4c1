"""`pdelra train-pack`: K runs side by side, each member's outcome reported, and a failed pack loses none of
its finished members: their final state survives the deletion of the pack's folder and the retry restores
them instead of training them again."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_training import make_task, run_config, wait_for_checkpoint

from pdelra.training.interrupts import EXIT_INTERRUPTED
from pdelra.training.pack import pack_status


def test_the_pack_fails_with_its_first_real_failure_else_75_else_0() -> None:
    assert pack_status([0, 0, 0]) == 0
    assert pack_status([0, EXIT_INTERRUPTED, 0]) == EXIT_INTERRUPTED  # the retry resumes
    assert pack_status([EXIT_INTERRUPTED, 137, 1]) == 137  # the OOM killer's SIGKILL, not "interrupted"


def _start_pack(
    root: Path, data: Path, seeds: list[int], config: dict[str, Any] | None = None
) -> tuple[subprocess.Popen[str], Path]:
    out = root / "pack.out"
    config = run_config() if config is None else config
    command = [sys.executable, "-m", "pdelra.cli", "train-pack", "--run-config", json.dumps(config)]
    command += ["--seeds", *map(str, seeds), "--data", str(data), "--out", str(root / "packs" / "cell")]
    command += ["--checkpoint-dir", str(root / "checkpoints" / "cell")]
    command += ["--log-dir", str(root / "logs" / "cell")]
    command += ["--threads", "1", "--device", "cpu"]
    handle = open(out, "w")  # noqa: SIM115 - handed to the child process
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, text=True, env=env), out


def _pid_of(out: Path, seed: int, process: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 60
    while not (found := re.search(rf"^seed{seed}: pid (\d+)", out.read_text(), flags=re.M)):
        assert process.poll() is None and time.monotonic() < deadline, out.read_text()
        time.sleep(0.05)
    return int(found.group(1))


@pytest.mark.slow  # 4 training processes (~15 s): the pack launcher is only real as processes
def test_a_pack_whose_member_is_killed_keeps_its_finished_members_and_the_retry_does_not_retrain_them(
    tmp_path: Path,
) -> None:
    data = make_task(tmp_path / "processed")
    pack = tmp_path / "packs" / "cell"

    first, out = _start_pack(tmp_path, data, [0, 1])
    os.kill(_pid_of(out, 1, first), signal.SIGKILL)  # seed 1 runs out of memory: the OOM killer
    assert first.wait(timeout=300) == 128 + signal.SIGKILL, out.read_text()
    report = out.read_text()
    assert "seed0: completed, test accuracy" in report, report
    assert "seed1: failed with exit 137" in report, report
    finished_seed0 = (pack / "seed0" / "metrics.json").read_text()

    shutil.rmtree(pack)  # Snakemake deletes the failed job's output, the pack's folder
    second, out = _start_pack(tmp_path, data, [0, 1])
    assert second.wait(timeout=300) == 0, out.read_text()
    report = out.read_text()
    assert "seed0: completed" in report and "seed1: completed" in report, report
    assert (pack / "seed0" / "metrics.json").read_text() == finished_seed0, "seed 0 is restored as it was"
    assert "nothing left to train" in (tmp_path / "logs" / "cell" / "seed0.log").read_text()
    seed1 = json.loads((pack / "seed1" / "metrics.json").read_text())
    assert seed1["seed"] == 1 and seed1["status"] == "completed"
    assert "nothing left to train" not in (tmp_path / "logs" / "cell" / "seed1.log").read_text()


@pytest.mark.slow  # 2 training processes (~15 s): signals reach processes only
def test_a_signal_to_the_pack_reaches_every_member_which_checkpoints_and_the_pack_exits_75(
    tmp_path: Path,
) -> None:
    """Where only the launcher is signalled (`scancel --signal=TERM --batch`, a local Snakemake's stop), it
    passes SIGTERM on; each member checkpoints, and the pack exits 75 so that the retry resumes them."""
    data = make_task(tmp_path / "processed")
    long_run = run_config(max_epochs=60, patience=60, batch_size=4, checkpoint_every_steps=1)  # 960 steps
    pack, out = _start_pack(tmp_path, data, [0, 1], long_run)
    members = {seed: _pid_of(out, seed, pack) for seed in (0, 1)}
    for seed in members:
        wait_for_checkpoint(pack, tmp_path / "checkpoints" / "cell" / f"seed{seed}")  # type: ignore[arg-type]
    pack.send_signal(signal.SIGTERM)
    assert pack.wait(timeout=120) == EXIT_INTERRUPTED, out.read_text()
    report = out.read_text()
    for seed in members:
        assert f"seed{seed}: interrupted, checkpoint in" in report, report
        log = (tmp_path / "logs" / "cell" / f"seed{seed}.log").read_text()
        assert "received SIGTERM" in log, log[-2000:]
