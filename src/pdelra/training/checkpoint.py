"""Atomic checkpoint files in a run's checkpoint directory.

The directory lives outside the Snakemake rule's declared outputs (Snakemake deletes those before a job
runs), so a retried or requeued job finds the checkpoint its previous attempt left. Every write goes to a
temporary file in the same directory and is moved into place with os.replace, so a kill at any instant
leaves either the previous checkpoint or the new one, never a truncated file.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

from pdelra.atomic import atomic_path

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT_VERSION = 1


def checkpoint_path(ckpt_dir: Path) -> Path:
    return ckpt_dir / CHECKPOINT_NAME


def save_checkpoint(ckpt_dir: Path, state: dict[str, Any]) -> Path:
    """Write `state` (plus the format version) atomically to CKPT_DIR/checkpoint.pt."""
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    target = checkpoint_path(ckpt_dir)
    with atomic_path(target) as tmp:
        torch.save({"format_version": FORMAT_VERSION, **state}, tmp)
    return target


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
        # weights_only=False: the checkpoint holds RNG states and plain Python history next to tensors, and it
        # was written by this code for this run; it is not an untrusted download.
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # a checkpoint from a different torch/pickle world is not worth crashing for
        _move_aside(path, f"unreadable ({exc.__class__.__name__}: {exc})")
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
