"""Atomic file and folder writes. A reader, or the next attempt of a job killed mid-write, sees the old
version or the new one, never half of one: everything is written under a temporary name in the same
folder, then moved into place with a rename (atomic within one file system).

The temporary names come from mkstemp/mkdtemp, which create them 0600/0700 (private while being written);
just before the rename they get the mode an ordinary open or mkdir would have given them, 0666/0777 less the
umask, so that a group member can read the results and resume a checkpoint where the umask allows it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# Every table's one float format (6 significant digits): what `pdelra claims` prints equals the files.
CSV_FLOAT_FORMAT = "%.6g"


def current_umask() -> int:
    """This process's umask. Linux reports it in /proc/self/status; elsewhere it is set and set back, which
    is safe as long as no other thread creates a file in between (only a fallback)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(path: str | Path, mode: int = 0o666) -> None:
    """Give a file made by mkstemp (0600) or a folder made by mkdtemp (0700, pass 0o777) the mode an ordinary
    open or mkdir gives: `mode` less the umask."""
    os.chmod(path, mode & ~current_umask())


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write to; when the block succeeds, it replaces `path`.

    On any error (or interrupt) inside the block the temporary file is removed and `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        follow_umask(tmp)  # after the block: a writer may have replaced the file (safetensors does)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())  # the data must be on disk before the rename makes it visible
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def csv_text(frame: pd.DataFrame) -> str:
    """A table as CSV text, without its index, floats in `CSV_FLOAT_FORMAT`: every table file's format."""
    return frame.to_csv(index=False, float_format=CSV_FLOAT_FORMAT)


def write_csv_atomic(frame: pd.DataFrame, path: str | Path) -> None:
    write_text_atomic(path, csv_text(frame))


def write_json_atomic(path: str | Path, data: Any, sort_keys: bool = False) -> None:
    """JSON with 2-space indents and a final newline. NaN/inf are refused (not JSON): map them to None."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=sort_keys, allow_nan=False) + "\n")


@contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside `path`; on success it replaces `path` (old content removed),
    on error it is deleted and `path` is left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        follow_umask(tmp, 0o777)
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old)
        else:
            tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
