"""Atomic checkpoint files in a run's checkpoint directory.

The directory lives outside the Snakemake rule's declared outputs (Snakemake deletes those before a job
runs), so a retried or requeued job finds the checkpoint its previous attempt left. Every write goes to a
temporary file in the same directory and is moved into place with os.replace, so a kill at any instant
leaves either the previous checkpoint or the new one, never a truncated file; a full disk leaves the previous
one and raises CheckpointWriteError naming the file.

Loading never executes code: `torch.load(weights_only=True)` accepts tensors and plain Python containers and
numbers only, and the checkpoint holds nothing else (seeding.capture_rng_states stores NumPy's RNG state as a
tensor, so no NumPy type needs allow-listing). Anything else there (a foreign pickle, a truncated file, a
checkpoint of another config or format) is moved aside with the reason, and the run starts fresh.

One process trains a run at a time: pdelra.locking.run_lock holds CKPT_DIR/lock for the whole run (a
flock, or a lock file where the file system has no flock). A finished run's final state is kept beside the
checkpoint until the workflow has stored its outputs (pdelra.training.finished).
"""

from __future__ import annotations

import errno
import io
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from pdelra.atomic import atomic_path
from pdelra.errors import UserError
from pdelra.training.seeding import capture_rng_states, restore_rng_states

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"
# 2: NumPy's RNG state as a tensor (weights_only loading); version-1 checkpoints are moved aside.
FORMAT_VERSION = 2
# errno values that mean "no room": a full disk, a file-size limit (ulimit -f), an exhausted quota.
NO_SPACE = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


class CheckpointWriteError(UserError):
    """A run's file could not be written (full disk, quota, file-size limit); the previous one is intact."""


def checkpoint_path(ckpt_dir: Path) -> Path:
    return ckpt_dir / CHECKPOINT_NAME


def save_checkpoint(ckpt_dir: Path, state: dict[str, Any]) -> Path:
    """Write `state` (plus the format version) atomically to CKPT_DIR/checkpoint.pt."""
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    target = checkpoint_path(ckpt_dir)
    # Serialised in memory first (a few MB), then written by Python: a failed write raises OSError with its
    # errno (torch's own file writer would mask it behind a RuntimeError about zip positions).
    buffer = io.BytesIO()
    torch.save({"format_version": FORMAT_VERSION, **state}, buffer)
    kept = "the previous checkpoint is intact; rerun to resume from it"
    with write_guard(target, kept), atomic_path(target) as tmp:
        tmp.write_bytes(buffer.getbuffer())
    return target


def trainer_states(model: Any, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """What every trainer's checkpoint holds besides its own state: the three state dicts and the RNGs."""
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": capture_rng_states(),
    }


def resume_trainer(
    ckpt_dir: Path, identity: dict[str, Any], model: Any, optimizer: Any, scheduler: Any
) -> dict[str, Any] | None:
    """Load this run's checkpoint (`load_checkpoint`), put its `trainer_states` back and return the rest of it
    for the trainer's own state; None when there is none to resume."""
    saved = load_checkpoint(ckpt_dir, identity)
    if saved is None:
        return None
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    restore_rng_states(saved["rng"])  # after the model was built: building it consumed random numbers
    return saved


@contextmanager
def write_guard(target: Path, kept: str) -> Iterator[None]:
    """Turn a failed write of `target` into CheckpointWriteError naming the file, the cause, what is kept."""
    try:
        yield
    except OSError as exc:
        cause, advice = exc.strerror or str(exc), "fix that and rerun"
        if exc.errno in NO_SPACE:
            cause = f"no space ({cause}: disk full, quota or file-size limit)"
            advice = f"free space under {target.parent} (df -h, quota, ulimit -f) and rerun"
        raise CheckpointWriteError(f"could not write {target}: {cause}; {kept}; {advice}") from exc


def load_checkpoint(ckpt_dir: Path, expected: dict[str, str]) -> dict[str, Any] | None:
    """Return the checkpoint in CKPT_DIR if it belongs to this run, else None.

    `expected` maps identity fields (config hash, data manifest hash) to their values for this run. A
    checkpoint that differs in any of them, or that cannot be read, is moved aside (never deleted: it may be
    someone's only copy of a long run) and the run starts fresh.
    """
    path = checkpoint_path(ckpt_dir)
    if not path.exists():
        return None
    try:
        # Tensors and plain Python values only: unpickling anything else raises instead of running it.
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated, foreign pickle, another torch's format: not worth crashing for
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        _move_aside(path, f"unreadable ({exc.__class__.__name__}: {first_line[:200]})")
        return None
    if not isinstance(state, dict):
        _move_aside(path, f"not a checkpoint of this project (a {type(state).__name__})")
        return None
    if state.get("format_version") != FORMAT_VERSION:
        _move_aside(path, f"format version {state.get('format_version')!r} != {FORMAT_VERSION}")
        return None
    for key, value in expected.items():
        if state.get(key) != value:
            _move_aside(path, f"{key} {str(state.get(key))[:12]}… does not match this run's {value[:12]}…")
            return None
    return state


def remove_checkpoint(ckpt_dir: Path) -> None:
    """Delete the run's checkpoint once metrics.json is safely written; stale copies stay for inspection."""
    checkpoint_path(ckpt_dir).unlink(missing_ok=True)
    for leftover in ckpt_dir.glob(".checkpoint-*.tmp"):  # from a process killed mid-write
        leftover.unlink(missing_ok=True)


def _move_aside(path: Path, reason: str) -> None:
    stale = path.with_name(f"{path.stem}.stale-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}{path.suffix}")
    os.replace(path, stale)
    log.warning("not resuming from %s: %s; moved it to %s and starting fresh", path, reason, stale.name)
