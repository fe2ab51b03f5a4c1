"""Processed data on disk: one folder per task with memory-mappable `.npy` arrays and a `manifest.json`.

Layout of `{processed_dir}/{task}/` (docs/interfaces.md, "Processed data"):

    {split}_tokens.npy   (N, max_len)  smallest unsigned dtype that holds the vocabulary
    {split}_lengths.npy  (N,) int32    valid tokens per row; padding is given by these, never by token values
    {split}_labels.npy   (N,) int64
    {split}_tokens2.npy, {split}_lengths2.npy   retrieval only: the second document of each pair
    manifest.json        written last; its presence means the folder is complete

Every file is written to a temporary name in the same folder and moved into place with `os.replace`, and
the manifest is removed before a rewrite starts, so a reader never sees a half-written folder as complete.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pdelra import tasks
from pdelra.atomic import atomic_path, follow_umask, write_bytes_atomic
from pdelra.data.errors import DataError
from pdelra.data.hashing import file_digest

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
FIELDS = ("tokens", "lengths", "labels", "tokens2", "lengths2")
PAIRED_FIELDS = ("tokens2", "lengths2")
MANIFEST_KEYS = (
    "task",
    "vocab_size",
    "vocab",
    "num_classes",
    "max_length",
    "counts",
    "truncated",
    "skipped",
    "input_hash",
    "notes",
    "format_version",
)


@dataclass(frozen=True)
class Split:
    """One split of a task. Arrays are read-only memory maps unless loaded with `mmap=False`."""

    tokens: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray
    tokens2: np.ndarray | None = None
    lengths2: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def paired(self) -> bool:
        """True for retrieval, whose rows are pairs of documents."""
        return self.tokens2 is not None


def array_path(task_dir: str | Path, split: str, field: str) -> Path:
    return Path(task_dir) / f"{split}_{field}.npy"


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds token ids 0 … vocab_size-1."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if vocab_size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    raise ValueError(f"vocabulary of {vocab_size} tokens does not fit in uint32")


# --------------------------------------------------------------------------------------------- reading


def read_manifest(task_dir: str | Path) -> dict[str, Any]:
    path = Path(task_dir) / MANIFEST_NAME
    if not path.is_file():
        raise DataError(
            path,
            "not found: the folder is not preprocessed or was left incomplete "
            "(run `pdelra preprocess TASK --raw RAW --out DIR`)",
        )
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataError(path, f"not valid JSON ({err.msg})", line=err.lineno) from err
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise DataError(path, f"missing keys {missing}")
    if manifest["format_version"] != FORMAT_VERSION:
        raise DataError(
            path,
            f"format_version {manifest['format_version']} is not {FORMAT_VERSION}; preprocess the task again",
        )
    return manifest


def manifest_hash(task_dir: str | Path) -> str:
    """sha256 of manifest.json: identifies the processed data a run was trained on."""
    read_manifest(task_dir)  # the same clear error when it is missing or malformed
    return file_digest(Path(task_dir) / MANIFEST_NAME)


def rebuild_hint(task_dir: str | Path) -> str:
    """How to redo a damaged task folder: Snakemake tracks only its manifest.json, so it would not notice."""
    return (
        f"remove the folder (rm -r {task_dir}) and rerun: Snakemake tracks only {MANIFEST_NAME}, "
        "so it does not redo the folder by itself"
    )


def load_split(task_dir: str | Path, split: str, mmap: bool = True) -> Split:
    """Load one split; by default the arrays are read-only memory maps, so a 2 GB split costs no RAM."""
    manifest = read_manifest(task_dir)
    if split not in manifest["counts"]:
        raise DataError(
            Path(task_dir) / MANIFEST_NAME, f"no split {split!r}; it has {sorted(manifest['counts'])}"
        )
    fields = FIELDS if tasks.is_two_tower(manifest["task"]) else FIELDS[:3]
    arrays: dict[str, np.ndarray] = {}
    for field in fields:
        path = array_path(task_dir, split, field)
        if not path.is_file():
            raise DataError(
                path,
                f"not found, although {MANIFEST_NAME} lists split {split!r}; {rebuild_hint(task_dir)}",
            )
        try:
            arrays[field] = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        except ValueError as err:
            raise DataError(path, f"not a readable .npy array ({err}); {rebuild_hint(task_dir)}") from err
    _check_shapes(task_dir, split, manifest, arrays)
    return Split(**arrays)


def _check_shapes(
    task_dir: str | Path, split: str, manifest: dict[str, Any], arrays: dict[str, np.ndarray]
) -> None:
    count = manifest["counts"][split]
    for field, array in arrays.items():
        expected = (count, manifest["max_length"]) if field.startswith("tokens") else (count,)
        if array.shape != expected:
            raise DataError(
                array_path(task_dir, split, field),
                f"shape {array.shape}, {MANIFEST_NAME} says {expected}; {rebuild_hint(task_dir)}",
            )


def check_values(
    task_dir: str | Path, split_name: str, split: Split, manifest: dict[str, Any], labels: bool = True
) -> None:
    """Refuse values the model cannot take, naming file, row and the manifest value they contradict.

    Tokens must lie in [0, vocab_size), lengths in [1, max_length] and (with `labels`) labels in
    [0, num_classes): otherwise an embedding lookup or the loss fails mid-training with a torch traceback
    that names no file. One vectorised pass over each memory map (a per-row max for tokens), before training.
    """
    vocab, length = manifest["vocab_size"], manifest["max_length"]
    # (field, array, lowest, highest allowed, the manifest key behind the bound, what one value is)
    checks = [("tokens", split.tokens, 0, vocab - 1, "vocab_size", "token"),
              ("lengths", split.lengths, 1, length, "max_length", "length")]  # fmt: skip
    if split.tokens2 is not None and split.lengths2 is not None:
        checks += [("tokens2", split.tokens2, 0, vocab - 1, "vocab_size", "token"),
                   ("lengths2", split.lengths2, 1, length, "max_length", "length")]  # fmt: skip
    if labels:
        checks.append(("labels", split.labels, 0, manifest["num_classes"] - 1, "num_classes", "label"))
    for field, array, low, high, key, what in checks:
        row, value = _first_outside(array, low, high)
        if row is not None:
            allowed = f"[0, {key}) = [0, {high + 1})" if low == 0 else f"[1, {key}] = [1, {high}]"
            raise DataError(
                array_path(task_dir, split_name, field),
                f"row {row} holds {what} {value}, outside {allowed} of {Path(task_dir) / MANIFEST_NAME}; "
                + rebuild_hint(task_dir),
            )


def _first_outside(array: np.ndarray, low: int, high: int) -> tuple[int | None, int | None]:
    """(row, value) of the first row with a value outside [low, high]; (None, None) when there is none."""
    if len(array) == 0:
        return None, None
    # Per-row extremes hold only N values, however long the rows; an unsigned array needs no minimum.
    rows = array.ndim == 2
    row_max = array.max(axis=1) if rows else array
    row_min = row_max if array.dtype.kind == "u" and low == 0 else (array.min(axis=1) if rows else array)
    too_high, too_low = row_max > high, row_min < low
    bad = np.flatnonzero(too_high | too_low)
    if not len(bad):
        return None, None
    row = int(bad[0])
    return row, int(row_max[row] if row_max[row] > high else row_min[row])


# --------------------------------------------------------------------------------------------- writing


def save_array(path: str | Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)


class ArrayWriter:
    """Fill a (capacity, *row_shape) `.npy` file row block by row block without holding it in memory.

    `close()` moves it into place, shrunk to the rows actually written (inputs may hold skipped items);
    leaving the `with` block on an error removes the temporary file.
    """

    def __init__(
        self, path: str | Path, capacity: int, row_shape: tuple[int, ...], dtype: np.dtype | type
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        os.close(fd)
        self._tmp = Path(name)
        try:
            follow_umask(self._tmp)  # mkstemp's 0600 would keep the data from the group
            self._array = np.lib.format.open_memmap(
                self._tmp, mode="w+", dtype=dtype, shape=(capacity, *row_shape)
            )
        except BaseException:  # no temporary file left behind (a full disk, an interrupt)
            self._tmp.unlink(missing_ok=True)
            raise
        self.count = 0

    def append(self, rows: np.ndarray) -> None:
        end = self.count + len(rows)
        if end > len(self._array):
            raise ValueError(f"{self.path}: more than the {len(self._array)} rows this writer was sized for")
        self._array[self.count : end] = rows
        self.count = end

    def close(self) -> None:
        array, self._array = self._array, None
        if array is None:
            return
        if self.count < len(array):  # rare (skipped items): copy into an exactly-sized file
            save_array(self.path, array[: self.count])
            del array
            self._tmp.unlink(missing_ok=True)
            return
        array.flush()
        del array
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        self._array = None
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> ArrayWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def begin_task(task_dir: str | Path) -> Path:
    """Start (re)writing a task folder: remove its manifest first, so it reads as incomplete until the end."""
    task_dir = Path(task_dir)
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / MANIFEST_NAME).unlink(missing_ok=True)
    return task_dir


def write_split(
    task_dir: str | Path,
    split: str,
    tokens: np.ndarray,
    lengths: np.ndarray,
    labels: np.ndarray,
    tokens2: np.ndarray | None = None,
    lengths2: np.ndarray | None = None,
) -> None:
    """Write one split's in-memory arrays with the dtypes of the contract (lengths int32, labels int64)."""
    arrays = {"tokens": tokens, "lengths": lengths.astype(np.int32), "labels": labels.astype(np.int64)}
    if (tokens2 is None) != (lengths2 is None):
        raise ValueError("tokens2 and lengths2 go together")
    if tokens2 is not None and lengths2 is not None:
        arrays |= {"tokens2": tokens2, "lengths2": lengths2.astype(np.int32)}
    for field, array in arrays.items():
        if len(array) != len(labels):
            raise ValueError(f"{split}_{field} has {len(array)} rows, labels has {len(labels)}")
        save_array(array_path(task_dir, split, field), array)


def write_manifest(task_dir: str | Path, manifest: dict[str, Any]) -> None:
    """Write manifest.json last, after every array of every split is in place."""
    manifest = {**manifest, "format_version": FORMAT_VERSION}
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise ValueError(f"manifest lacks keys {missing}")
    for split, count in manifest["counts"].items():
        fields = FIELDS if tasks.is_two_tower(manifest["task"]) else FIELDS[:3]
        for field in fields:
            path = array_path(task_dir, split, field)
            shape = np.load(path, mmap_mode="r").shape
            if shape[0] != count:
                raise ValueError(f"{path} has {shape[0]} rows, manifest counts say {count}")
    write_bytes_atomic(
        Path(task_dir) / MANIFEST_NAME, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    )
