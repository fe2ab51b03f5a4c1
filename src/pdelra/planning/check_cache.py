"""What the config check keeps between runs, in $XDG_CACHE_HOME/pdelra (default ~/.cache/pdelra): the probes
of users' operators (by their code's digest) and the answers of the checks that build models (by the digest
of the pdelra code and of the config). Every parse of the workflow makes the config check (common.smk), and
those checks import torch: 2-3 s of each `snakemake -n` on 2 cores, most of a dry run's time. Their answer is
a function of the config and the code alone, so a repeated parse of the same config by the same code reads it
here instead. A lost or unreadable file only means checking afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from pdelra.atomic import write_json_atomic

PROBE_CACHE = "operator-probes.json"  # the own operators' probes (pdelra.nn.operator_check keys them)
BUILT_CHECKS = "model-checks.json"  # the answers of the checks that build models (config_check.built_checks)
KEPT_ANSWERS = 256  # the newest answers kept: enough for every config of a project, and a bounded file
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def cache_file(name: str) -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "pdelra" / name


def read(name: str) -> dict[str, Any]:
    try:
        found = json.loads(cache_file(name).read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: check afresh
    return found if isinstance(found, dict) else {}


def write(name: str, entries: Mapping[str, Any]) -> None:
    """Keep `entries` (the newest KEPT_ANSWERS of them, in insertion order)."""
    kept = dict(list(entries.items())[-KEPT_ANSWERS:])
    with contextlib.suppress(OSError):  # a read-only home: the check stands, only the next one checks again
        write_json_atomic(cache_file(name), kept)


@cache
def package_digest() -> str:
    """sha256 over every source file of the pdelra package, with the Python and torch versions: what the
    checks that build models run (a few milliseconds for its 1.4 MB)."""
    digest = hashlib.sha256(f"{sys.version}\0{_torch_version()}\0".encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        content = path.read_bytes()
        digest.update(f"{path.relative_to(PACKAGE_DIR).as_posix()}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def answer_key(*parts: Any) -> str:
    """The key of one answer: the package's digest and `parts` (JSON, keys sorted)."""
    text = json.dumps([package_digest(), *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def model_module() -> Any:
    """pdelra.nn.model, imported now if it is not yet (torch): noted, so that `keeps_answers` still holds."""
    global _imported_here
    if "torch" not in sys.modules:
        _imported_here = True
    from pdelra.nn import model

    return model


_imported_here = False  # whether this process imported torch for these checks (`model_module`)


def keeps_answers() -> bool:
    """Whether this process reads and writes the kept answers: only one that had not imported torch before
    the checks did. They exist to spare that import; and a process that had it (a test, a notebook) may have
    changed the model's tables in memory, which no digest of the files sees."""
    return "torch" not in sys.modules or _imported_here
