"""metrics.json: what a run reports, written atomically, with the provenance every number needs.

Fields that measure cost or the circumstances of one attempt (`TIMING_FIELDS`) legitimately differ between
an interrupted-and-resumed run and an uninterrupted one; everything else must be identical on CPU.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

METRICS_NAME = "metrics.json"
SCHEMA_VERSION = 1

# Fields of metrics.json that depend on when/where/how often the run was (re)started, not on what it computed.
TIMING_FIELDS = frozenset({"wall_time_s", "median_step_time_s", "peak_memory_bytes", "resumed_count"})


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write JSON to a temp file beside `path`, fsync it, then os.replace: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            # allow_nan=False: NaN is not JSON; callers map non-finite values to None (finite_or_none).
            json.dump(data, handle, indent=2, sort_keys=False, allow_nan=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN/inf; a diverged loss is recorded as null (the status field says why)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def median_or_none(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


@cache
def library_versions() -> dict[str, str]:
    import numpy
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cuda": torch.version.cuda or "none",
    }


@cache
def code_version() -> dict[str, str | None]:
    """The package version and, when the code runs from a git checkout, `git describe` of it.

    Never fails: outside git (an installed wheel, a copied tree, no git binary) the git field is None.
    """
    from pdelra import __version__

    source_dir = Path(__file__).resolve().parent
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=source_dir,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        described = None
    return {"package": __version__, "git": described or None}
