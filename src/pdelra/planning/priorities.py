"""Which work a cluster gets first: the priority classes of the jobs, in the order `cluster.priority` names
them (default: `paper`, `diagnose`, `related`).

Snakemake hands the ready jobs of the highest `priority:` to the Slurm executor first (its job selector
maximises the summed priority of what it submits, `jobs:` and `max-jobs-per-timespan` at a time). Without
priorities every job weighs 0, and the related systems' jobs, whose inputs are larger, went first: under a
queue limit or a GPU-minute budget the paper's own runs were the ones left pending. The classes:
- `paper`: the LRA training jobs (`train`, `train_pack`) of the paper's baseline and positions, and of a
  config's own variants, on the pipeline's own encoder;
- `diagnose`: the diagnostics of those runs (CPU jobs; a run is diagnosed once it is trained);
- `related`: the related systems (Continuous-Time Attention, PhysQK): their variants on the LRA, runs on
  the CTA authors' encoder, and every part's training jobs (pdelra.parts: `lm_train`, `cta_official_train`,
  `cta_lm_train`, a user's part's).
Every other rule keeps Snakemake's default 0: data preparation and tables are prerequisites or local.

This module imports nothing heavy (Snakemake imports it while it parses the workflow).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pdelra import paper
from pdelra.parts import TrainingJob
from pdelra.planning import estimate, experiment

CLASSES = ("paper", "diagnose", "related")  # also the default order (workflow/schemas/config.schema.yaml)
PAPER_VARIANTS = frozenset(("none", *paper.POSITIONS))

Cell = tuple[str, str, str, str]  # (task, variant, scale, setting): one grid cell, whatever its seeds


def order_of(config: Mapping[str, Any]) -> list[str]:
    """`cluster.priority`: the classes, first served first."""
    return list((config.get("cluster") or {}).get("priority") or CLASSES)


def rule_priorities(order: Sequence[str]) -> dict[str, int]:
    """{class: Snakemake priority}: the first class of `order` the highest, the last 1 (above every other
    rule's 0)."""
    return {name: len(order) - i for i, name in enumerate(order)}


def run_class(variant: str, backbone: str) -> str:
    """The class of an LRA run: `paper` for the paper's baseline and positions and a config's own variants
    (names no system claims) on the pipeline's own encoder; `related` otherwise."""
    own = variant not in paper.VARIANT_LABELS
    ours = backbone == experiment.DIAGNOSED_BACKBONE
    return "paper" if ours and (variant in PAPER_VARIANTS or own) else "related"


def _backbone(run_config: Mapping[str, Any]) -> str:
    return str(run_config["model"].get("backbone", experiment.DIAGNOSED_BACKBONE))


def _cell_run_configs(config: Mapping[str, Any]) -> dict[Cell, Mapping[str, Any]]:
    """{grid cell: its first run's resolved config} of every LRA run's cell: the seeds of a cell share its
    model (hence its class) and its data (hence its work)."""
    settings = experiment.selected_settings(config)
    configs: dict[Cell, Mapping[str, Any]] = {}
    for run in experiment.lra_runs(config):
        if run[:4] not in configs:
            configs[run[:4]] = experiment.run_config(config, settings, *run)
    return configs


def cell_classes(config: Mapping[str, Any]) -> dict[Cell, str]:
    """{grid cell: class} of every LRA run's cell."""
    return {cell: run_class(cell[1], _backbone(rc)) for cell, rc in _cell_run_configs(config).items()}


# The most a cell's estimated work adds to its class's priority: under the 1 between two classes, so the order
# of the classes stands.
LONGEST_FIRST = 0.5


def cell_priorities(config: Mapping[str, Any]) -> dict[Cell, float]:
    """{grid cell: Snakemake priority} of every LRA run's cell: its class's (`rule_priorities`), plus up to
    LONGEST_FIRST in proportion to its runs' estimated FLOPs (pdelra.planning.estimate.run_flops) against
    the largest cell's. Within a class the longest runs start first, so the last jobs to start are short
    ones rather than one long run on one core or GPU while the others wait: the demo's 1,024-token Image and
    PathFinder runs before its 64-token ListOps ones."""
    configs = _cell_run_configs(config)
    priority = rule_priorities(order_of(config))
    data = {task: _task_data(config, task) for task in {cell[0] for cell in configs}}  # each task's read once
    work = {cell: _work(rc, data[cell[0]]) for cell, rc in configs.items()}
    largest = max(work.values(), default=0.0) or 1.0
    return {
        cell: priority[run_class(cell[1], _backbone(rc))] + LONGEST_FIRST * work[cell] / largest
        for cell, rc in configs.items()
    }


def _task_data(config: Mapping[str, Any], task: str) -> Mapping[str, Any] | None:
    """The task's counts and sizes (estimate.task_data); None where its manifest cannot say them (no
    `counts`): an order of jobs is no reason to refuse a workflow."""
    try:
        return estimate.task_data(config, task)
    except (KeyError, TypeError, ValueError, OSError):
        return None


def _work(run_config: Mapping[str, Any], data: Mapping[str, Any] | None) -> float:
    """A run's estimated FLOPs; 0 (no head start) without its task's data."""
    if data is None:
        return 0.0
    try:
        return estimate.run_flops(run_config, data)
    except (KeyError, TypeError, ValueError):
        return 0.0


def job_class(job: TrainingJob) -> str:
    """The class of one training job of the plan."""
    if job.rule not in experiment.LRA_RULES:  # a part's (pdelra.parts)
        return "related"
    return run_class(job.run[1], _backbone(job.config))


def plan_priority(config: Mapping[str, Any], jobs: Sequence[TrainingJob]) -> dict[str, Any]:
    """What `pdelra plan` records of the priorities (JSON-ready): the order, and per (rule, task) row of the
    plan the jobs of each class."""
    counts: dict[tuple[str, str, str], int] = {}
    for job in jobs:
        key = (job.rule, job.task, job_class(job))
        counts[key] = counts.get(key, 0) + 1
    rows = [{"rule": r, "task": t, "class": c, "jobs": n} for (r, t, c), n in counts.items()]
    return {"order": order_of(config), "rows": rows}


def spending_order(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per class, in the order the cluster gets it: its rules, jobs and device-hours. A plan row's hours are
    shared by its classes in proportion to their jobs (the jobs of one rule and task train the same model
    size on the same data; the variants' costs differ by a few percent). `diagnose` counts its CPU jobs and
    no device-hours: the plan does not time them."""
    priority = plan["priority"]
    totals: dict[str, dict[str, Any]] = {
        name: {"class": name, "rules": [], "jobs": 0, "device_hours": 0.0} for name in priority["order"]
    }
    hours = {(row["rule"], row["task"]): (row["device_hours"], row["jobs"]) for row in plan["tasks"]}
    for row in priority["rows"]:
        total = totals[row["class"]]
        row_hours, row_jobs = hours[(row["rule"], row["task"])]
        total["jobs"] += row["jobs"]
        total["device_hours"] += row_hours * row["jobs"] / row_jobs
        if row["rule"] not in total["rules"]:
            total["rules"].append(row["rule"])
    diagnose = plan["other_jobs"].get("diagnose", 0)
    if diagnose and "diagnose" in totals:
        totals["diagnose"].update(rules=["diagnose"], jobs=diagnose, device_hours=None)
    return [total for total in totals.values() if total["jobs"]]


def spending_line(plan: Mapping[str, Any]) -> str:
    """One line: the classes in the order Slurm gets them, with their jobs and device-hours."""
    parts = []
    for i, total in enumerate(spending_order(plan), 1):
        rules = ", ".join(total["rules"])
        if total["device_hours"] is None:
            parts.append(f"{i}. {total['class']}: {total['jobs']} CPU jobs ({rules}), no device-hours")
        else:
            hours = f"{total['device_hours']:,.1f} h"
            parts.append(f"{i}. {total['class']}: {total['jobs']} jobs ({rules}), {hours}")
    return "device-hours in the order the cluster gets them (cluster.priority): " + "; ".join(parts)
