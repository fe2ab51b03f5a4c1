"""Reattach instead of resubmit: a rerun of a Snakemake that died mid-campaign finds the Slurm jobs of the
dead session still training, and makes each run's new job wait for the old one in the queue.

A training job records its Slurm job id in CKPT_DIR/slurm_job while it holds the run's lock
(pdelra.locking.run_lock). When the rerun submits that run again, the rule's `slurm_extra` gains
`--dependency=afterany:ID` for every recorded id that squeue still lists: the new job pends (reason
Dependency) without holding a GPU until the old one ends, then starts, finds the run finished and restores it
(pdelra.training.finished.restore), or resumes it from its checkpoint if the old job was cut off. Without the
dependency it would start at once and hold a GPU while it waits on the run's lock.

squeue is asked once per LIVE_TTL_S per process (a rerun submits hundreds of jobs), and only when a record
exists. A failing or missing squeue is said once on stderr and counts as no live job: the new job then waits
on the lock, as before. Jobs of the dead session that had not reached the lock record nothing here: the rerun
finds those (and these) by the plugin's comment and takes them over instead (pdelra.planning.twins); this
dependency is the fallback for a job it did not take over.

This module imports nothing heavy: the workflow's resources read it at submission.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from pdelra.locking import SLURM_JOB_NAME

SQUEUE = ("squeue", "--me", "--noheader", "--format=%i")  # every job of this user not yet ended
LIVE_TTL_S = 60.0  # how long one squeue answer is trusted
SQUEUE_TIMEOUT_S = 30.0

_cache: tuple[float, frozenset[str]] | None = None  # (monotonic time asked, live ids)
_warned = False


def live_jobs() -> frozenset[str]:
    """The ids of this user's jobs that squeue lists (pending, running, suspended, completing)."""
    global _cache
    now = time.monotonic()
    if _cache is not None and now - _cache[0] < LIVE_TTL_S:
        return _cache[1]
    try:
        done = subprocess.run(SQUEUE, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:  # not installed, or a controller that hangs
        failure: str | None = f"{exc.__class__.__name__}: {exc}"
    else:
        failure = None if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    if failure is None:
        live = frozenset(line.strip() for line in done.stdout.splitlines() if line.strip())
    else:
        _warn_once(failure)
        live = frozenset()
    _cache = (now, live)
    return live


def _warn_once(failure: str) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    print(
        f"Warning (Slurm): `{' '.join(SQUEUE)}` failed ({failure}); a run whose earlier job still trains is "
        "submitted without waiting for it in the queue (its new job waits on the run's lock instead)",
        file=sys.stderr,
    )


def recorded_jobs(ckpt_dirs: Iterable[Path | str]) -> list[str]:
    """The job ids recorded in the checkpoint folders' slurm_job files, in order, once each."""
    ids: list[str] = []
    for folder in ckpt_dirs:
        try:
            job_id = (Path(folder) / SLURM_JOB_NAME).read_text().strip()
        except OSError:  # none: no job holds this run's lock (or the folder does not exist yet)
            continue
        if job_id and job_id not in ids:
            ids.append(job_id)
    return ids


def live_recorded_jobs(ckpt_dirs: Iterable[Path | str]) -> list[str]:
    """The recorded job ids (recorded_jobs) that squeue still lists; squeue is not asked when none is."""
    recorded = recorded_jobs(ckpt_dirs)
    if not recorded:
        return []
    live = live_jobs()
    return [job_id for job_id in recorded if job_id in live]


def slurm_extra(configured: str | None, ckpt_dirs: Iterable[Path | str]) -> str | None:
    """`configured` sbatch flags with `--dependency=afterany:ID[:ID...]` on the live recorded jobs added."""
    live = live_recorded_jobs(ckpt_dirs)
    dependency = f"--dependency=afterany:{':'.join(live)}" if live else None
    return " ".join(flag for flag in (configured, dependency) if flag) or None
