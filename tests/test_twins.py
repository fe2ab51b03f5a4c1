"""A rerun finds every live job of the killed run (pdelra.planning.twins) and the lock it left
(pdelra.planning.stale_lock): squeue's answer read by working directory and the plugin's comment; per first
submission the old job taken over (renamed, its id answered), its duplicates cancelled, or all cancelled."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pdelra.planning import stale_lock, twins

WS = Path("/work/campaign")
COMMENT = "rule_train_wildcards_listops_none_h1_base_0"
SQUEUE = (
    f"101|old-run|RUNNING|{WS}|{COMMENT}\n"
    f"102|older-run|PENDING|{WS}|{COMMENT}\n"  # a duplicate an earlier death left
    f"103|old-run|PENDING|{WS}|rule_train_wildcards_listops_none_h1_base_1\n"
    f"104|old-run|PENDING|/elsewhere|{COMMENT}\n"  # another checkout's campaign: not ours
    "105|interactive|RUNNING|/work/campaign|\n"  # no plugin comment: a user's own job
    "junk line\n"
)


def _argv(attempt: int = 1, dependency: str | None = None) -> list[str]:
    argv = ["--parsable", "--job-name", "new-run", "--comment", COMMENT, "-A", "pdelra", "-D", str(WS)]
    if dependency:
        argv.append(f"--dependency={dependency}")
    step = f"python -m snakemake --target-jobs 'train:...' --attempt {attempt} --mode 'remote'"
    return [*argv, f"--wrap={step}"]


class Calls:
    """A stand-in for subprocess.run: records commands; scontrol answers `rename_rc`."""

    def __init__(self, rename_rc: int = 0) -> None:
        self.commands: list[list[str]] = []
        self.rename_rc = rename_rc

    def __call__(self, command, **_: object) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(command))
        rc = self.rename_rc if command[0] == "scontrol" else 0
        denied = "scontrol: error: Access/permission denied\n" * rc
        return subprocess.CompletedProcess(command, rc, "", denied)


def test_squeue_is_read_by_working_directory_and_the_plugins_comment(tmp_path: Path) -> None:
    found = twins.parse_squeue(SQUEUE, WS)
    assert sorted(found) == [COMMENT, "rule_train_wildcards_listops_none_h1_base_1"]
    assert [t.job_id for t in found[COMMENT]] == ["101", "102"]
    path = tmp_path / "cluster" / "twins.json"
    run = lambda *a, **k: subprocess.CompletedProcess(a[0], 0, SQUEUE, "")  # noqa: E731
    assert twins.record(path, WS, run) == (3, None)
    assert twins.load(path) == found
    failing = lambda *a, **k: subprocess.CompletedProcess(a[0], 1, "", "slurm_load_jobs error")  # noqa: E731
    count, warning = twins.record(path, WS, failing)
    assert count == 0 and twins.load(path) == {} and warning and "may be trained twice" in warning


def test_wait_takes_the_running_old_job_over_and_cancels_its_duplicate() -> None:
    calls = Calls()
    decision = twins.intercept(_argv(), twins.parse_squeue(SQUEUE, WS), "wait", calls)
    assert decision.adopted == "101" and decision.cancelled == ["102"]
    assert calls.commands == [
        ["scontrol", "update", "JobId=101", "JobName=new-run"],  # the name the plugin's sacct filters by
        ["scancel", "102"],
    ]
    assert decision.lines == [f"{COMMENT}: took over job 101 (RUNNING, run old-run) instead of submitting; "
                              "cancelled its duplicates 102"]  # fmt: skip


def test_a_retry_or_another_job_is_submitted_as_is() -> None:
    found = twins.parse_squeue(SQUEUE, WS)
    other = [a.replace(COMMENT, "rule_diagnose_wildcards_listops_0") for a in _argv()]
    for argv in (_argv(attempt=2), other):
        calls = Calls()
        decision = twins.intercept(argv, found, "wait", calls)
        assert decision.adopted is None and decision.argv == argv and calls.commands == []


def test_where_the_rename_is_refused_the_job_is_submitted_after_the_old_ones() -> None:
    calls = Calls(rename_rc=1)
    decision = twins.intercept(_argv(dependency="afterany:77"), twins.parse_squeue(SQUEUE, WS), "wait", calls)
    assert decision.adopted is None and decision.argv[-1] == "--dependency=afterany:77,afterany:101:102"
    assert "Access/permission denied" in decision.lines[0]
    assert [c[0] for c in calls.commands] == ["scontrol"]  # nothing cancelled


def test_cancel_cancels_every_old_job_and_drops_them_from_the_dependency() -> None:
    calls = Calls()
    argv = _argv(dependency="afterany:101:77")
    decision = twins.intercept(argv, twins.parse_squeue(SQUEUE, WS), "cancel", calls)
    assert decision.adopted is None and decision.cancelled == ["101", "102"]
    assert calls.commands == [["scancel", "101", "102"]]
    assert "--dependency=afterany:77" in decision.argv and not any("101" in a for a in decision.argv)
    only = {COMMENT: [twins.Twin("101", "old-run", "PENDING")]}
    decision = twins.intercept(_argv(dependency="afterany:101"), only, "cancel", Calls())
    assert not any(a.startswith("--dependency") for a in decision.argv)


def test_the_shim_answers_the_old_jobs_id_without_calling_sbatch(tmp_path: Path) -> None:
    """End to end through `python -m pdelra.planning.sbatch_retry`: stub scontrol/scancel/sbatch on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("scontrol", "scancel", "sbatch"):
        stub = bin_dir / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> {tmp_path}/calls\necho 999\n')
        stub.chmod(0o755)
    record = tmp_path / "cluster" / "twins.json"
    twins.record(record, WS, lambda *a, **k: subprocess.CompletedProcess(a[0], 0, SQUEUE, ""))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", twins.TWINS_ENV: str(record)}
    shim = [sys.executable, "-m", "pdelra.planning.sbatch_retry"]
    done = subprocess.run([*shim, *_argv()], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0 and done.stdout == "101\n", done.stderr
    assert (tmp_path / "calls").read_text().splitlines() == [
        "scontrol update JobId=101 JobName=new-run",
        "scancel 102",
    ]
    assert "took over job 101" in (record.with_name("twins.log")).read_text()
    done = subprocess.run([*shim, *_argv(attempt=2)], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.stdout == "999\n" and (tmp_path / "calls").read_text().splitlines()[-1].startswith("sbatch ")


# ---------------------------------------------------------------------------------------------------------
# The lock a killed Snakemake left
# ---------------------------------------------------------------------------------------------------------
def _locked(ws: Path, owner: str | None) -> Path:
    locks = ws / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("data/raw\n")
    if owner is not None:
        (locks / stale_lock.OWNER).write_text(owner)
    return locks


def test_a_dead_owners_lock_is_removed_and_a_live_or_unknown_one_refused_in_one_line(tmp_path: Path) -> None:
    assert stale_lock.examine(tmp_path, []).action == "free"
    dead = subprocess.run(["true"]).returncode or _dead_pid()
    host = __import__("socket").gethostname()
    locks = _locked(tmp_path / "a", f"{host} {dead} 2026-12-07T10:00:00+0000\n")
    verdict = stale_lock.examine(tmp_path / "a", ["--profile", "profiles/slurm"])
    assert verdict.action == "unlocked" and not locks.exists(), verdict
    assert verdict.line.startswith(f"Removed the lock left by Snakemake pid {dead} (started 2026-12-07")

    _locked(tmp_path / "b", "otherhost 4242 2026-12-07T10:00:00+0000\n")
    verdict = stale_lock.examine(tmp_path / "b", ["--profile", "profiles/slurm"])
    assert verdict.action == "refuse" and "\n" not in verdict.line
    assert "pid 4242 on otherhost" in verdict.line
    assert "run `snakemake --unlock --profile profiles/slurm` and then this command again" in verdict.line

    _locked(tmp_path / "c", None)
    verdict = stale_lock.examine(tmp_path / "c", [])
    assert verdict.action == "refuse" and "recorded no owner" in verdict.line
    assert "run `snakemake --unlock` and then" in verdict.line

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "snakemake"])
    try:
        time.sleep(0.5)  # until the child has exec'd: its /proc cmdline is empty before
        _locked(tmp_path / "d", f"{host} {live.pid} 2026-12-07T10:00:00+0000\n")
        verdict = stale_lock.examine(tmp_path / "d", [])
        assert verdict.action == "refuse" and f"Snakemake pid {live.pid}" in verdict.line
        assert (tmp_path / "d" / ".snakemake" / "locks").exists()
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["-n"], True), (["-np"], True), (["--dry-run"], True), (["--unlock"], True), (["--nolock"], True),
     (["--summary"], True), (["--list-rules"], True), (["--report=r.html"], True), (["-S"], True),
     (["--profile", "profiles/slurm"], False), (["-p", "-j", "4"], False), (["--cores", "2"], False)],
)  # fmt: skip
def test_a_dry_run_or_unlock_is_left_to_snakemake(argv: list[str], expected: bool) -> None:
    assert stale_lock.dry_or_unlock(argv) is expected


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
