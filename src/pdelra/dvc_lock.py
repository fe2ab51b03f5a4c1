"""DVC's own lock on every file system the run lock supports (pdelra.locking).

DVC locks its project with `.dvc/tmp/lock` (and `.dvc/tmp/rwlock.lock` around its read/write record). By
default it takes them with flock (zc.lockfile), which fails where the run lock falls back to lock files
(Lustre mounted `noflock`, NFS without a lock daemon), so `dvc import-url` and `dvc add` exit with "Unable to
acquire lock. Most likely another DVC process is running". DVC's `core.hardlink_lock` takes them by hard
links instead (flufl.lock), which every shared file system supports.

So before `pdelra fetch` and `pdelra version` run DVC, `prepare` picks DVC's lock as the run lock is picked
(`lock_mode` on `.dvc/tmp`, honouring `cluster.lock`): in lock-file mode it sets `core.hardlink_lock true` in
`.dvc/config.local` (this checkout's, not committed: another checkout may live on another file system) and
removes DVC's lock files that no DVC process holds, saying which and why. A hard-link lock waits for any lock
file it finds, so a file left by a failed flock attempt, or by a DVC process that died, would block it:
- a flock lock file (zc.lockfile writes " PID" once it holds the flock, nothing before): stale where flock
  fails (no process can hold it), else when no flock is held on it and its pid is not alive on this host;
- a hard-link lock file (it holds the path of its holder's claim file): stale when its claim link is gone (its
  holder died while it locked or unlocked), or when it was taken DVC_LOCK_STALE_S ago: DVC holds its lock for
  one command, and no command of this project's runs for a day. Its claim file goes with it.
Removal goes through the run lock's breaker (`lock.break`, and a check that the file is unchanged), so two
processes never remove a lock that one of them has just taken.

A hard-link lock whose claim is gone but which is younger than CLAIM_GRACE_S (its DVC process died moments
ago, e.g. with a Snakemake killed mid-download) is waited out in `prepare`, saying so, rather than handed to
DVC, which would fail after 3 s with "Unable to acquire lock. Most likely another DVC process is running",
untrue here. Where DVC still fails so (a lock that is held, or was held by a process killed holding it), the
command's error is `lock_message`: which file, what it is, since when, and when or how it goes.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import time
from pathlib import Path

from pdelra import locking as lock
from pdelra.errors import UserError

log = logging.getLogger(__name__)

LOCK_FILES = ("lock", "rwlock.lock")  # in .dvc/tmp
DVC_LOCK_STALE_S = 24 * 3600.0  # a hard-link lock taken this long ago is abandoned
CLAIM_GRACE_S = 60.0  # a hard-link lock without its claim link, unchanged this long, is abandoned
_FLOCK_CONTENT = re.compile(r"^\s*(\d*)\s*$")  # what zc.lockfile writes: " PID\n", or nothing yet


def prepare(root: Path) -> lock.LockMode:
    """Make DVC's lock work in the DVC project at `root` before a DVC command runs (module docstring)."""
    tmp = root / ".dvc" / "tmp"
    mode = lock.lock_mode(tmp)
    if mode.kind == "flock":
        return mode
    set_hardlink_lock(root, mode)
    for name in LOCK_FILES:
        path = tmp / name
        if not clear_if_stale(path, flock_works=mode.reason == lock.FORCED) and (wait := _claim_wait(path)):
            log.warning("waiting %.0f s: %s", wait, lock_message(path))
            time.sleep(wait)
            clear_if_stale(path, flock_works=mode.reason == lock.FORCED)
    return mode


def _claim_wait(path: Path) -> float:
    """Seconds until the hard-link lock `path`, its claim gone, counts as abandoned; 0 for any other lock."""
    try:
        held, info = path.read_text(), os.stat(path)
    except FileNotFoundError:
        return 0.0
    if _FLOCK_CONTENT.match(held) or info.st_nlink >= 2:
        return 0.0
    return max(0.0, CLAIM_GRACE_S - (time.time() - info.st_ctime))


