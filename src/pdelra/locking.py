"""One process trains a run at a time: the run's lock, CKPT_DIR/lock, held for the whole run.

Two ways to hold it, chosen per file system:
- flock (the default): an exclusive `flock` on CKPT_DIR/lock. The kernel drops it when its holder dies,
  however it dies, so a rerun after a crash never waits on a stale lock. On a shared file system this needs
  locks that work across nodes (NFSv4 and Lustre, GPFS, BeeGFS mounted with locking have them).
- a lock file, where flock is not available (`flock` raises ENOLCK "No locks available" on Lustre mounted
  `noflock` and on NFSv3 without a lock daemon; EOPNOTSUPP or ENOSYS elsewhere): CKPT_DIR/lock created with
  O_EXCL, which every shared file system makes atomic, holding "pid P on HOST since TIME". A warning says so
  once per process. The holder touches the file every HEARTBEAT_S seconds while it trains. A waiting process
  breaks a lock that is stale:
    * held by a process of its own host that no longer exists (same host name, dead pid): at once;
    * held by a process of another host (whose pid it cannot check), or by a live pid: only when the file
      has not changed for STALE_AFTER_S seconds of the waiter's own clock (its holder stopped touching it:
      killed by the OOM killer, SIGKILL at a time limit, or its node died). No clocks of two hosts are
      compared. A holder stopped by SIGSTOP for longer than that loses its lock.
  Breaking is serialised by a second O_EXCL file (lock.break), under which the waiter checks that the lock
  is still the one it judged stale before it removes it.

Which of the two: the probe (`lock_mode`) picks flock where it works, unless the config's `cluster.lock`
says otherwise. The workflow passes it to every job as the environment variable PDELRA_LOCK (`auto`, `flock`
or `file`): `file` forces lock files even where the probe's flock works, because node-local flock (Lustre
`localflock`, NFS `local_lock=flock`) passes any probe on one node yet lets two nodes hold the same lock;
`flock` refuses a folder without flock instead of falling back.

Either way the lock file is removed by its holder when the run ends (completed, diverged or interrupted),
with the run's checkpoint folder when nothing else is left in it, so finished runs leave no `lock` files.

Inside a Slurm job the holder also writes its job id to CKPT_DIR/slurm_job while it holds the lock, and
removes it first on release: a rerun of a Snakemake that died mid-campaign reads it
(pdelra.planning.reattach) and submits the run's new job with `--dependency=afterany:ID`, so the new job
pends instead of holding a GPU while it waits on this lock. A holder killed outright (SIGKILL, a dead node)
leaves the file behind; squeue no longer lists its id, and pdelra.training.finished.clear removes it.
A flock waiter that wakes on a file its holder has just removed takes the lock again on the new file.

This module imports no torch: Snakemake's preflight (`lock_mode`) reads it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pdelra.atomic import write_text_atomic
from pdelra.errors import UserError

log = logging.getLogger(__name__)

LOCK_NAME = "lock"
SLURM_JOB_NAME = "slurm_job"  # the id of the Slurm job holding the lock (pdelra.planning.reattach reads it)
LOCK_ENV = "PDELRA_LOCK"  # cluster.lock as the workflow hands it to its jobs: auto, flock or file
LOCK_CHOICES = ("auto", "flock", "file")
FORCED = "cluster.lock: file"  # the reason of a lock-file mode the config chose
# errno values of a file system whose flock does not work (as opposed to a lock someone holds).
NO_FLOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})
HEARTBEAT_S = 30.0  # the lock-file holder touches its file this often
STALE_AFTER_S = 600.0  # a lock file unchanged this long (20 missed heartbeats) is abandoned
POLL_S = 2.0  # a lock-file waiter looks again this often
BREAK_STALE_S = 60.0  # lock.break is held for microseconds; one this old was left by a killed breaker
_HOLDER = re.compile(r"^pid (\d+) on (\S+) since ")

_warned = False  # a missing flock is reported once per process


class LockError(UserError):
    """The run's lock could not be taken for a reason other than someone holding it; names the file."""


@dataclass(frozen=True)
class LockMode:
    """How run locks are held in a folder: `flock`, or `lock file` with the reason flock is not used."""

    kind: str
    reason: str | None = None

    def __str__(self) -> str:
        if self.reason is None:
            return self.kind
        return f"{self.kind} ({self.reason})"


