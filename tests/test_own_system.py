"""A related system added as a user adds one, from the docs' own file (examples/lstm_part.py: an LSTM and a
BiLSTM on ListOps), in a workspace with a fresh data folder: the plan prices it, with and without
calibration, from its own runs or says it is not estimated (never at the Transformer's step time); the DAG
runs from nothing, its jobs after ListOps' data; its claim is on both report pages with a summary line; and
`pdelra claims --tables` gives the workflow's claims.csv byte for byte without being told the part."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, load_config, make_workspace, run_snakemake, tool_env

pytestmark = pytest.mark.slow

EXAMPLE = REPO / "examples" / "lstm_part.py"


def _pdelra(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["pdelra", *args], cwd=ws, env=tool_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _part_rows(ws: Path, *options: str) -> list[dict]:
    _pdelra(ws, "plan", "config/config.yaml", "--json", "plan.json", "--steps", "1", *options)
    plan = json.loads((ws / "plan.json").read_text())
    return [row for row in plan["tasks"] if row["rule"] == "rnn_train"]


def test_a_recurrent_system_on_listops_from_the_docs_file_is_planned_run_and_reported(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["data"]["processed_dir"] = "data/fresh"  # nothing prepared yet
    # The module's own docstring is the config section the user adds.
    config.update(yaml.safe_load(re.search(r"\n\n    (parts: .*?)\n\n", EXAMPLE.read_text(), re.S)[1]
                                 .replace("\n    ", "\n")))  # fmt: skip
    ws = make_workspace(tmp_path / "ws", config)
    shutil.copyfile(EXAMPLE, ws / "lstm_part.py")

    # Planned before anything ran: counted at its runtime, "not estimated" and why (calibrating ListOps
    # times the Transformer, whose step time the part's jobs must not take).
    for options in ((), ("--no-calibration",)):
        (row,) = _part_rows(ws, *options)
        assert (row["jobs"], row["step_time_source"], row["step_time_s"]) == (4, "requested", None), row
        assert "have no finished run" in row["not_estimated"]

    run_snakemake(ws, "--cores", "2", timeout=900, check=True)  # the DAG from nothing

    results = ws / "results" / config["experiment"]
    runs = pd.read_csv(results / "tables" / "rnn_runs.csv")
    assert sorted(runs["variant"]) == ["bilstm", "bilstm", "lstm", "lstm"]
    assert (ws / "data" / "fresh" / "listops" / "manifest.json").is_file()

    # Planned again: priced from its own finished runs.
    for options in ((), ("--no-calibration",)):
        (row,) = _part_rows(ws, *options)
        assert (row["done"], row["step_time_source"], row["not_estimated"]) == (4, "finished", None), row
        assert row["device_hours"] > 0

    claims = (results / "tables" / "claims.csv").read_text()
    judged = pd.read_csv(results / "tables" / "claims.csv").set_index("claim_id").loc["rnn_bilstm_vs_lstm"]
    assert judged["family"] == "rnn" and judged["verdict"] in ("reproduced", "contradicted", "inconclusive")
    label = "the recurrent baseline (BiLSTM against LSTM)"  # its module's FAMILY
    line = f"{label} (1 claims, Holm within the family): 1 {judged['verdict']}"
    for page in ("index.html", "report.html"):
        assert line in (results / "report" / page).read_text(), page
    assert "A recurrent baseline on ListOps" in (results / "report" / "report.html").read_text()
    again = _pdelra(ws, "claims", "--tables", f"results/{config['experiment']}/tables")
    assert again.stdout == claims
