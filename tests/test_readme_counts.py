"""The README's cost table (its top section, "What the shipped config runs and costs") says what
config/config.yaml really plans: the GPU jobs per rule and in all equal a `snakemake -n` of the shipped
config, the requested GPU-hours equal `pdelra plan --no-calibration`, and the estimated ones its FLOPs
estimate on an H200 (`--gpu H200`, published split sizes). One dry run of the paper DAG (442 jobs, ~6 s
of CPU)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO, dry_run_jobs, make_workspace

from pdelra.planning import experiment
from pdelra.planning import plan as P

SECTION = "## What the shipped config runs and costs"


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def readme_costs() -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, str]]:
    """From the README's cost table: {rule: GPU jobs}, {rule: GPU-hours of its row} (a row's hours go to
    its first rule), the totals (jobs, hours, all_jobs, diagnose) of the table and the line below it, and
    {rule: its row's estimated GPU-hours on an H200, as written}."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert SECTION in text, f"README.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    jobs: dict[str, int] = {}
    hours: dict[str, int] = {}
    totals: dict[str, int] = {}
    estimated: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not re.fullmatch(r"[\d,]+", cells[3]):
            continue
        if cells[0] == "all":
            totals.update(jobs=_number(cells[2]), hours=_number(cells[3]))
            continue
        found = re.findall(r"([\d,]+) `(\w+)`", cells[2])
        assert found, line
        for count, rule in found:
            jobs[rule] = _number(count)
        hours[found[0][1]] = _number(cells[3])
        estimated[found[0][1]] = cells[4]
    listed = re.search(
        r"`snakemake -n` lists ([\d,]+) jobs in all: these ([\d,]+), ([\d,]+) `diagnose`", section
    )
    assert listed, "the line under the table that gives the dry run's job count"
    totals.update(
        all_jobs=_number(listed[1]), listed_training=_number(listed[2]), diagnose=_number(listed[3])
    )
    return jobs, hours, totals, estimated


def test_readme_job_counts_and_gpu_hours_are_the_shipped_configs(tmp_path: Path) -> None:
    jobs, hours, totals, _ = readme_costs()
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    dry_run = dry_run_jobs(make_workspace(tmp_path / "ws", config), timeout=180)

    training = {rule: count for rule, count in dry_run.items() if rule in experiment.TRAINING_RULES}
    assert jobs == training
    assert totals["jobs"] == totals["listed_training"] == sum(training.values())
    assert totals["all_jobs"] == sum(dry_run.values())
    assert totals["diagnose"] == dry_run["diagnose"]

    # The requested GPU-hours: the plan without calibration or finished runs counts each job at its runtime.
    plan = P.make_plan(
        P.load_config(REPO / "config" / "config.yaml"),
        torch.device("cpu"),
        calibrate_tasks=False,
        results=tmp_path / "no-results",
    )
    assert {row["step_time_source"] for row in plan["tasks"]} == {"requested"}
    per_rule: dict[str, float] = {}
    for row in plan["tasks"]:
        per_rule[row["rule"]] = per_rule.get(row["rule"], 0.0) + row["device_hours"]
    row_rules = {rule: [rule] for rule in hours}
    row_rules["cta_official_train"] = ["cta_official_train", "cta_lm_train"]  # one row, two rules
    for first, rules in row_rules.items():
        assert hours[first] == pytest.approx(sum(per_rule[rule] for rule in rules)), first
    assert totals["hours"] == pytest.approx(plan["total"]["device_hours"])


def test_readme_estimated_gpu_hours_are_the_flops_estimate_on_an_h200(tmp_path: Path) -> None:
    """The paper's row: the FLOPs estimate of its `train` jobs on an H200 (published split sizes, no data
    here); the related systems' models are not modelled (their rows say so)."""
    _, _, _, estimated = readme_costs()
    config = P.load_config(REPO / "config" / "config.yaml")
    config["data"]["processed_dir"] = str(tmp_path / "processed")
    plan = P.make_plan(
        config, torch.device("cpu"), calibrate_tasks=False, results=tmp_path / "no-results", gpu="H200"
    )
    train = sum(row["device_hours"] for row in plan["tasks"] if row["rule"] == "train")
    assert _number(estimated["train"]) == round(train)
    assert {estimated[rule] for rule in estimated if rule != "train"} == {"not modelled"}