def lock_choice() -> str:
    """cluster.lock as this process got it (PDELRA_LOCK; unset or empty: auto)."""
    choice = os.environ.get(LOCK_ENV, "").strip() or "auto"
    if choice not in LOCK_CHOICES:
        raise LockError(f"{LOCK_ENV}={choice!r} is not one of {', '.join(LOCK_CHOICES)} (cluster.lock)")
    return choice


def lock_mode(folder: Path) -> LockMode:
    """Which lock runs take in `folder` (created if missing): flock where a process can flock a file there,
    else lock files; `cluster.lock` (PDELRA_LOCK) forces either. Used at preflight to say which lock the
    training jobs will use; a job decides again itself (a compute node may mount it otherwise)."""
    choice = lock_choice()
    if choice == "file":  # no probe: node-local flock passes it and still lets two nodes in
        folder.mkdir(parents=True, exist_ok=True)
        return LockMode("lock file", FORCED)
    mode = _probe(folder)
    if choice == "flock" and mode.kind != "flock":
        raise LockError(f"cannot flock under {folder} ({mode.reason}) although cluster.lock is flock; "
                        "set cluster.lock to auto or file")  # fmt: skip
    return mode


def _probe(folder: Path) -> LockMode:
    """Can a process flock a file in `folder`?"""
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".lock-probe-{socket.gethostname()}-{os.getpid()}"
    try:
        with open(probe, "w") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            except OSError as exc:
                if exc.errno in NO_FLOCK:
                    return LockMode("lock file", f"flock: {exc.strerror or exc}")
                raise LockError(f"cannot lock {probe}: {exc.strerror or exc}") from exc
    finally:
        probe.unlink(missing_ok=True)
    return LockMode("flock")


def holder_line() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n"


@contextmanager
def run_lock(ckpt_dir: Path) -> Iterator[bool]:
    """Hold the run's lock for the duration of the block (flock, else a lock file: the module docstring).

    If another process holds it (a job from a dead Snakemake still running beside its rerun), say who and
    wait until it is released. Yields True when it had to wait (the other process may have finished the run
    meanwhile), else False.
    """
    path = ckpt_dir / LOCK_NAME
    mode = lock_mode(ckpt_dir)
    if mode.kind != "flock":
        _warn_no_flock(ckpt_dir, mode)
        with _lock_file(path) as waited, _slurm_job_recorded(ckpt_dir):
            yield waited
        return
    try:
        handle, waited = _take_flock(path)
    except OSError as exc:  # flock worked on the probe a moment ago: a failing lock daemon, not a feature
        raise LockError(f"cannot lock {path}: {exc.strerror or exc}") from exc
    try:
        with _slurm_job_recorded(ckpt_dir):
            yield waited
    finally:
        _remove_if_ours(path, handle)
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()
        _remove_empty(ckpt_dir)


@contextmanager
def _slurm_job_recorded(ckpt_dir: Path) -> Iterator[None]:
    """CKPT_DIR/slurm_job holds $SLURM_JOB_ID while the block runs (nothing outside a Slurm job)."""
    job_id = os.environ.get("SLURM_JOB_ID", "").strip()
    if not job_id:
        yield
        return
    record = ckpt_dir / SLURM_JOB_NAME
    write_text_atomic(record, job_id + "\n")
    try:
        yield
    finally:
        record.unlink(missing_ok=True)  # before the lock goes: a live lock's holder is always recorded


def _warn_no_flock(folder: Path, mode: LockMode) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    forced = mode.reason == FORCED
    why = "cluster.lock forces lock files" if forced else "flock is not available"
    cause = (
        "node-local flock is not shared by the nodes"
        if forced
        else "Lustre mounted noflock, or NFS without a lock daemon"
    )
    log.warning(
        "%s under %s (%s: %s); run locks are lock files created with O_EXCL instead (a stale one is broken "
        "when its holder's pid on this host is gone, or after %d min without a heartbeat)",
        why,
        folder.parent,
        mode.reason,
        cause,
        STALE_AFTER_S // 60,
    )


# --------------------------------------------------------------------------------------------- flock


