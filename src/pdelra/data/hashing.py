"""Content hashes: of the raw inputs a processed folder came from, and md5 of downloads."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, algorithm).hexdigest()


def inputs_hash(root: Path, files: Iterable[Path]) -> str:
    """sha256 over (path relative to root, sha256 of content) of every input, in sorted order: renaming,
    adding or editing any input file changes it."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(f"{path.relative_to(root).as_posix()}\0{file_digest(path)}\n".encode())
    return digest.hexdigest()
