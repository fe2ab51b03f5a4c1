"""DVC on every file system the run lock supports (pdelra.dvc_lock): where flock fails (Lustre `noflock`,
NFS without a lock daemon; injected here), `pdelra fetch` and `pdelra version` set `core.hardlink_lock` and
clear DVC's lock files that no process holds, so the first download and the `version` step run; a lock a
DVC process may still hold is left alone."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git_dvc_project
from test_data_fetch import server  # noqa: F401 - the HTTP server fixture
from test_lock import _dead_pid, no_flock_under

from pdelra import dvc_lock
from pdelra import locking as lock
from pdelra.data.errors import DataError
from pdelra.data.fetch import fetch
from pdelra.steps.versioning import version_experiment

DVC = str(Path(sys.executable).parent / "dvc")
SITECUSTOMIZE = """
import errno, fcntl, os
_real, _under = fcntl.flock, os.environ["NOFLOCK_UNDER"]
def _flock(fd, operation):
    number = fd if isinstance(fd, int) else fd.fileno()
    if os.readlink(f"/proc/self/fd/{number}").startswith(_under):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    _real(fd, operation)
fcntl.flock = _flock
"""


@pytest.fixture(autouse=True)
def _no_analytics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")


def no_flock_for_dvc(monkeypatch: pytest.MonkeyPatch, root: Path, tmp_path: Path) -> None:
    """flock fails under `root` in this process and in the `dvc` processes it starts (a sitecustomize)."""
    no_flock_under(monkeypatch, root)
    site = tmp_path / "noflock-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("NOFLOCK_UNDER", str(root))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))


def stale_flock_lock(root: Path) -> Path:
    """What a DVC command that failed to flock leaves: .dvc/tmp/lock, created and never written."""
    path = root / ".dvc" / "tmp" / "lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


def test_version_runs_where_flock_fails_with_hardlink_lock_and_the_stale_lock_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = git_dvc_project(tmp_path / "proj")
    no_flock_for_dvc(monkeypatch, root, tmp_path)
    stale = stale_flock_lock(root)
    (root / "data").mkdir()
    (root / "data" / "a.txt").write_text("a")
    unprepared = subprocess.run([DVC, "add", "data"], cwd=root, capture_output=True, text=True)
    assert unprepared.returncode != 0 and "Unable to acquire lock" in unprepared.stderr, "flock fails there"

    exp = root / "results" / "tiny"
    for name in ("runs", "tables", "report"):
        (exp / name).mkdir(parents=True)
        (exp / name / "x.txt").write_text(name)
    with caplog.at_level(logging.WARNING):
        record = version_experiment(exp, exp / "versioned.json")
    assert len(record["artifacts"]) == 3
    assert "hardlink_lock = true" in (root / ".dvc" / "config.local").read_text()
    assert f"broke the stale lock {stale}" in caplog.text and "where flock fails" in caplog.text
    again = subprocess.run([DVC, "add", "data"], cwd=root, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr


def test_the_first_download_runs_where_flock_fails(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: tuple[str, Path],  # noqa: F811
) -> None:
    base, served = server
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([DVC, "init", "-q"], cwd=root, check=True)
    no_flock_for_dvc(monkeypatch, root, tmp_path)
    stale = stale_flock_lock(root)
    (served / "archive.gz").write_bytes(b"bytes " * 100)
    out = root / "data" / "raw" / "archive.gz"
    assert fetch(f"{base}/archive.gz", out) and out.read_bytes() == b"bytes " * 100
    assert not stale.exists() and "hardlink_lock = true" in (root / ".dvc" / "config.local").read_text()


def _hardlink_lock(folder: Path) -> tuple[Path, Path]:
    """A lock as DVC's hard-link lock holds it: a claim file holding its own path, linked as `lock`."""
    folder.mkdir(parents=True, exist_ok=True)
    claim = folder / "0123abcd.lock"
    claim.write_text(str(claim))
    os.link(claim, folder / "lock")
    return folder / "lock", claim


