"""`sbatch` that waits out a refusal: the workflow's Slurm submissions go through it (workflow/rules/hooks.smk
puts a folder holding an `sbatch` shim first on PATH; the shim runs `python -m pdelra.planning.sbatch_retry`).

The Slurm executor plugin counts a refused submission as a failed attempt: past the submit limit (QOS or
association MaxSubmitJobs) or while slurmctld does not answer, three refusals in seconds and the job stays
failed until Snakemake is restarted. Such a refusal says nothing about the job, so here it is retried: waits
of 30 s doubling up to 10 min, for at most a day in all (`PDELRA_SBATCH_PATIENCE`, seconds); each refusal is
one line in the log `PDELRA_REFUSED_LOG` names (results/{experiment}/cluster/refused.log). While it waits, the
plugin (which calls sbatch synchronously) submits nothing else, as sbatch would refuse it anyway. Any other
outcome, an accepted job or another error, is passed through unchanged: its stdout, stderr and exit code.
When the patience runs out, the last refusal is passed through, after one line saying so.

Before it submits, a rerun's shim takes over (or cancels) the job a killed run left live for the same rule
and wildcards (pdelra.planning.twins, cluster.on_rerun): a job taken over is answered with its id.

"Job violates accounting/QOS policy" is also sbatch's answer to a time limit above MaxWall, which no wait
cures; the Slurm preflight stops a run whose cluster.max_runtime is above a MaxWall before any submission.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pdelra.planning import twins

PATIENCE_ENV = "PDELRA_SBATCH_PATIENCE"  # seconds of refusals before giving up (default: a day)
FIRST_WAIT_ENV = "PDELRA_SBATCH_FIRST_WAIT"  # seconds of the first wait (default 30; tests set it small)
LOG_ENV = "PDELRA_REFUSED_LOG"  # the refusals' log; unset: none is written
SHIM_DIR_ENV = "PDELRA_SBATCH_SHIM_DIR"  # the shim's folder, skipped when looking for the real sbatch
DEFAULT_PATIENCE = 24 * 3600
DEFAULT_FIRST_WAIT = 30.0
MAX_WAIT_FACTOR = 20  # the waits double up to 20 x the first: 10 min after 30 s

# What sbatch (and slurmctld through it) answers when the job is fine but cannot be queued now.
REFUSALS = re.compile(
    r"QOSMaxSubmitJobPerUserLimit|QOSMaxSubmitJobPerAccountLimit|AssocMaxSubmitJobLimit|MaxSubmitJobs?"
    r"|Job violates accounting/QOS policy|submit limit|Socket timed out|Unable to contact slurm controller"
    r"|Slurm temporarily unable to accept job",
    re.IGNORECASE,
)


class NoSbatch(RuntimeError):
    """No real sbatch on PATH past the shim's folder."""


def is_refusal(stderr: str) -> bool:
    return bool(REFUSALS.search(stderr))


def waits(first: float) -> Callable[[int], float]:
    """The wait after the n-th refusal (n from 1): first x 2^(n-1), at most MAX_WAIT_FACTOR x first."""
    return lambda n: min(first * 2 ** (n - 1), first * MAX_WAIT_FACTOR)


def real_sbatch(path: str, shim_dir: str | None) -> str:
    """The first executable `sbatch` on `path` outside `shim_dir`."""
    skip = Path(shim_dir).resolve() if shim_dir else None
    for folder in path.split(os.pathsep):
        if not folder or (skip is not None and Path(folder).resolve() == skip):
            continue
        candidate = Path(folder) / "sbatch"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise NoSbatch(f"no sbatch on PATH besides the shim in {shim_dir}")


def submit(
    command: Sequence[str],
    stdin: bytes | None,
    patience: float,
    first_wait: float,
    log: Path | None,
    sleep: Callable[[float], None] = time.sleep,
) -> subprocess.CompletedProcess[bytes]:
    """Run `command` until it is not refused or the next wait would pass `patience` seconds in all; the last
    answer. Each refusal is logged (time, attempt, the wait, sbatch's message)."""
    wait_after = waits(first_wait)
    started, refusals = time.monotonic(), 0
    while True:
        done = subprocess.run(list(command), input=stdin, capture_output=True)
        message = done.stderr.decode(errors="replace").strip()
        if done.returncode == 0 or not is_refusal(message):
            return done
        refusals += 1
        wait = wait_after(refusals)
        waited = time.monotonic() - started
        give_up = waited + wait > patience
        if log is not None:
            _log(log, refusals, None if give_up else wait, message)
        if give_up:
            note = f"pdelra sbatch_retry: gave up after {refusals} refusal(s) over {waited:.0f} s\n"
            stderr = done.stderr + note.encode()
            return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, stderr)
        sleep(wait)


def _log(log: Path, refusal: int, wait: float | None, message: str) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    then = "giving up" if wait is None else f"retry in {wait:g} s"
    line = " | ".join(message.splitlines())
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        out.write(f"{stamp} refusal {refusal}, {then}: {line}\n")


def install_shim(folder: Path, python: str) -> Path:
    """Write `folder`/sbatch, a shim running this module with `python`; the folder, to put first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "sbatch"
    shim.write_text(
        "#!/bin/sh\n# pdelra: sbatch that waits out refusals (pdelra.planning.sbatch_retry)\n"
        f"{SHIM_DIR_ENV}={shlex.quote(str(folder.resolve()))} "
        f'exec {shlex.quote(python)} -m pdelra.planning.sbatch_retry "$@"\n',
        encoding="utf-8",
    )
    shim.chmod(0o755)
    return folder


def submit_through_shim(folder: Path, python: str, log: Path) -> None:
    """Put the shim (written into `folder`) first on this process's PATH, which the plugin's sbatch calls
    inherit, with `log` for the refusals."""
    install_shim(folder, python)
    os.environ["PATH"] = f"{folder.resolve()}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ[LOG_ENV] = str(log.resolve())


def main(argv: Sequence[str]) -> int:
    try:
        sbatch = real_sbatch(os.environ.get("PATH", ""), os.environ.get(SHIM_DIR_ENV))
    except NoSbatch as exc:
        print(f"sbatch: {exc}", file=sys.stderr)
        return 127
    # A job script on stdin (no --wrap, no script file named) is read once and given to every try.
    named = any(arg.startswith("--wrap") or (not arg.startswith("-") and Path(arg).is_file()) for arg in argv)
    reads_stdin = not named and not sys.stdin.isatty()
    stdin = sys.stdin.buffer.read() if reads_stdin else None
    # A rerun takes over the live job a killed run left for this job, or cancels it (pdelra.planning.twins).
    decision = twins.decide_from_env(argv, stdin.decode(errors="replace") if stdin else "")
    if decision.adopted is not None:
        print(decision.adopted)  # as `sbatch --parsable` answers: the plugin now follows the old job
        return 0
    argv = decision.argv
    log = os.environ.get(LOG_ENV)
    done = submit(
        [sbatch, *argv],
        stdin,
        float(os.environ.get(PATIENCE_ENV, DEFAULT_PATIENCE)),
        float(os.environ.get(FIRST_WAIT_ENV, DEFAULT_FIRST_WAIT)),
        Path(log) if log else None,
    )
    sys.stdout.buffer.write(done.stdout)
    sys.stderr.buffer.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
