"""The `--unlock` a rerun needs after a killed Snakemake, done by the rerun itself where it is safe.

Snakemake locks the working directory for a run (`.snakemake/locks/N.input.lock`, `N.output.lock`) and
removes the folder when it ends; a Snakemake that is killed leaves it, and the next run stops with "Directory
cannot be locked" until someone runs `snakemake --unlock`. Snakemake's lock names no process, so the workflow
writes one beside it when it starts (`write_owner`: host, pid, start time in
`.snakemake/locks/pdelra-owner`; Snakemake removes it with its locks). At the next run's start (`examine`):

- no lock: nothing to do;
- the owner ran on this host and its pid is gone (or is no Snakemake now): the lock is stale, so it is removed
  (what `--unlock` does), with one line saying so;
- the owner still runs here, or ran on another host (whose processes cannot be seen from here), or no owner
  was written (a lock older than this code, or a Snakemake killed before its start hook): the run stops in one
  line that says exactly what to run.

No Snakemake import here: the workflow calls it while it is parsed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

OWNER = "pdelra-owner"
LOCKS = Path(".snakemake") / "locks"


@dataclass(frozen=True)
class Verdict:
    """`action`: 'free' (no lock), 'unlocked' (a stale lock removed) or 'refuse'; `line`: what to say."""

    action: str
    line: str = ""


# Snakemake commands that take no lock of the working directory (a dry run, `--unlock` itself, the listings,
# summaries and graphs): a lock is Snakemake's to report to them, not a reason to stop.
NO_LOCK_FLAGS = (
    "--unlock", "--nolock", "--dry-run", "--dryrun", "--list", "--summary", "--detailed-summary", "--lint",
    "--report", "--dag", "--rulegraph", "--filegraph", "--d3dag", "--cleanup-metadata", "--archive",
    "--export-cwl", "--containerize", "--print-compilation", "--generate-unit-tests", "--lc", "--li", "--lp",
    "--version", "--help",
)  # fmt: skip


def dry_or_unlock(argv: list[str]) -> bool:
    """Is this Snakemake one that takes no lock (NO_LOCK_FLAGS, or short flags with -n, -S, -D, -h)?"""
    short = [arg for arg in argv if re.fullmatch(r"-[A-Za-z]+", arg)]
    long = [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")]
    return any(arg.startswith(NO_LOCK_FLAGS) for arg in long) or any(set("nSDh") & set(arg) for arg in short)


def write_owner(workdir: Path, pid: int) -> None:
    """Record this Snakemake (`pid`) as the owner of the workdir's lock, beside Snakemake's lock files."""
    folder = workdir / LOCKS
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    (folder / OWNER).write_text(f"{socket.gethostname()} {pid} {stamp}\n", encoding="utf-8")


def _snakemake_alive(pid: int) -> bool:
    """Does `pid` run a Snakemake on this host now (not some later process that took its number)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"snakemake" in cmdline


def examine(workdir: Path, argv: list[str]) -> Verdict:
    """What to do about the workdir's Snakemake lock at a run's start (module docstring); `argv`: this
    Snakemake's arguments, for the command the refusal names."""
    folder = workdir / LOCKS
    if not any(folder.glob("*.lock")):
        return Verdict("free")
    unlock = f"snakemake --unlock {shlex.join(argv)}".rstrip()
    try:
        host, pid_text, stamp = (folder / OWNER).read_text(encoding="utf-8").split()[:3]
        pid = int(pid_text)
    except (OSError, ValueError):
        return Verdict(
            "refuse",
            f"{folder} holds the lock of an earlier Snakemake that recorded no owner: if none runs on this "
            f"folder any more, run `{unlock}` and then this command again",
        )
    if host != socket.gethostname():
        return Verdict(
            "refuse",
            f"{folder} holds the lock of Snakemake pid {pid} on {host} (started {stamp}), which cannot be "
            f"checked from {socket.gethostname()}: if it no longer runs there, run `{unlock}` and then this "
            "command again",
        )
    if _snakemake_alive(pid):
        return Verdict(
            "refuse",
            f"Snakemake pid {pid} (started {stamp}) still runs this workflow: wait for it, or stop it "
            f"(`kill {pid}`; its Slurm jobs go on, and this command takes them over) and run it again",
        )
    shutil.rmtree(folder, ignore_errors=True)
    return Verdict(
        "unlocked",
        f"Removed the lock left by Snakemake pid {pid} (started {stamp}), which no longer runs: the "
        "`--unlock` a rerun after a killed Snakemake needs",
    )
