"""metrics.json: what a run reports, written atomically, with the provenance every number needs.

Fields that measure cost or the circumstances of one attempt (`TIMING_FIELDS`) legitimately differ between
an interrupted-and-resumed run and an uninterrupted one; everything else must be identical on CPU.
"""

from __future__ import annotations

import math
import platform
import resource
import statistics
import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from pdelra import __version__
from pdelra.operator_code import training_code

METRICS_NAME = "metrics.json"
SCHEMA_VERSION = 1

# Fields of metrics.json that depend on when/where/how often the run was (re)started, not on what it computed.
TIMING_FIELDS = frozenset(
    {
        "wall_time_s",
        "median_step_time_s",
        "peak_memory_bytes",
        "peak_host_memory_bytes",
        "resumed_count",
        "interruptions",
    }
)


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN/inf; a diverged loss is recorded as null (the status field says why)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def median_or_none(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def peak_host_memory_bytes() -> int:
    """Peak resident host memory of this process, in bytes: what a job's `mem_mb` must cover per run (CUDA
    memory is `peak_memory_bytes`). Of this attempt only: a resumed run reports its last attempt's peak.

    Children are not added: RUSAGE_CHILDREN reports, for a child forked to run `git describe` or `lscpu`,
    the parent's pages it shared at the fork (measured: ~270 MB for git after importing torch), which would
    double the figure without any memory being used."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if platform.system() == "Darwin" else peak * 1024)  # KiB on Linux, bytes on macOS


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
    """The package version, when the code runs from a git checkout `git describe` of it, and `training`: the
    digest of the source files training runs (pdelra.operator_code.training_code), which decides a restore.

    Never fails: outside git (an installed wheel, a copied tree, no git binary) the git field is None.
    """
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
    return {"package": __version__, "git": described or None, "training": training_code()}
