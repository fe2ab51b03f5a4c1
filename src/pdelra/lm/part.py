"""PhysQK-AD's LM as a part of the experiment (pdelra.parts.PartModule): its record's data beside its hooks.

Its rules are its own (workflow/rules/lm.smk: prepare, train, aggregate; `pdelra lm ...`); its report section
is the related systems' (pdelra.reporting.sections.related), so it declares none here. Cheap to import
(Snakemake loads it on every call): the hooks that need pandas or torch import them when they run."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pdelra.lm.cli import register
from pdelra.lm.jobs import RUNS_DIR, data_tasks, other_jobs, training_jobs
from pdelra.parts import OWN_RULES, TrainingRule

NAME = "lm"
SECTION = "lm"
TABLES = ("lm_runs", "lm_dynamics", "lm_history")  # `pdelra lm aggregate`
READS = ("lm_runs", "lm_dynamics")
RUNS = RUNS_DIR
RUN_FILE = "metrics.json"
TRAINING = (TrainingRule("lm_train", RUNS_DIR),)
FAMILY = "PhysQK-AD's language model"
WORKFLOW = OWN_RULES
FORKED = ("lm",)  # `pdelra lm train` imports torch: forked from the fork server (pdelra.forkserver)

__all__ = ["build", "check", "claims", "data_tasks", "other_jobs", "register", "training_jobs"]


def check(config: Mapping[str, Any]) -> list[str]:
    """Problems of the config's `lm` section."""
    from pdelra.lm.check import problems  # torch (the LM's model config): only when a config is checked

    return problems(config)


def build(files: list[Path], tables: Path) -> None:
    """lm_runs, lm_dynamics and lm_history from the LM runs' metrics.json files."""
    from pdelra.lm.aggregate import aggregate_lm  # pandas: only when tables are built

    aggregate_lm(files, tables)


def claims(inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """PhysQK-AD's LM claims (family `lm`) from lm_runs and lm_dynamics."""
    from pdelra.results.catalogue.physqk import part_claims  # the results layer: only when judged

    return part_claims(inputs)
