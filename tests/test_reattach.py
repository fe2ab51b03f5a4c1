"""Reattach instead of resubmit (pdelra.planning.reattach): a training job records its Slurm job id beside
the run's lock, and a rerun's submission of the run waits for that job while squeue still lists it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pdelra.locking import LOCK_ENV, SLURM_JOB_NAME, run_lock
from pdelra.planning import reattach
from pdelra.training import bad_nodes, finished


@pytest.fixture(autouse=True)
def fresh_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """No squeue answer or warning carried over from another test."""
    monkeypatch.setattr(reattach, "_cache", None)
    monkeypatch.setattr(reattach, "_warned", False)


def _stub_squeue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: list[str], rc: int = 0) -> Path:
    """An `squeue` first on PATH that logs its arguments to the returned file and lists `live`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "squeue.calls"
    stub = bin_dir / "squeue"
    listing = "".join(f"echo {job_id}\n" for job_id in live)
    error = 'echo "slurm_load_jobs error" >&2\n' if rc else ""
    stub.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n{listing}{error}exit {rc}\n')
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


def _record(folder: Path, job_id: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SLURM_JOB_NAME).write_text(f"{job_id}\n")
    return folder


@pytest.mark.parametrize("lock", ["flock", "file"])
def test_a_slurm_job_records_its_id_while_it_holds_the_lock_and_removes_it_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lock: str
) -> None:
    monkeypatch.setenv(LOCK_ENV, lock)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    ckpt = tmp_path / "checkpoints" / "run"
    with run_lock(ckpt):
        assert (ckpt / SLURM_JOB_NAME).read_text() == "4242\n"
        assert reattach.recorded_jobs([ckpt]) == ["4242"]
    assert not ckpt.exists(), "the record goes with the lock, and the emptied folder with them"


def test_outside_slurm_nothing_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    ckpt = tmp_path / "checkpoints" / "run"
    with run_lock(ckpt):
        assert not (ckpt / SLURM_JOB_NAME).exists()


def test_clearing_a_run_removes_a_record_left_by_a_killed_job_but_not_a_holders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    held = tmp_path / "checkpoints" / "held"
    with run_lock(held):
        finished.clear(held)  # the lock is held: its record is the live holder's
        assert (held / SLURM_JOB_NAME).read_text() == "7\n"
    stale = _record(tmp_path / "checkpoints" / "stale", "8")  # its job was SIGKILLed holding the lock
    (stale / "lock").write_text("pid 1 on node since then\n")
    finished.clear(stale)
    assert not stale.exists()


def test_only_the_recorded_jobs_squeue_still_lists_are_waited_for_and_squeue_is_asked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _stub_squeue(tmp_path, monkeypatch, live=["101", "555"])
    live = _record(tmp_path / "a" / "seed0", "101")
    ended = _record(tmp_path / "a" / "seed1", "102")  # killed outright: its record stayed, squeue forgot it
    never = tmp_path / "a" / "seed2"  # no job holds it
    assert reattach.live_recorded_jobs([live, ended, never]) == ["101"]
    assert reattach.slurm_extra(None, [ended, live]) == "--dependency=afterany:101"
    assert reattach.slurm_extra("--mail-type=FAIL", [never, ended]) == "--mail-type=FAIL"
    assert calls.read_text().splitlines() == ["--me --noheader --format=%i"], "one squeue per minute"


def test_no_record_no_squeue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _stub_squeue(tmp_path, monkeypatch, live=["101"])
    assert reattach.slurm_extra(None, [tmp_path / "run"]) is None
    assert not calls.exists(), "a run without a record must not cost an squeue call"


def test_a_failing_squeue_is_one_warning_and_no_live_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _stub_squeue(tmp_path, monkeypatch, live=["101"], rc=1)
    monkeypatch.setattr(reattach, "LIVE_TTL_S", 0.0)  # ask again each time
    run = _record(tmp_path / "run", "101")
    assert reattach.slurm_extra("--mail-type=FAIL", [run]) == "--mail-type=FAIL"
    assert reattach.slurm_extra(None, [run]) is None
    assert len(calls.read_text().splitlines()) == 2
    err = capsys.readouterr().err
    assert err.count("Warning (Slurm): `squeue --me --noheader --format=%i` failed (exit 1") == 1, err
    assert "slurm_load_jobs error" in err


def test_a_missing_squeue_is_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    run = _record(tmp_path / "run", "101")
    assert reattach.live_recorded_jobs([run]) == []
    assert "FileNotFoundError" in capsys.readouterr().err


def test_the_dependency_joins_the_configured_flags_and_the_bad_nodes_exclude(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stub_squeue(tmp_path, monkeypatch, live=["101", "103"])
    nodes = tmp_path / "bad_nodes.txt"
    bad_nodes.record_bad_node(nodes, "gpu7")
    pack = [_record(tmp_path / "cell" / f"seed{n}", str(101 + n)) for n in range(3)]
    extra = reattach.slurm_extra(bad_nodes.slurm_extra(nodes, "--mail-type=FAIL -x gpu1"), pack)
    assert extra == "--mail-type=FAIL --exclude=gpu1,gpu7 --dependency=afterany:101:103"
