"""The sbatch shim the Slurm runs submit through (pdelra.planning.sbatch_retry): a refused submission is
waited out and retried, never passed to the plugin as a failure; any other answer passes through unchanged.

A stub "real" sbatch, later on PATH than the shim, refuses its first $STUB_REFUSALS calls with $STUB_MESSAGE,
then answers $STUB_ANSWER (exit $STUB_RC)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pdelra.planning import sbatch_retry

REAL = r"""#!/bin/sh
n=$(cat "$STUB_DIR/count" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$STUB_DIR/count"
echo "$@" >> "$STUB_DIR/argv"
if [ $n -le "$STUB_REFUSALS" ]; then
  echo "sbatch: error: $STUB_MESSAGE" >&2; exit 1
fi
echo "$STUB_ANSWER"; [ "$STUB_RC" = 0 ] || echo "sbatch: error: $STUB_ERROR" >&2; exit "$STUB_RC"
"""
LIMIT = "QOSMaxSubmitJobPerUserLimit"
POLICY = (
    "Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or "
    "time limits)"
)


def _sbatch(tmp_path: Path, refusals: int, message: str = LIMIT, rc: int = 0, patience: float = 60):
    real_dir, stub = tmp_path / "real", tmp_path / "state"
    real_dir.mkdir()
    stub.mkdir()
    (real_dir / "sbatch").write_text(REAL)
    (real_dir / "sbatch").chmod(0o755)
    shim = sbatch_retry.install_shim(tmp_path / "shim", sys.executable)
    env = {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{real_dir}{os.pathsep}{os.environ['PATH']}",
        "STUB_DIR": str(stub),
        "STUB_REFUSALS": str(refusals),
        "STUB_MESSAGE": message,
        "STUB_ANSWER": "4242" if rc == 0 else "",
        "STUB_ERROR": "Invalid partition name specified",
        "STUB_RC": str(rc),
        sbatch_retry.PATIENCE_ENV: str(patience),
        sbatch_retry.FIRST_WAIT_ENV: "0.05",
        sbatch_retry.LOG_ENV: str(tmp_path / "results" / "cluster" / "refused.log"),
    }
    done = subprocess.run(
        ["sbatch", "--parsable", "--wrap=true"], env=env, capture_output=True, text=True, timeout=60
    )
    calls = (stub / "argv").read_text().splitlines()
    log = tmp_path / "results" / "cluster" / "refused.log"
    return done, calls, log.read_text().splitlines() if log.exists() else []


REFUSALS = [LIMIT, "AssocMaxSubmitJobLimit", POLICY, "Socket timed out on send/recv"]


@pytest.mark.parametrize("message", REFUSALS)
def test_refusals_are_waited_out_and_the_accepted_job_is_what_the_plugin_reads(tmp_path: Path, message: str):
    done, calls, log = _sbatch(tmp_path, refusals=3, message=message)
    assert (done.returncode, done.stdout, done.stderr) == (0, "4242\n", "")
    assert calls == ["--parsable --wrap=true"] * 4  # the same submission each time
    assert len(log) == 3
    assert "refusal 1, retry in 0.05 s" in log[0] and message in log[0]
    assert "refusal 3, retry in 0.2 s" in log[2]  # the waits double


def test_another_failure_passes_through_at_once_unchanged(tmp_path: Path):
    done, calls, log = _sbatch(tmp_path, refusals=0, rc=1)
    assert done.returncode == 1
    assert done.stderr == "sbatch: error: Invalid partition name specified\n"
    assert len(calls) == 1 and log == []


def test_when_the_patience_runs_out_the_last_refusal_is_passed_through(tmp_path: Path):
    done, calls, log = _sbatch(tmp_path, refusals=100, patience=0.3)
    assert done.returncode == 1
    first, note = done.stderr.splitlines()
    assert first == f"sbatch: error: {LIMIT}"
    assert note.startswith(f"pdelra sbatch_retry: gave up after {len(calls)} refusal(s)")
    assert 2 <= len(calls) < 10  # 0.05 + 0.1 s waited, the next 0.2 s would pass 0.3 s
    assert "giving up" in log[-1] and len(log) == len(calls)


def test_the_waits_double_from_30_s_to_10_min():
    wait = sbatch_retry.waits(sbatch_retry.DEFAULT_FIRST_WAIT)
    assert [wait(n) for n in range(1, 8)] == [30, 60, 120, 240, 480, 600, 600]


def test_the_real_sbatch_is_the_first_past_the_shims_folder(tmp_path: Path):
    shim = sbatch_retry.install_shim(tmp_path / "shim", sys.executable)
    with pytest.raises(sbatch_retry.NoSbatch):
        sbatch_retry.real_sbatch(str(shim), str(shim))


def test_the_workflow_hook_puts_the_shim_first_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv(sbatch_retry.LOG_ENV, raising=False)
    cluster = tmp_path / "results" / "cluster"
    sbatch_retry.submit_through_shim(cluster / "bin", sys.executable, cluster / "refused.log")
    assert shutil.which("sbatch") == str((cluster / "bin" / "sbatch").resolve())
    assert os.environ[sbatch_retry.LOG_ENV] == str((cluster / "refused.log").resolve())
