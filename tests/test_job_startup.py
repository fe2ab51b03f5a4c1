"""What a Slurm job's own Snakemake does at its start (the job step: `--mode remote --target-jobs ...`): it
parses the workflow for its one job without the config's full check, the own-operator probe or torch, which
the planning Snakemake has done once for all jobs (workflow/rules/common.smk, docs/measurements.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_config, make_workspace, tool_env

TORCH = re.compile(r"\|\s+torch$", re.M)  # `-X importtime`'s line for the torch package itself
TARGET_JOB = "train:task=listops,variant=probed,scale=h1,setting=base,seed=0"
# An own operator whose construction leaves a mark: the config check builds and runs it (the probe).
OPERATOR = """
import os
import torch


class Probed(torch.nn.Module):
    def __init__(self, d_model):
        super().__init__()
        with open(os.environ["PROBE_MARK"], "a") as mark:
            mark.write("probed\\n")

    def forward(self, x, lengths=None):
        return x
"""


def _imports(ws: Path, *args: str, mark: Path) -> str:
    """`python -X importtime -m snakemake ARGS` in the workspace: its import log (stderr), after success."""
    command = [sys.executable, "-X", "importtime", "-m", "snakemake", "--snakefile", "Snakefile", *args]
    env = tool_env({"PROBE_MARK": str(mark), "PYTHONPATH": str(ws)})
    done = subprocess.run(command, cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done.stderr


@pytest.mark.slow  # four Snakemake processes, two of them importing torch
def test_a_jobs_own_snakemake_and_a_repeated_dry_run_parse_without_the_probe_or_torch(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["variants"] = {"probed": {"after_embedding": {"operator": "probe_op:Probed"}}}
    config["grids"]["main"].update(tasks=["listops"], variants=["probed"])
    ws = make_workspace(tmp_path / "ws", config)
    (ws / "probe_op.py").write_text(OPERATOR)
    mark = tmp_path / "probed.txt"
    # The planning Snakemake: the full check, which builds and runs the operator (torch imported).
    planned = _imports(ws, "-n", "--cores", "1", mark=mark)
    assert TORCH.search(planned) and mark.read_text().count("probed") >= 1
    mark.unlink()
    # The job step, as the Slurm plugin runs it (--dry-run: nothing trains): neither the probe nor torch.
    step = _imports(ws, "--target-jobs", TARGET_JOB, "--allowed-rules", "train", "--cores", "1", "--force",
                    "--nolock", "--no-hooks", "--mode", "remote", "--dry-run", mark=mark)  # fmt: skip
    assert not TORCH.search(step) and not mark.exists()
    # The planning Snakemake again, the config and the code unchanged: the checks' answer is kept
    # (pdelra.planning.check_cache), so it neither imports torch nor builds the operator.
    again = _imports(ws, "-n", "--cores", "1", mark=mark)
    assert not TORCH.search(again) and not mark.exists()
    # An edit of the operator's code is a new answer: checked (and probed) afresh.
    (ws / "probe_op.py").write_text(OPERATOR + "\n# edited\n")
    edited = _imports(ws, "-n", "--cores", "1", mark=mark)
    assert TORCH.search(edited) and mark.read_text().count("probed") >= 1
