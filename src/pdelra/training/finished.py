"""A finished run's final state, kept beside its checkpoint until the workflow has stored the run's outputs.

Snakemake deletes a job's outputs when the job fails, and a job can fail after its run has finished: a time
limit that lands between metrics.json and the job's end, or, in a pack, another member that runs out of
memory or time (the pack's folder is one output). So a trainer writes its final files (model.safetensors,
then metrics.json, whose presence marks them complete) first to CKPT_DIR/finished/, removes the checkpoint,
and only then publishes them to RUN_DIR: a hard link of each (a copy where links are not possible), so the
kept copy costs no disk space while the outputs exist, and deleting the outputs leaves it.

A retry (or a rerun of the pack) finds CKPT_DIR/finished/metrics.json and, when it belongs to this run
(same config hash and data manifest hash, and the same own operators' code) and this training code (the
same digest of the source files training runs, `code_version["training"]`; not `git describe --dirty`,
which an edit of the README or a profile changes), publishes it again instead of training. A finished copy
of another config or training code is removed and the run trains.

The kept copy is removed once Snakemake has stored the run's outputs: the workflow's start, success and
error handlers (workflow/rules/hooks.smk, `clear_finished_runs`) clear it for every run whose metrics.json
belongs to a job that is complete (not to be run, or finished in this session). Rerun `pdelra train` by hand
on a finished run restores it too; delete CKPT_DIR to train it again.

This module imports no torch (the workflow's handlers use it).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from pdelra.locking import LOCK_NAME, SLURM_JOB_NAME, lock_choice
from pdelra.training import metrics as run_metrics  # code_version looked up at call time: tests replace it

log = logging.getLogger(__name__)

FINISHED_DIR = "finished"
MARKER = "metrics.json"  # written last: a finished folder without it is an unfinished write


def finished_dir(ckpt_dir: Path) -> Path:
    return ckpt_dir / FINISHED_DIR


def begin(ckpt_dir: Path) -> Path:
    """An empty CKPT_DIR/finished/ for the final files (anything there from an earlier attempt is removed)."""
    folder = finished_dir(ckpt_dir)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def publish(ckpt_dir: Path, out_dir: Path) -> None:
    """Link (else copy) every file of CKPT_DIR/finished/ into OUT_DIR atomically, metrics.json last."""
    folder = finished_dir(ckpt_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [*sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != MARKER), MARKER]
    for name in names:
        _link_or_copy(folder / name, out_dir / name)


def _link_or_copy(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(source, tmp)
        except OSError as exc:  # another file system, or one without hard links
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            shutil.copyfile(source, tmp)
        # A fresh time: a restored output must not look older than an input touched since the first attempt.
        os.utime(tmp)
        os.replace(tmp, target)
    finally:
        # Gone after a rename, except where the target already was a link to the kept file: renaming a link
        # onto another link of the same file does nothing (POSIX), and leaves the temporary name. On an error
        # it would be left too.
        tmp.unlink(missing_ok=True)


def restore(ckpt_dir: Path, out_dir: Path, identity: dict[str, Any]) -> dict[str, Any] | None:
    """This run's kept final metrics, published again to OUT_DIR; None when there is nothing to restore
    (an unusable kept copy is removed, saying why)."""
    folder = finished_dir(ckpt_dir)
    if not folder.is_dir():
        return None
    try:
        metrics = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError) as exc:
        return _discard(folder, f"its metrics.json is missing or unreadable ({exc.__class__.__name__})")
    for key, value in identity.items():
        if metrics.get(key) != value:
            return _discard(folder, f"its {key} differs from this run's")
    kept, current = _training_code(metrics.get("code_version")), _training_code(run_metrics.code_version())
    if kept != current:  # the training code's digest, not `git describe --dirty`: a README edit keeps it
        return _discard(folder, f"it was trained by other training code (digest {kept}, now {current})")
    publish(ckpt_dir, out_dir)
    log.info(
        "this run finished earlier (its final state was kept in %s); restored its results to %s: nothing "
        "left to train",
        folder,
        out_dir,
    )
    return metrics


def _training_code(version: Any) -> str | None:
    """The training code's digest in a `code_version` record (None in one written before it was recorded)."""
    return version.get("training") if isinstance(version, dict) else None


def _discard(folder: Path, reason: str) -> None:
    log.info("not restoring the finished run kept in %s: %s; training it", folder, reason)
    shutil.rmtree(folder, ignore_errors=True)
    return None


def clear(ckpt_dir: Path) -> bool:
    """Remove a run's kept final state once its outputs are stored, and its checkpoint folder (and parents up
    to the checkpoints tree) when nothing else is in them; True when there was a kept state. A lock file
    nobody holds (left by a version that did not remove it) goes too, and with it a slurm_job record left
    by a job killed while it held the lock (its holder removes it first, so one without a lock is stale)."""
    folder = finished_dir(ckpt_dir)
    kept = folder.is_dir()
    if kept:
        shutil.rmtree(folder, ignore_errors=True)
    if not ckpt_dir.is_dir():
        return kept
    _remove_unheld_lock(ckpt_dir)
    if not (ckpt_dir / LOCK_NAME).exists():
        (ckpt_dir / SLURM_JOB_NAME).unlink(missing_ok=True)
    for empty in (ckpt_dir, *ckpt_dir.parents):  # the run's folder and its emptied parents, not the tree
        if empty.name == "checkpoints" or not empty.name:
            break
        try:
            empty.rmdir()
        except OSError:  # not empty: another run's folder (or a stale checkpoint kept aside) lies below
            break
    return kept


def _remove_unheld_lock(ckpt_dir: Path) -> None:
    path = ckpt_dir / LOCK_NAME
    if not path.exists() or lock_choice() == "file":  # a lock file is held without flock: leave it
        return
    try:
        with open(path, "a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: a process is running here
            path.unlink()
    except OSError:  # held, or no flock on this file system (a lock file exists only while held)
        return


def checkpoint_dir_of(run_dir: Path) -> Path:
    """The checkpoint folder of a run folder: results/{experiment}/runs/RUN -> .../checkpoints/RUN."""
    parts = list(run_dir.parts)
    parts[_last(parts, "runs")] = "checkpoints"
    return Path(*parts)


def checkpoint_root(ckpt_dir: Path) -> Path:
    """The tree a checkpoint folder (or its pattern) lies in: .../checkpoints/RUN -> .../checkpoints."""
    parts = list(ckpt_dir.parts)
    return Path(*parts[: _last(parts, "checkpoints") + 1])


def _last(parts: list[str], name: str) -> int:
    return len(parts) - 1 - parts[::-1].index(name)