def lock_message(path: Path) -> str:
    """What DVC's lock file `path` is, since when, and when or how it goes: the words to give instead of DVC's
    "Most likely another DVC process is running"."""
    try:
        held, info = path.read_text(), os.stat(path)
    except FileNotFoundError:
        return f"DVC's lock {path} is gone now: run the command again"
    age = time.time() - info.st_ctime
    since = f"{time.strftime('%H:%M:%S', time.localtime(info.st_ctime))}, {age:.0f} s ago"
    if _FLOCK_CONTENT.match(held) is None:
        claim = held.strip()
        if info.st_nlink < 2:
            return (
                f"DVC's lock {path} is a hard-link lock left by a DVC process that died while it locked "
                f"or unlocked (its claim file {claim} is gone), taken {since}: no DVC process holds it, and "
                f"pdelra removes it {CLAIM_GRACE_S:.0f} s after it was taken"
            )
        return (
            f"DVC's lock {path} is a hard-link lock taken {since} by a DVC process that still holds it or "
            f"was killed holding it (claim file {claim}; hard-link locks record no process id): if no `dvc`, "
            f"`pdelra fetch` or `pdelra version` of this checkout runs (`pgrep -af dvc`), remove {path} and "
            f"{claim}; pdelra removes it by itself {DVC_LOCK_STALE_S / 3600:.0f} h after it was taken"
        )
    pid = held.strip() or "none yet"
    return (
        f"DVC's lock {path} is a flock lock (pid {pid}) taken {since}: a DVC process of this host holds it, "
        "or flock fails on this file system (set cluster.lock: file, which makes DVC lock with hard links)"
    )


def explain_lock_failure(root: Path, message: str) -> str:
    """`message` (a DVC command's error) with DVC's lock failure replaced by what the lock files are."""
    if "Unable to acquire lock" not in message:
        return message
    tmp = root / ".dvc" / "tmp"
    found = [lock_message(tmp / name) for name in LOCK_FILES if (tmp / name).exists()]
    return "; ".join(found) or message


def set_hardlink_lock(root: Path, mode: lock.LockMode) -> None:
    """`core.hardlink_lock true` in the checkout's .dvc/config.local, unless the config already says so."""
    from dvc.config import Config, ConfigError

    config_dir = root / ".dvc"
    try:
        config = Config(dvc_dir=str(config_dir), validate=False)
        if config["core"].get("hardlink_lock"):
            return
        with config.edit("local") as local:
            local.setdefault("core", {})["hardlink_lock"] = "true"  # as `dvc config` writes it
    except (ConfigError, OSError) as exc:
        raise UserError(
            f"cannot set core.hardlink_lock in {config_dir / 'config.local'} ({exc}), which DVC needs where "
            f"run locks are lock files ({mode}); run `dvc config --local core.hardlink_lock true` in {root}"
        ) from exc
    log.warning(
        "DVC locks %s with hard links from now on (core.hardlink_lock true in %s): its default lock takes "
        "flock, and run locks here are lock files (%s)",
        root,
        config_dir / "config.local",
        mode,
    )


def clear_if_stale(path: Path, flock_works: bool) -> bool:
    """Remove DVC's lock file `path` when no DVC process holds it (module docstring); True when removed."""
    try:
        held = path.read_text()
        info = os.stat(path)
    except FileNotFoundError:
        return False
    reason = _stale_reason(path, held, info, flock_works)
    if reason is None:
        return False
    if not lock.break_stale(path, held, reason):  # the run lock's breaker: one breaker at a time
        return False
    claim = Path(held.strip())
    if claim.parent == path.parent and claim.name.endswith(".lock") and claim.name not in LOCK_FILES:
        with contextlib.suppress(FileNotFoundError):
            claim.unlink()
    return True


def _stale_reason(path: Path, held: str, info: os.stat_result, flock_works: bool) -> str | None:
    flock_lock = _FLOCK_CONTENT.match(held)
    if flock_lock is None:  # a hard-link lock: the path of its holder's claim file
        age = time.time() - info.st_ctime  # ctime: when it was linked (flufl sets mtime to its expiry)
        if info.st_nlink < 2 and age >= CLAIM_GRACE_S:
            return "a hard-link lock whose claim file is gone: its DVC process died"
        if age >= DVC_LOCK_STALE_S:
            return f"a hard-link lock taken {age / 3600:.0f} h ago (DVC holds it for one command)"
        return None
    if not flock_works:
        return "a flock lock where flock fails: no DVC process can hold it"
    pid = int(flock_lock.group(1)) if flock_lock.group(1) else None
    if _flock_held(path) or (pid is not None and lock.pid_alive(pid)):
        return None
    if pid is None:
        return "an empty flock lock nobody holds"
    return f"a flock lock nobody holds (pid {pid} is not alive on this host)"


def _flock_held(path: Path) -> bool:
    """Does a process of this host hold a flock on `path`?"""
    try:
        with open(path) as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False
