"""The run lock on every shared file system (pdelra.locking): flock where it works, a lock file with a
holder and a heartbeat where it does not (Lustre `noflock`, NFS without a lock daemon: ENOLCK), and no lock
file left behind by a run that ended."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_training import make_task, run_config, train_in_process

from pdelra import locking as lock
from pdelra.locking import LOCK_NAME, lock_mode, run_lock


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    return make_task(tmp_path / "processed")


def no_flock_under(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """flock raises ENOLCK ("No locks available") for files under `folder`, as on Lustre mounted noflock;
    elsewhere it works. The one-warning-per-process memory is reset."""
    real = fcntl.flock

    def flock(fd: Any, operation: int) -> None:
        number = fd if isinstance(fd, int) else fd.fileno()
        if os.readlink(f"/proc/self/fd/{number}").startswith(str(folder)):
            raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    monkeypatch.setattr(lock, "_warned", False)


def test_without_flock_a_run_trains_under_a_lock_file_with_one_warning(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = tmp_path / "ckpt"
    no_flock_under(monkeypatch, ckpt)
    assert lock_mode(ckpt) == lock.LockMode("lock file", "flock: No locks available")
    assert lock_mode(tmp_path / "elsewhere") == lock.LockMode("flock")

    with caplog.at_level(logging.WARNING, logger="pdelra.locking"):
        status, metrics = train_in_process(run_config(), task_dir, tmp_path)
    assert status == 0 and metrics is not None and metrics["status"] == "completed"
    warnings = [r.getMessage() for r in caplog.records if "flock is not available" in r.getMessage()]
    assert len(warnings) == 1 and "No locks available" in warnings[0] and "O_EXCL" in warnings[0], warnings
    assert not (ckpt / LOCK_NAME).exists(), "the lock file goes when the run ends"
    with run_lock(ckpt):  # who holds it, for a waiter's message and the stale rule
        holder = f"pid {os.getpid()} on {socket.gethostname()} since "
        assert (ckpt / LOCK_NAME).read_text().startswith(holder)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_lock_file_whose_holder_on_this_host_is_gone_is_broken_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = tmp_path / "ckpt"
    no_flock_under(monkeypatch, ckpt)
    ckpt.mkdir()
    dead = _dead_pid()
    (ckpt / LOCK_NAME).write_text(f"pid {dead} on {socket.gethostname()} since 2026-01-01T00:00:00\n")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="pdelra.locking"), run_lock(ckpt):
        assert (ckpt / LOCK_NAME).read_text().startswith(f"pid {os.getpid()} on ")
    assert time.monotonic() - started < lock.POLL_S, "no waiting on a holder known to be dead"
    assert f"its holder, pid {dead} on this host, is gone" in caplog.text
    assert not ckpt.exists(), "the lock file and the then empty checkpoint folder are removed"


def test_a_lock_file_of_another_host_is_waited_for_while_it_beats_and_broken_when_it_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = tmp_path / "ckpt"
    no_flock_under(monkeypatch, ckpt)
    monkeypatch.setattr(lock, "POLL_S", 0.02)
    monkeypatch.setattr(lock, "STALE_AFTER_S", 0.6)
    ckpt.mkdir()
    path = ckpt / LOCK_NAME
    path.write_text("pid 4242 on another-node since 2026-01-01T00:00:00\n")
    beating = threading.Event()
    beating.set()

    def heartbeat() -> None:  # the other host's holder, alive for ~1.2 s: 2 x the stale time
        for _ in range(24):
            os.utime(path)
            time.sleep(0.05)
        beating.clear()

    thread = threading.Thread(target=heartbeat)
    thread.start()
    with caplog.at_level(logging.WARNING, logger="pdelra.locking"), run_lock(ckpt) as waited:
        assert not beating.is_set(), "a lock whose holder still beats is never broken"
        assert waited
    thread.join()
    assert "is locked by pid 4242 on another-node" in caplog.text
    assert "broke the stale lock" in caplog.text and "no heartbeat" in caplog.text


def test_a_released_flock_file_is_removed_and_its_waiter_locks_the_new_one(tmp_path: Path) -> None:
    """The holder removes the lock file on release; a process that waited on the old file must not hold a
    lock on a file nobody else can see: it takes the lock again on the file at the path."""
    ckpt = tmp_path / "ckpt"
    holding, release, done = threading.Event(), threading.Event(), threading.Event()
    waited: list[bool] = []

    def second() -> None:
        with run_lock(ckpt) as did_wait:
            waited.append(did_wait)
            holding.set()
            release.wait(10)
        done.set()

    with run_lock(ckpt):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.3)  # the second one is blocked in flock on this file
        assert not holding.is_set()
    assert holding.wait(10) and waited == [True]
    with open(ckpt / LOCK_NAME) as probe, pytest.raises(BlockingIOError):
        fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # the file at the path is the one held
    release.set()
    thread.join()
    assert done.is_set() and not ckpt.exists(), "no lock file (nor empty folder) is left"


def test_cluster_lock_file_forces_lock_files_where_flock_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Node-local flock (Lustre localflock, NFS local_lock=flock) passes the probe on one node, so only the
    config can say that the nodes do not share it: `cluster.lock: file`, handed to the jobs as PDELRA_LOCK."""
    ckpt = tmp_path / "ckpt"
    assert lock_mode(ckpt) == lock.LockMode("flock"), "flock works here"
    monkeypatch.setenv(lock.LOCK_ENV, "file")
    monkeypatch.setattr(lock, "_warned", False)
    assert lock_mode(ckpt) == lock.LockMode("lock file", "cluster.lock: file")
    with caplog.at_level(logging.WARNING, logger="pdelra.locking"), run_lock(ckpt):
        path = ckpt / LOCK_NAME
        assert path.read_text().startswith(f"pid {os.getpid()} on {socket.gethostname()} since ")
        with open(path) as probe:  # held as a lock file, not by flock: a second node's flock would pass
            fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(FileExistsError):
            os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    assert "cluster.lock forces lock files" in caplog.text
    assert not ckpt.exists(), "released and removed as under flock"