def test_only_locks_no_dvc_process_holds_are_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / ".dvc" / "tmp"
    path, claim = _hardlink_lock(folder)
    assert not dvc_lock.clear_if_stale(path, flock_works=False), "a fresh hard-link lock is held"
    monkeypatch.setattr(dvc_lock, "DVC_LOCK_STALE_S", 0.0)
    assert dvc_lock.clear_if_stale(path, flock_works=False) and not path.exists() and not claim.exists()

    monkeypatch.setattr(dvc_lock, "DVC_LOCK_STALE_S", 3600.0)
    path, claim = _hardlink_lock(folder)
    claim.unlink()  # its holder died while unlocking
    assert not dvc_lock.clear_if_stale(path, flock_works=False), "within the grace of a claim being made"
    monkeypatch.setattr(dvc_lock, "CLAIM_GRACE_S", 0.0)
    assert dvc_lock.clear_if_stale(path, flock_works=False) and not path.exists()

    # Where flock works (cluster.lock: file), a flock lock goes only when no flock and no live pid holds it.
    path.write_text(f" {os.getpid()}\n")
    assert not dvc_lock.clear_if_stale(path, flock_works=True), "its pid is alive"
    path.write_text(f" {_dead_pid()}\n")
    with open(path) as holder:
        import fcntl

        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        assert not dvc_lock.clear_if_stale(path, flock_works=True), "a flock holds it"
    assert dvc_lock.clear_if_stale(path, flock_works=True) and not path.exists()


def test_cluster_lock_file_sets_hardlink_lock_where_flock_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_dvc_project(tmp_path / "proj")
    assert dvc_lock.prepare(root) == lock.LockMode("flock")
    assert not (root / ".dvc" / "config.local").exists(), "nothing changes where flock works"
    monkeypatch.setenv(lock.LOCK_ENV, "file")
    assert dvc_lock.prepare(root).reason == lock.FORCED
    assert "hardlink_lock = true" in (root / ".dvc" / "config.local").read_text()


def test_a_leftover_hard_link_lock_is_named_and_waited_out_not_called_another_dvc_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A DVC process killed while it unlocked leaves `lock` without its claim: `prepare` waits out the rest of
    the grace, saying what the file is and how long, then clears it; a lock still claimed (a holder alive, or
    killed holding it) is named with the way out instead of DVC's "another DVC process is running"."""
    root = git_dvc_project(tmp_path / "proj")
    monkeypatch.setenv(lock.LOCK_ENV, "file")  # hard-link locks, as where flock fails
    folder = root / ".dvc" / "tmp"
    path, claim = _hardlink_lock(folder)
    claim.unlink()
    monkeypatch.setattr(dvc_lock, "CLAIM_GRACE_S", 1.5)
    message = dvc_lock.lock_message(path)
    assert message.startswith(f"DVC's lock {path} is a hard-link lock left by a DVC process that died")
    assert "no DVC process holds it, and pdelra removes it 2 s after it was taken" in message
    with caplog.at_level(logging.WARNING):
        dvc_lock.prepare(root)
    assert not path.exists(), "waited out, then removed"
    assert "waiting 1 s: DVC's lock" in caplog.text or "waiting 2 s: DVC's lock" in caplog.text, caplog.text

    path, claim = _hardlink_lock(folder)  # claimed: held, or its holder was killed holding it
    failed = f"ERROR: Unable to acquire lock. Most likely another DVC process is running | {path}"
    explained = dvc_lock.explain_lock_failure(root, failed)
    assert "another DVC process" not in explained and f"remove {path} and {claim}" in explained, explained
    assert "pdelra removes it by itself 24 h after it was taken" in explained
    assert dvc_lock.explain_lock_failure(root, "ERROR: unexpected error") == "ERROR: unexpected error"
    done = subprocess.run([DVC, "status"], cwd=root, capture_output=True, text=True)  # DVC's own words
    assert done.returncode != 0 and "Unable to acquire lock" in done.stderr, done.stderr


def test_a_download_blocked_by_a_claimed_lock_names_it_and_the_way_out(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: tuple[str, Path],  # noqa: F811
) -> None:
    base, served = server
    root = git_dvc_project(tmp_path / "proj")
    monkeypatch.setenv(lock.LOCK_ENV, "file")
    path, claim = _hardlink_lock(root / ".dvc" / "tmp")  # a DVC process killed holding the lock
    (served / "archive.gz").write_bytes(b"bytes " * 100)
    with pytest.raises(DataError) as err:
        fetch(f"{base}/archive.gz", root / "data" / "raw" / "archive.gz")
    message = str(err.value)
    assert "another DVC process" not in message and f"DVC's lock {path} is a hard-link lock taken" in message
    assert f"remove {path} and {claim}" in message, message
