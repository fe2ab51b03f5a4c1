"""The digest of the diagnostics code, without importing it: diagnose.smk passes it as a rule parameter at
every parse, a Slurm job's own included, and pdelra.steps.diagnose imports the model (torch: 3 s and 150 MB
of a job's start-up, resident while it trains)."""

from __future__ import annotations

import hashlib
from pathlib import Path

# The code whose edits must rerun the diagnose jobs (and only them): the workflow passes its digest as a
# rule parameter, because Snakemake reruns on params but never on edits of imported Python modules.
DIAGNOSTICS_SOURCES = ("nn/diagnostics.py", "steps/measure.py", "steps/diagnose.py")  # under the package root
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def source_digest(root: Path = PACKAGE_ROOT) -> str:
    """sha256 (16 hex digits) over the diagnostics source files under the package folder `root`."""
    digest = hashlib.sha256()
    for name in DIAGNOSTICS_SOURCES:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes())
    return digest.hexdigest()[:16]
