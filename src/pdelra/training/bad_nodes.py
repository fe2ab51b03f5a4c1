"""Nodes whose GPU torch cannot see, and keeping the next submissions off them.

A training job that asked for a GPU on a node where torch finds no CUDA device stops at once
(pdelra.training.device.choose_device). Without more, that node fails every attempt of every job Slurm
places on it, hundreds of jobs within minutes. So the job first records its node (`$SLURMD_NODENAME`, else
the host name) in the file that $PDELRA_BAD_NODES names: the workflow sets it to
`results/{experiment}/cluster/bad_nodes.txt` (workflow/rules/resources.smk), and every GPU job the workflow
submits afterwards, a retry or a first attempt, carries `--exclude=NODE,...` in its `slurm_extra`
(`slurm_extra`, merged with the configured flags). Snakemake evaluates a job's resources again for each
attempt, so a retry reads the file as it is at its resubmission. Delete the file (or a line of it) once the
node is repaired.

No torch here: the workflow imports this module to submit jobs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
from pathlib import Path

BAD_NODES_ENV = "PDELRA_BAD_NODES"  # the file a job that finds no GPU adds its node to
_EXCLUDE = re.compile(r"(?:--exclude[=\s]+|-x\s*)(\S+)")


def node_name() -> str:
    """This job's node as Slurm names it (`$SLURMD_NODENAME`), else the host name."""
    return os.environ.get("SLURMD_NODENAME", "").strip() or socket.gethostname()


def read_bad_nodes(path: Path | str | None) -> list[str]:
    """The nodes recorded in `path`, in the order they were added; none when it does not exist."""
    if path is None:
        return []
    with contextlib.suppress(FileNotFoundError):
        text = Path(path).read_text(encoding="utf-8")
        return list(dict.fromkeys(line.strip() for line in text.splitlines() if line.strip()))
    return []


def record_bad_node(path: Path | str, node: str | None = None) -> bool:
    """Add `node` (default: this one) to `path` unless it is there already; True when added.

    Jobs failing on the same node at the same moment append under an exclusive lock of the file itself
    (flock), each a whole line with one write, so the file neither loses nor repeats a node."""
    node = node or node_name()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        if node in {line.strip() for line in handle}:
            return False
        handle.write(f"{node}\n")
        handle.flush()
        os.fsync(handle.fileno())
    return True


def record_from_env() -> str | None:
    """Record this node in the file $PDELRA_BAD_NODES names (nothing when unset or unwritable); the file, when
    the node is in it now."""
    path = os.environ.get(BAD_NODES_ENV, "").strip()
    if not path:
        return None
    try:
        record_bad_node(path)
    except OSError:
        return None
    return path


def slurm_extra(path: Path | str | None, configured: str | None = None) -> str | None:
    """The `slurm_extra` of a GPU job: the configured sbatch flags, with the recorded nodes added to their
    `--exclude` (one flag: sbatch keeps only the last of several); None when both are empty."""
    nodes = read_bad_nodes(path)
    if not nodes:
        return configured or None
    rest = (configured or "").strip()
    match = _EXCLUDE.search(rest)
    if match:
        nodes = list(dict.fromkeys([*match.group(1).split(","), *nodes]))
        rest = (rest[: match.start()] + rest[match.end() :]).strip()
    flag = f"--exclude={','.join(nodes)}"
    return f"{rest} {flag}" if rest else flag