def test_cluster_lock_flock_refuses_a_folder_without_flock_and_a_wrong_value_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ckpt = tmp_path / "ckpt"
    no_flock_under(monkeypatch, ckpt)
    monkeypatch.setenv(lock.LOCK_ENV, "flock")
    with pytest.raises(lock.LockError, match=r"cannot flock under .*ckpt \(flock: No locks available\)"):
        lock_mode(ckpt)
    monkeypatch.setenv(lock.LOCK_ENV, "auto")
    assert lock_mode(ckpt).kind == "lock file"
    monkeypatch.setenv(lock.LOCK_ENV, "nfs")
    with pytest.raises(lock.LockError, match=r"PDELRA_LOCK='nfs' is not one of auto, flock, file"):
        lock_mode(ckpt)


def test_a_stored_runs_lock_file_is_kept_when_cluster_lock_is_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clearing a stored run removes an unheld flock file; a lock file is held without flock, so it stays."""
    from pdelra.training import finished

    ckpt = tmp_path / "checkpoints" / "run"
    ckpt.mkdir(parents=True)
    (ckpt / LOCK_NAME).write_text("pid 4242 on another-node since 2026-01-01T00:00:00\n")
    monkeypatch.setenv(lock.LOCK_ENV, "file")
    finished.clear(ckpt)
    assert (ckpt / LOCK_NAME).exists()
    monkeypatch.setenv(lock.LOCK_ENV, "auto")
    finished.clear(ckpt)
    assert not ckpt.exists()


def test_the_schema_accepts_auto_flock_file_for_cluster_lock_and_defaults_to_auto() -> None:
    import jsonschema
    import yaml

    schema = yaml.safe_load((Path(__file__).parents[1] / "workflow/schemas/config.schema.yaml").read_text())
    cluster = schema["properties"]["cluster"]
    assert cluster["properties"]["lock"]["default"] == "auto"
    for value in ("auto", "flock", "file"):
        jsonschema.validate({"lock": value}, cluster)
    with pytest.raises(jsonschema.ValidationError, match="'localflock' is not one of"):
        jsonschema.validate({"lock": "localflock"}, cluster)
