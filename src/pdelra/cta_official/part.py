"""Continuous-Time Attention's own experiments as a part of the experiment (pdelra.parts.PartModule): its
record's data beside its hooks.

Its rules are its own (workflow/rules/cta_official.smk; `pdelra cta-official ...`). Cheap to import
(Snakemake loads it on every call): the hooks that need pandas or torch import them when they run."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pdelra.cta_official import grid, jobs
from pdelra.cta_official.cli import register
from pdelra.cta_official.jobs import data_tasks, other_jobs
from pdelra.parts import OWN_RULES, TrainingJob, TrainingRule

NAME = "cta_official"
SECTION = "cta_official"
TABLES = grid.TABLES  # `pdelra cta-official aggregate`
READS = ("cta_official_runs",)
RUNS = grid.RUNS_DIR
RUN_FILE = "metrics.json"
TRAINING = (TrainingRule("cta_official_train", grid.RUNS_DIR), TrainingRule("cta_lm_train", grid.RUNS_DIR))
HEADING = "## Continuous-Time Attention as its authors run it"
FAMILY = "Continuous-Time Attention's own experiments"
WORKFLOW = OWN_RULES
FORKED = ("cta-official",)  # train-lm (and aggregate) import torch: forked from the fork server
PRELOAD = ("pdelra.cta_official.lm",)  # its LM trainer, imported once by the fork server

__all__ = ["build", "check", "claims", "data_tasks", "other_jobs", "register", "report", "training_jobs"]


def training_jobs(config: Mapping[str, Any]) -> list[TrainingJob]:
    """Its classification runs' jobs (`cta_official_train`), then its WikiText-103 runs' (`cta_lm_train`)."""
    return jobs.training_jobs(config) + jobs.lm_training_jobs(config)


def check(config: Mapping[str, Any]) -> list[str]:
    """Problems of the config's `cta_official` section."""
    from pdelra.cta_official.check import problems  # torch (the model configs): only when checked

    return problems(config)


def build(files: list[Path], tables: Path) -> None:
    """Its TABLES from its runs' metrics.json files."""
    from pdelra.cta_official.aggregate import aggregate  # pandas: only when tables are built

    aggregate(files, tables)


def claims(inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Its claims (family `cta_official`) from cta_official_runs."""
    from pdelra.results.catalogue.cta import part_claims  # the results layer: only when judged

    return part_claims(inputs)


def report(report: Any) -> None:
    """Its report section (a pdelra.reporting.sections.Report)."""
    from pdelra.reporting.sections.cta_official import render  # the report layer, above this one

    render(report)
