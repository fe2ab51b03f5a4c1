"""Faults a months-long cluster reproduction meets, provoked for real on `pdelra train`: foreign and truncated
checkpoints, a full disk while checkpointing, and two processes on one run (a rerun beside a job of a dead
Snakemake). The Slurm-level faults (preemption, time limit) are in tests/test_slurm.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_training import (
    SLOW_CONFIG,
    make_task,
    run_config,
    train_in_process,
    wait_for_checkpoint,
    without_timings,
)

from pdelra.training.checkpoint import CheckpointWriteError, checkpoint_path, save_checkpoint
from pdelra.training.interrupts import EXIT_INTERRUPTED


class _Payload:
    """A pickle that runs code when loaded without weights_only: it touches a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    return make_task(tmp_path / "processed")


def _same_run(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal metrics up to timings and the code version (a commit may land between two processes)."""
    return {**without_timings(a), "code_version": None} == {**without_timings(b), "code_version": None}


def _stale(ckpt: Path) -> list[Path]:
    return sorted(ckpt.glob("checkpoint.stale-*.pt"))


def test_a_foreign_pickle_is_never_executed_and_is_moved_aside(
    task_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "code-ran"
    ckpt = tmp_path / "run" / "ckpt"
    ckpt.mkdir(parents=True)
    with open(checkpoint_path(ckpt), "wb") as f:
        pickle.dump({"format_version": 2, "model": _Payload(marker)}, f, protocol=2)
    status, metrics = train_in_process(run_config(), task_dir, tmp_path / "run")
    assert not marker.exists(), "loading a checkpoint executed code from it"
    assert status == 0 and metrics and metrics["resumed_count"] == 0
    assert len(_stale(ckpt)) == 1
    assert "not resuming from" in caplog.text and "unreadable (UnpicklingError" in caplog.text


def test_a_truncated_checkpoint_is_moved_aside_and_the_run_starts_fresh(
    task_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint cut short (a copy that did not finish, a damaged disk) is not trusted."""
    ckpt = tmp_path / "run" / "ckpt"
    save_checkpoint(ckpt, {"config_hash": "x", "data_manifest_hash": "y", "blob": b"0" * 10_000})
    data = checkpoint_path(ckpt).read_bytes()
    checkpoint_path(ckpt).write_bytes(data[: len(data) // 2])
    status, metrics = train_in_process(run_config(), task_dir, tmp_path / "run")
    assert status == 0 and metrics and metrics["resumed_count"] == 0
    assert len(_stale(ckpt)) == 1 and "unreadable" in caplog.text


def test_a_write_that_finds_no_space_names_the_file_and_keeps_the_old_checkpoint(tmp_path: Path) -> None:
    """In-process unit: the error type and message, and the old file untouched (no real disk involved)."""
    ckpt = tmp_path / "ckpt"
    save_checkpoint(ckpt, {"config_hash": "a"})
    before = checkpoint_path(ckpt).read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, hard))
    try:
        with pytest.raises(CheckpointWriteError) as caught:
            save_checkpoint(ckpt, {"config_hash": "b", "blob": b"1" * 100_000})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    message = str(caught.value)
    assert str(checkpoint_path(ckpt)) in message and "no space" in message and "intact" in message
    assert checkpoint_path(ckpt).read_bytes() == before
    assert not list(ckpt.glob(".checkpoint*.tmp")), "no temporary file is left behind"


# ------------------------------------------------------------------------------------ real processes


def _start(
    where: Path, data: Path, fsize_limit: int | None = None, log_name: str = "train.log"
) -> subprocess.Popen[bytes]:
    """`pdelra train` on SLOW_CONFIG (a checkpoint every step) in its own process; log in where/LOG_NAME."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "run.json").write_text(json.dumps(SLOW_CONFIG))
    command = [sys.executable, "-m", "pdelra.cli", "train", "--run-config", str(where / "run.json")]
    command += ["--data", str(data), "--out", str(where / "run"), "--checkpoint-dir", str(where / "ckpt")]

    def limit() -> None:  # in the child only: pytest's own files are not limited
        if fsize_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, resource.RLIM_INFINITY))

    log = open(where / log_name, "ab")  # noqa: SIM115 - handed to the child process
    # No .pyc writes: under the file-size limit they would be cut short and break every later import.
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    if "PYTHONPATH" in os.environ:  # the code under test, where it is not the installed package
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=limit)


def _wait_for_log(log: Path, text: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{text!r} never appeared in the log"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A processed task and the metrics of an uninterrupted `pdelra train` process of SLOW_CONFIG on it.

    A process, like the runs it is compared with: in-process training can differ in the last float bits.
    """
    root = tmp_path_factory.mktemp("faults")
    data = make_task(root / "processed")
    assert _start(root, data).wait(timeout=120) == 0, (root / "train.log").read_text()[-3000:]
    return data, json.loads((root / "run" / "metrics.json").read_text())


@pytest.mark.slow
def test_disk_full_while_checkpointing_fails_clearly_and_the_rerun_resumes(
    reference: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    data, expected = reference
    first = _start(tmp_path, data)
    wait_for_checkpoint(first, tmp_path / "ckpt")
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=60) == EXIT_INTERRUPTED
    kept = hashlib.sha256(checkpoint_path(tmp_path / "ckpt").read_bytes()).hexdigest()

    # Files may grow to 20 kB: the log fits, the next checkpoint (~75 kB) does not.
    full = _start(tmp_path, data, fsize_limit=20_000)
    assert full.wait(timeout=60) == 1
    log = (tmp_path / "train.log").read_text()
    assert f"could not write {checkpoint_path(tmp_path / 'ckpt')}: no space" in log
    assert "Traceback" not in log, "a full disk is a user-fixable error: one line, no traceback"
    assert hashlib.sha256(checkpoint_path(tmp_path / "ckpt").read_bytes()).hexdigest() == kept
    assert not list((tmp_path / "ckpt").glob(".checkpoint*.tmp"))
    assert not (tmp_path / "run" / "metrics.json").exists()

    rerun = _start(tmp_path, data)
    assert rerun.wait(timeout=120) == 0, (tmp_path / "train.log").read_text()[-3000:]
    resumed = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert resumed["resumed_count"] == 1
    assert _same_run(resumed, expected)


@pytest.mark.slow
def test_a_second_process_on_the_same_run_waits_and_resumes_when_the_first_dies(
    reference: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """A rerun's job beside a still-running job of a dead Snakemake: never two trainers on one run."""
    data, expected = reference
    first = _start(tmp_path, data)
    wait_for_checkpoint(first, tmp_path / "ckpt")
    first.send_signal(signal.SIGSTOP)  # paused mid-run, lock held: the second cannot overtake it
    second = _start(tmp_path, data, log_name="second.log")  # the same run and checkpoint folders
    _wait_for_log(tmp_path / "second.log", f"locked by pid {first.pid}", second)
    first.send_signal(signal.SIGKILL)  # its lock dies with it
    assert first.wait(timeout=30) == -signal.SIGKILL
    assert second.wait(timeout=120) == 0, (tmp_path / "second.log").read_text()[-3000:]
    resumed = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert resumed["resumed_count"] == 1, "the second process resumes the first one's checkpoint"
    assert _same_run(resumed, expected)


@pytest.mark.slow
def test_a_second_process_finds_the_run_finished_by_the_first_and_does_nothing(
    reference: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    data, expected = reference
    first = _start(tmp_path, data)
    wait_for_checkpoint(first, tmp_path / "ckpt")
    first.send_signal(signal.SIGSTOP)
    second = _start(tmp_path, data, log_name="second.log")  # the same run and checkpoint folders
    _wait_for_log(tmp_path / "second.log", f"locked by pid {first.pid}", second)
    first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=120) == 0
    assert second.wait(timeout=60) == 0
    assert "nothing left to train" in (tmp_path / "second.log").read_text()
    finished = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert finished["resumed_count"] == 0
    assert _same_run(finished, expected)


# ------------------------------------------------------------------------------------------ DVC remote


def test_an_unreachable_dvc_remote_fails_clearly_and_the_next_run_pushes(
    tmp_path: Path,
) -> None:
    from test_dvc import fake_experiment, git_dvc_project, pdelra

    from pdelra.steps.versioning import version_experiment

    blocker = tmp_path / "mount-point"  # a file where the remote's folder should be: the remote is down
    blocker.write_text("not a folder")
    root = git_dvc_project(tmp_path / "proj", remote=blocker / "remote")
    exp = fake_experiment(root)
    proc = pdelra(root, "version", "add", str(exp), "--out", str(exp / "versioned.json"))
    message = proc.stdout + proc.stderr
    assert proc.returncode == 1, message
    assert "could not push to DVC remote 'store'" in message and "Nothing is lost" in message
    assert "Traceback" not in message
    assert not (exp / "versioned.json").exists(), "the version step must rerun next time"
    assert sorted(p.name for p in exp.glob("*.dvc")) == ["report.dvc", "runs.dvc", "tables.dvc"]
    assert any((root / ".dvc" / "cache").rglob("*.dir")), "the local DVC cache holds the artifacts"

    blocker.unlink()  # the remote is back
    record = version_experiment(exp, exp / "versioned.json")
    assert record["pushed"] is True and any((blocker / "remote").rglob("*.dir"))
