"""The killed run's jobs: a rerun finds every one still queued or running and never trains a run twice.

When Snakemake dies (a login session ends, an OOM killer, SIGKILL), its Slurm jobs live on: those running
train, those pending start later, and each trains its run in full. A rerun would submit a twin for each run
not yet finished: a second job that waits on the run's lock holding a GPU, or restores the run after the old
one ends (an allocation for nothing). Records written when a job takes its run's lock
(pdelra.planning.reattach) miss the jobs that had not got that far: pending, or started and still parsing.

So the rerun looks for them the way the plugin names them: every job of this user whose working directory is
this workflow's and whose comment is the plugin's `rule_{rule}_wildcards_{values}` (its name is the dead run's
ID). `record` asks squeue once, at the rerun's start, before anything is submitted, and writes what it found
(cluster/twins.json). Then the run's sbatch shim (pdelra.planning.sbatch_retry) calls `intercept` for each
first submission of a job, whose comment names the same rule and wildcards; per `cluster.on_rerun`:

- `wait` (the default): the rerun takes the live old job over instead of submitting: it renames it to its own
  run ID (`scontrol update JobName=`, the name the plugin's status checks filter by) and answers sbatch's
  question with the old job's id, so Snakemake waits for that job as for its own. No twin is submitted, the
  running job keeps its progress and a pending one its place in the queue (its age priority). Further live
  jobs for the same run (left by earlier deaths) are cancelled: pending duplicates that would only restore.
  Where the rename is refused, the new job is submitted with `--dependency=afterany:` on the old ones instead:
  it pends without a GPU and restores the run when they end.
- `cancel`: the old jobs are cancelled and the job is submitted anew; it resumes from the run's checkpoint,
  losing what the old job trained since its last checkpoint and the old job's place in the queue. For a
  rerun with a changed config: a pending old job would run the new config (a job parses the workflow when it
  starts), but a running one trains with the old.

A retry (attempt > 1) is a fresh submission: the job the rerun took over has ended by then.
No torch, no Snakemake here: the shim imports this module at every submission.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

TWINS_ENV = "PDELRA_TWINS"  # the file `record` wrote: the killed run's live jobs, by comment
ON_RERUN_ENV = "PDELRA_ON_RERUN"  # cluster.on_rerun: wait | cancel
ON_RERUN = ("wait", "cancel")
# comment last: the one field a user could have given a '|'
SQUEUE = ("squeue", "--me", "--noheader", "--format=%i|%j|%T|%Z|%k")
TIMEOUT_S = 60.0
PLUGIN_COMMENT = re.compile(r"rule_\w+")

Run = Callable[..., subprocess.CompletedProcess[str]]


@dataclass(frozen=True)
class Twin:
    """A live job of an earlier run of this workflow: its id, name (that run's ID) and state."""

    job_id: str
    name: str
    state: str


def parse_squeue(text: str, workdir: Path) -> dict[str, list[Twin]]:
    """SQUEUE's lines as {comment: [Twin]}: the jobs whose working directory is `workdir` and whose comment
    is the plugin's; array tasks (ID_TASK) are left out (the workflow submits none)."""
    here = workdir.resolve()
    found: dict[str, list[Twin]] = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 4)
        if len(parts) != 5:
            continue
        job_id, name, state, folder, comment = parts
        if not job_id.isdigit() or not PLUGIN_COMMENT.fullmatch(comment.strip()):
            continue
        try:
            same = Path(folder).resolve() == here
        except OSError:
            same = False
        if same:
            found.setdefault(comment.strip(), []).append(Twin(job_id, name, state))
    return found


