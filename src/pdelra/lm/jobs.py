"""PhysQK-AD's LM in the plan: its `lm_train` jobs, its other jobs and the raw data it reads (the part `lm`
of pdelra.parts, which the planner and the workflow loop over). Torch-free: Snakemake imports it while it
parses the workflow."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pdelra.lm import grid
from pdelra.parts import TrainingJob, job_asks

RUNS_DIR = "lm/runs"  # under results/{experiment}


def training_jobs(config: Mapping[str, Any]) -> list[TrainingJob]:
    """The `lm_train` rule's jobs (workflow/rules/lm.smk); none without an `lm` section."""
    lm = config.get("lm")
    if not lm:
        return []
    resources = lm["resources"]
    return [
        TrainingJob(
            "lm_train",
            run,
            json.loads(grid.run_config(lm, *run)),
            resources["gpu"],
            resources["runtime"],
            **job_asks(config, resources),
            runs_dir=RUNS_DIR,
        )
        for run in grid.runs(lm)
    ]


def other_jobs(config: Mapping[str, Any]) -> dict[str, int]:
    """{rule: jobs} of lm.smk's other rules, as a fresh `snakemake -n` plans them."""
    return {"lm_prepare": 1, "lm_aggregate": 1} if config.get("lm") else {}


def data_tasks(config: Mapping[str, Any]) -> set[str]:
    """The raw corpus the LM reads (an LRA task's raw text)."""
    return {config["lm"]["corpus"]} if config.get("lm") else set()