def _take_flock(path: Path) -> tuple[IO[str], bool]:
    """Open and flock `path`; (handle, waited)."""
    waited = False
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            handle = open(path, "a+")  # noqa: SIM115 - held until the run ends
        except FileNotFoundError:  # the previous holder removed the folder just now
            continue
        try:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                log.warning(
                    "%s is locked by %s, which is training this run; waiting until it ends (never two "
                    "processes on one run)",
                    path,
                    holder,
                )
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # blocks; SIGTERM still ends this process
                waited = True
            if not _is_current(path, handle):  # its holder removed the file on release: lock the new one
                handle.close()
                continue
            handle.seek(0)
            handle.truncate()
            handle.write(holder_line())
            handle.flush()
            return handle, waited
        except BaseException:
            handle.close()
            raise


def _is_current(path: Path, handle: IO[str]) -> bool:
    """Is `handle` still the file at `path` (not one its holder unlinked)?"""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(handle.fileno())
    return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)


def _remove_if_ours(path: Path, handle: IO[str]) -> None:
    if _is_current(path, handle):
        path.unlink(missing_ok=True)


def _remove_empty(folder: Path) -> None:
    """Remove the run's checkpoint folder when nothing is left in it (a concurrent starter recreates it)."""
    with contextlib.suppress(OSError):
        folder.rmdir()


# ----------------------------------------------------------------------------------------- lock file


@contextmanager
def _lock_file(path: Path) -> Iterator[bool]:
    mine = holder_line()
    waited, watch = False, _Watch()
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileNotFoundError:
            continue
        except FileExistsError:
            pass
        held = _read(path)
        if held is None:  # released between our open and our read
            continue
        reason = _stale_reason(held, watch.unchanged_for(path, held))
        if reason is not None:
            if break_stale(path, held, reason):
                continue
        elif not waited:
            log.warning(
                "%s is locked by %s, which is training this run; waiting until it ends (never two "
                "processes on one run; if that job is gone for sure, delete the file)",
                path,
                held.strip() or "another process",
            )
            waited = True
        time.sleep(POLL_S)
    try:
        os.write(fd, mine.encode())
        os.fsync(fd)
        stop = threading.Event()
        beat = threading.Thread(target=_heartbeat, args=(fd, stop), name="run-lock-heartbeat", daemon=True)
        beat.start()
        try:
            yield waited
        finally:
            stop.set()
            beat.join()
            if _read(path) == mine:  # not broken and replaced meanwhile
                path.unlink(missing_ok=True)
    finally:
        os.close(fd)
        _remove_empty(path.parent)


class _Watch:
    """How long (by this process's monotonic clock) a lock file has kept the same content and mtime."""

    def __init__(self) -> None:
        self.key: tuple[str, int, int] | None = None
        self.since = time.monotonic()

    def unchanged_for(self, path: Path, content: str) -> float:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return 0.0
        key = (content, st.st_ino, st.st_mtime_ns)
        if key != self.key:
            self.key, self.since = key, time.monotonic()
        return time.monotonic() - self.since


def _heartbeat(fd: int, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_S):
        with contextlib.suppress(OSError):  # a missed beat only brings the stale verdict nearer
            os.utime(fd)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _stale_reason(held: str, unchanged_s: float) -> str | None:
    """Why the lock file holding `held` is abandoned, or None while its holder may still be alive."""
    match = _HOLDER.match(held)
    if match and match.group(2) == socket.gethostname() and not pid_alive(int(match.group(1))):
        return f"its holder, pid {match.group(1)} on this host, is gone"
    if unchanged_s >= STALE_AFTER_S:
        return f"no heartbeat for {unchanged_s / 60:.0f} min"
    if not held.strip() and unchanged_s >= POLL_S * 5:  # created but never written: its creator died
        return "empty"
    return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def break_stale(path: Path, held: str, reason: str) -> bool:
    """Remove the stale lock `path` if it still holds `held`; True when it was removed. Breakers take turns
    through lock.break, so two of them never remove a lock that one of them has just taken."""
    guard = path.with_name(f"{LOCK_NAME}.break")
    try:
        fd = os.open(guard, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        with contextlib.suppress(FileNotFoundError):
            if time.time() - guard.stat().st_mtime > BREAK_STALE_S:
                guard.unlink()
        return False
    try:
        if _read(path) != held:
            return False
        path.unlink(missing_ok=True)
        log.warning("broke the stale lock %s (%s): %s", path, held.strip() or "empty", reason)
        return True
    finally:
        os.close(fd)
        guard.unlink(missing_ok=True)