def record(path: Path, workdir: Path, run: Run = subprocess.run) -> tuple[int, str | None]:
    """Ask squeue for the live jobs of earlier runs of this workflow and write them to `path` (JSON); (jobs
    found, a warning when squeue failed: none is then taken over, and the old jobs' runs may train twice)."""
    try:
        done = run(list(SQUEUE), capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        failure: str | None = f"{type(exc).__name__}: {exc}"
    else:
        failure = None if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    found = {} if failure else parse_squeue(done.stdout, workdir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({c: [asdict(t) for t in ts] for c, ts in found.items()}, indent=1) + "\n")
    os.replace(tmp, path)
    warning = None
    if failure:
        warning = (
            f"`{' '.join(SQUEUE)}` failed ({failure}): the jobs of an earlier run of this workflow still "
            "queued or running are not found, and their runs may be trained twice; cancel them by hand "
            "(`squeue --me -o '%i %j %k'`, `scancel ID`)"
        )
    return sum(len(ts) for ts in found.values()), warning


def load(path: Path) -> dict[str, list[Twin]]:
    """What `record` wrote; nothing when the file is missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {comment: [Twin(**twin) for twin in twins] for comment, twins in data.items()}


def _option(argv: Sequence[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def attempt_of(argv: Sequence[str], script: str = "") -> int:
    """The attempt the plugin's job step runs (`--attempt N` in its --wrap, or in the job script it gives on
    stdin); 1 when not said."""
    wrap = _option(argv, "--wrap") or script
    match = re.search(r"--attempt\s+'?(\d+)", wrap)
    return int(match.group(1)) if match else 1


def choose(twins: Sequence[Twin]) -> tuple[Twin, list[Twin]]:
    """The old job to take over (a running one before a pending one, then the oldest) and the rest."""
    ranked = sorted(
        twins, key=lambda t: (t.state not in ("RUNNING", "COMPLETING", "SUSPENDED"), int(t.job_id))
    )
    return ranked[0], ranked[1:]


@dataclass
class Decision:
    """What the shim does for one sbatch call: `adopted` (answer this id, submit nothing) or submit `argv`;
    `cancelled`: old jobs scancel ended; `lines`: what to log."""

    argv: list[str]
    adopted: str | None = None
    cancelled: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def _with_dependency(argv: list[str], ids: Sequence[str]) -> list[str]:
    """`argv` with afterany on `ids` added to its --dependency (one flag: sbatch keeps only the last)."""
    out, existing = [], []
    for arg in argv:
        if arg.startswith("--dependency="):
            existing.append(arg.split("=", 1)[1])
        else:
            out.append(arg)
    terms = [*existing, f"afterany:{':'.join(ids)}"]
    return [*out, f"--dependency={','.join(terms)}"]


def _without_dependency_on(argv: list[str], ids: set[str]) -> list[str]:
    """`argv` with the jobs `ids` dropped from its --dependency afterany lists (they were cancelled)."""
    out = []
    for arg in argv:
        if not arg.startswith("--dependency="):
            out.append(arg)
            continue
        terms = []
        for term in arg.split("=", 1)[1].split(","):
            kind, _, rest = term.partition(":")
            kept = [job for job in rest.split(":") if job and job not in ids] if kind == "afterany" else None
            if kept is None:
                terms.append(term)
            elif kept:
                terms.append(f"{kind}:{':'.join(kept)}")
        if terms:
            out.append(f"--dependency={','.join(terms)}")
    return out


def intercept(
    argv: Sequence[str],
    twins: dict[str, list[Twin]],
    mode: str,
    run: Run = subprocess.run,
    script: str = "",
) -> Decision:
    """The shim's decision for one sbatch call of the plugin (module docstring); `script`: the job script
    given on stdin, if any."""
    argv = list(argv)
    comment, name = _option(argv, "--comment"), _option(argv, "--job-name")
    found = twins.get(comment or "")
    if not found or not name or attempt_of(argv, script) != 1:
        return Decision(argv)
    ids = [twin.job_id for twin in found]
    if mode == "cancel":
        _scancel(ids, run)
        return Decision(
            _without_dependency_on(argv, set(ids)),
            cancelled=ids,
            lines=[
                f"{comment}: cancelled the earlier run's job(s) {', '.join(ids)} (cluster.on_rerun: cancel)"
            ],
        )
    keep, extra = choose(found)
    renamed = run(
        ["scontrol", "update", f"JobId={keep.job_id}", f"JobName={name}"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if renamed.returncode != 0:
        why = (renamed.stderr or renamed.stdout).strip().splitlines()
        return Decision(
            _with_dependency(argv, ids),
            lines=[
                f"{comment}: could not take over job {keep.job_id} ({why[-1] if why else 'no answer'}): "
                f"submitted after it (afterany:{':'.join(ids)})"
            ],
        )
    cancelled = [twin.job_id for twin in extra]
    if cancelled:
        _scancel(cancelled, run)
    line = f"{comment}: took over job {keep.job_id} ({keep.state}, run {keep.name}) instead of submitting"
    if cancelled:
        line += f"; cancelled its duplicates {', '.join(cancelled)}"
    return Decision(argv, adopted=keep.job_id, cancelled=cancelled, lines=[line])


def _scancel(ids: Sequence[str], run: Run) -> None:
    if ids:
        run(["scancel", *ids], capture_output=True, text=True, timeout=TIMEOUT_S)


def decide_from_env(argv: Sequence[str], script: str = "") -> Decision:
    """`intercept` with the twins file and mode the workflow put in the environment (none: submit as is); its
    lines appended to twins.log beside that file (the plugin shows no sbatch output but the job id)."""
    path = os.environ.get(TWINS_ENV)
    if not path:
        return Decision(list(argv))
    mode = os.environ.get(ON_RERUN_ENV, "wait")
    decision = intercept(argv, load(Path(path)), mode if mode in ON_RERUN else "wait", script=script)
    if decision.lines:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with Path(path).with_name("twins.log").open("a", encoding="utf-8") as out:
            out.writelines(f"{stamp} {line}\n" for line in decision.lines)
    return decision
