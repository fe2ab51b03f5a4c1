"""A new related system in two files, as docs/add-a-related-system.md tells a user to add one: its module
(examples/toy_part.py, copied as the doc shows it: its data, jobs, a toy measurement, its table, a claim, a
report section) and a config section. The planner counts its jobs, the workflow runs them and its tables rule
through the generic rules (workflow/rules/parts.smk), aggregate judges its claim, and both report pages show
it, with no file of the project changed: the test writes only those two files into a copy of the finished
tiny workspace."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workspace, parse_job_counts, run_snakemake, tool_env

pytestmark = pytest.mark.slow

DOC = REPO / "docs" / "add-a-related-system.md"
EXAMPLE = REPO / "examples" / "toy_part.py"


def test_the_docs_module_is_the_example_file_as_written() -> None:
    """The doc's module is examples/toy_part.py, character for character: what the doc shows is what runs."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert EXAMPLE.read_text() in blocks
    config = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)[0])
    assert config["parts"] == ["toy_part"] and set(config["toy"]) == {"gain", "seeds", "runtime"}


def _pdelra(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`pdelra ARGS` in the workspace (where the part's modules are), which must succeed."""
    proc = subprocess.run(
        ["pdelra", *args], cwd=ws, env=tool_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _digest(folder: Path) -> str:
    files = sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()


def test_a_new_system_in_two_files_is_planned_run_aggregated_and_reported(
    finished_tiny: Path, tmp_path: Path
) -> None:
    planning = _digest(REPO / "src" / "pdelra" / "planning")  # the planner: no edit for a new system
    ws = copy_workspace(finished_tiny, tmp_path / "ws")
    before = {p.relative_to(ws) for p in ws.rglob("*") if p.is_file()}
    shutil.copyfile(EXAMPLE, ws / "toy_part.py")  # 1. its module, as the doc has it
    config_file = ws / "config" / "config.yaml"
    config = yaml.safe_load(config_file.read_text())
    doc_config = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)[0])
    config.update(doc_config)  # 2. its config section and the module's name in `parts`, as the doc has them
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))

    # Planned: `pdelra plan` counts its six jobs and its tables rule (it runs in the workspace, where the
    # user's modules are).
    _pdelra(ws, "plan", "config/config.yaml", "--no-calibration", "--json", "plan.json")
    counted = json.loads((ws / "plan.json").read_text())
    rows = [row for row in counted["tasks"] if row["rule"] == "toy_train"]
    assert sum(row["jobs"] for row in rows) == 6, counted["tasks"]
    assert counted["other_jobs"]["toy_aggregate"] == 1

    # Run: only its jobs, its tables, and what reads them (aggregate, report, the version record).
    dry = run_snakemake(ws, "-n", "--quiet", "rules", timeout=120, check=True)
    jobs = parse_job_counts(dry.stdout + dry.stderr)
    assert jobs.get("toy_train") == 6 and jobs.get("toy_aggregate") == 1, jobs
    assert "train" not in jobs and "diagnose" not in jobs, jobs  # the finished LRA runs are untouched
    run_snakemake(ws, "--cores", "2", timeout=300, check=True)

    results = ws / "results" / config["experiment"]
    toy_runs = pd.read_csv(results / "tables" / "toy_runs.csv")
    assert len(toy_runs) == 6 and (results / "toy/runs/toy/boosted/h1/base/seed2/metrics.json").is_file()
    claims = pd.read_csv(results / "tables" / "claims.csv").set_index("claim_id")
    assert claims.loc["toy_boost", "verdict"] == "reproduced"
    assert claims.loc["toy_boost", "effect"] == pytest.approx(0.2)
    report = (results / "report" / "report.html").read_text()
    assert "A toy system" in report and "Toy system: 6 runs, mean score 0.610." in report
    index = (results / "report" / "index.html").read_text()
    assert "A toy system" in index and "toy_runs.csv" in index
    # Its claim is counted on both pages and summed up there in a line under "Verdicts", as each family is.
    line = "A toy system (1 claims, Holm within the family): 1 reproduced"
    assert line in index and line in report

    # By hand: `pdelra claims` finds the part in the tables folder (parts.csv, as aggregate recorded the
    # config's parts) and gives the same claims.csv; the partial report (runs finished so far), given the
    # part as the workflow passes it, builds and shows the part's tables too.
    exp = f"results/{config['experiment']}"
    claims_again = _pdelra(ws, "claims", "--tables", f"{exp}/tables")
    assert claims_again.stdout == (results / "tables" / "claims.csv").read_text()
    _pdelra(ws, "report", "--partial", "--runs", f"{exp}/runs", "--part", "toy_part")
    assert "Toy system: 6 runs" in (results / "report-partial" / "report.html").read_text()

    written = {p.relative_to(ws) for p in ws.rglob("*") if p.is_file()} - before
    own = {Path("toy_part.py"), Path("plan.json")}
    assert not {p for p in written if p.suffix == ".py"} - own  # the user wrote one module, nothing else
    assert _digest(REPO / "src" / "pdelra" / "planning") == planning
