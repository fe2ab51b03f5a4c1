"""Continuous-Time Attention's own experiments in the plan: the `cta_official_train` and `cta_lm_train` jobs,
the other jobs of workflow/rules/cta_official.smk and the LRA raw data it reads (the part `cta_official` of
pdelra.parts). Torch-free: Snakemake imports it while it parses the workflow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pdelra.cta_official import grid
from pdelra.parts import TrainingJob, job_asks


def training_jobs(config: Mapping[str, Any]) -> list[TrainingJob]:
    """The `cta_official_train` rule's jobs; none without the section."""
    section = config.get("cta_official")
    jobs = []
    for run in grid.runs(section):
        resources = grid.merged(section, "resources", run[0])
        resolved = grid.run_config(section, run[0], run[1], run[4])
        jobs.append(
            TrainingJob(
                "cta_official_train",
                run,
                resolved,
                resources["gpu"],
                resources["runtime"],
                **job_asks(config, resources),
                runs_dir=grid.RUNS_DIR,
            )
        )
    return jobs


def lm_training_jobs(config: Mapping[str, Any]) -> list[TrainingJob]:
    """The `cta_lm_train` rule's jobs: its WikiText-103 LM runs (grid.lm_runs); none without
    `cta_official.wikitext103`."""
    section = config.get("cta_official")
    lm = grid.lm_section(section)
    if not lm:
        return []
    resources = lm["resources"]
    return [
        TrainingJob(
            "cta_lm_train",
            run,
            grid.lm_run_config(section, run[1], run[3], run[4]),
            resources["gpu"],
            resources["runtime"],
            **job_asks(config, resources),
            runs_dir=grid.RUNS_DIR,
        )
        for run in grid.lm_runs(section)
    ]


def other_jobs(config: Mapping[str, Any]) -> dict[str, int]:
    """{rule: jobs} of its data and table rules, as `snakemake -n` plans them from scratch."""
    return grid.data_jobs(config.get("cta_official"), config["data"]["source"])


def data_tasks(config: Mapping[str, Any]) -> set[str]:
    """The LRA raw folders the grid reads (IMDb's `text`)."""
    return grid.lra_raw_tasks(config.get("cta_official"))
