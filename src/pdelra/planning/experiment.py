"""The experiment a workflow config describes: its runs, their resolved configs, and every job of the DAG.

One expansion, shared by the workflow (workflow/rules/common.smk takes its runs, settings, per-run configs and
diagnose parts from here) and `pdelra plan` (which counts and prices the same jobs), so that a count has one
source. `tests/test_plan.py` checks `workflow_jobs` against the job table of a real `snakemake -n`.

Jobs come in two kinds:
- training jobs (`training_jobs`): one per run of a training rule, each with the resources it asks for (GPUs,
  minutes for the first attempt: a retry asks for attempt × runtime). `TRAINING_RULES` lists the rules and the
  function expanding each: `train` (the LRA runs of every grid in `run_grids`), `train_pack` (one job per
  pack of runs of the tasks with `resources.pack` > 1), and the training rules of every part the config
  runs (pdelra.parts: PhysQK-AD's LM, Continuous-Time Attention's own experiments, a user's part), whose
  jobs each part's own module expands;
- the other jobs (`other_jobs`): data preparation, diagnostics, tables, report and DVC, counted per rule, and
  each part's own.

No system is imported here by name: a new one is a part (docs/add-a-related-system.md).

This module imports nothing heavy (Snakemake imports it while it parses the workflow).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import product
from typing import Any

from pdelra import parts
from pdelra import runs as run_layout
from pdelra.parts import TrainingJob, TrainingRule
from pdelra.parts import job_asks as _asks
from pdelra.planning import estimate, gpu_models
from pdelra.tasks import tasks_of_source

Run = tuple[str, str, str, str, int]  # (task, variant, scale, setting, seed): pdelra.runs.RUN_KEYS

# The diagnose jobs: each task's runs in order, up to this many to a part (workflow/rules/diagnose.smk). Small
# parts: a part starts once its runs are trained, beside the rest.
DIAGNOSE_RUNS_PER_JOB = 10


# ---------------------------------------------------------------------------------------------------------
# The LRA runs of the selected grids


def pack_minutes(minutes: float, k: int, gain: float) -> int:
    """First-attempt minutes of a pack of `k` runs of `minutes` each, uncapped: k x minutes / gain (the K
    runs share one card; `pack_gain` is what sharing gains, 1.0 until measured)."""
    return math.ceil(minutes * k / gain)


def merged(config: Mapping[str, Any], section: str, task: str) -> dict[str, Any]:
    """`defaults.{section}` overridden by `tasks.{task}.{section}` (model, train or resources)."""
    return {**config["defaults"].get(section, {}), **config["tasks"][task].get(section, {})}


def selected_settings(config: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """{setting: {"model": {...}, "train": {...}}} over the selected grids (a name means one thing).

    ValueError names a grid that `run_grids` selects but `grids` lacks, or a setting declared twice."""
    for name in config["run_grids"]:
        if name not in config.get("grids", {}):
            raise ValueError(f"run_grids names {name!r}, but grids.{name} is not defined in the config")
    return run_layout.merge_settings(config["grids"], config["run_grids"])


def lra_runs(config: Mapping[str, Any]) -> list[Run]:
    """Each distinct (task, variant, scale, setting, seed) of the selected grids once, sorted.

    ValueError names the tasks a grid uses that have no entry under `tasks`."""
    selected_settings(config)  # the grids exist and their settings agree
    runs: set[Run] = set()
    for name in config["run_grids"]:
        grid = config["grids"][name]
        settings = run_layout.grid_settings(grid, f"grids.{name}")
        runs.update(product(grid["tasks"], grid["variants"], grid["scales"], settings, grid["seeds"]))
    missing = sorted({task for task, *_ in runs} - set(config["tasks"]))
    if missing:
        raise ValueError(f"the selected grids use task(s) {missing} that have no entry under 'tasks'")
    return sorted(runs)


def run_config(
    config: Mapping[str, Any],
    settings: Mapping[str, Mapping[str, Mapping[str, Any]]],
    task: str,
    variant: str,
    scale: str,
    setting: str,
    seed: int | str,
    operator_codes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One LRA run's config (docs/interfaces.md, "Run config"): defaults < task < the grid setting. A variant
    declared under the config's `variants` travels with it as `model.operators` (its row: which operator at
    which points), so the job builds it from its own slice; a built-in variant's config is unchanged.

    `operator_codes` ({variant: hash}, `operator_codes`) adds the hash of the variant's own operator code as
    `operator_code`: the workflow passes it, so that an edit of that code changes the run config (a params
    value of the train rule, whose change reruns the run) and its hash (no checkpoint of the old code is
    resumed)."""
    overrides = settings[setting]
    model = {**merged(config, "model", task), **overrides["model"]}
    if variant in config_variants(config):
        model["operators"] = config_variants(config)[variant]
    resolved = {
        "task": task,
        "variant": variant,
        "scale": scale,
        "setting": setting,
        "seed": int(seed),
        "model": model,
        "train": {**merged(config, "train", task), **overrides["train"]},
    }
    if operator_codes and variant in operator_codes:
        resolved["operator_code"] = operator_codes[variant]
    return resolved


def operator_codes(config: Mapping[str, Any]) -> dict[str, str]:
    """{variant: sha256 of its operators' source} of each variant the config declares that runs a user's
    operator ("module:attr"; pdelra.operator_code says which files count). ValueError names an operator
    whose module has no source file to be found."""
    from pdelra.operator_code import operator_code  # torch-free; reads files only when a variant has one

    codes = {variant: operator_code(row) for variant, row in config_variants(config).items()}
    return {variant: code for variant, code in codes.items() if code is not None}


def config_variants(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The variants the config declares (`variants`: name → {point or position: {operator, args}})."""
    return dict(config.get("variants") or {})


def diagnostics_enabled(config: Mapping[str, Any]) -> bool:
    """`diagnostics.enabled` (default true): false plans no diagnose job and the report says so."""
    return bool((config.get("diagnostics") or {}).get("enabled", True))


# The diagnostics measure the pre-LN encoder's insertion points (pdelra.steps.diagnose): runs of another
# backbone (Continuous-Time Attention's own, `model.backbone: official_cta`) have none of them and are not
# diagnosed.
DIAGNOSED_BACKBONE = "pdelra"


def diagnosed_runs(config: Mapping[str, Any], runs: list[Run]) -> list[Run]:
    """The runs the diagnose jobs measure: those whose model is the pipeline's own encoder; none when the
    config turns diagnostics off (`diagnostics.enabled: false`)."""
    if not diagnostics_enabled(config):
        return []
    settings = selected_settings(config)
    return [
        run
        for run in runs
        if run_config(config, settings, *run)["model"].get("backbone", DIAGNOSED_BACKBONE)
        == DIAGNOSED_BACKBONE
    ]


def diagnose_parts(runs: list[Run], size: int = DIAGNOSE_RUNS_PER_JOB) -> dict[tuple[str, str], list[Run]]:
    """{(task, part): [run, ...]}: each task's runs in order, `size` to a part; parts "0", "1", … per task."""
    by_task: dict[str, list[Run]] = {}
    for run in runs:
        by_task.setdefault(run[0], []).append(run)
    return {
        (task, str(number)): task_runs[start : start + size]
        for task, task_runs in by_task.items()
        for number, start in enumerate(range(0, len(task_runs), size))
    }


# ---------------------------------------------------------------------------------------------------------
# Training jobs


# ---------------------------------------------------------------------------------------------------------
# Packs: `tasks.{task}.resources.pack` = K trains K runs of a grid cell (same task, variant, scale, setting;
# consecutive seeds) in one job, each its own `pdelra train` process, checkpoint and metrics.json, sharing
# the job's GPU (workflow/rules/train.smk, rules train_pack and packed_run).

Pack = tuple[str, str, str, str, tuple[int, ...]]  # (task, variant, scale, setting, seeds)


def pack_size(config: Mapping[str, Any], task: str) -> int:
    """K of a task: runs per training job (1: unpacked)."""
    return int(merged(config, "resources", task).get("pack", 1))


def pack_name(seeds: tuple[int, ...]) -> str:
    """A pack's folder name under packs/{task}/{variant}/{scale}/{setting}/: seeds0-1-2."""
    return "seeds" + "-".join(map(str, seeds))


def run_packs(config: Mapping[str, Any]) -> list[Pack]:
    """The packs of the tasks with `pack` > 1: each cell's seeds in order, K to a pack (the last may be
    smaller). Every run of such a task is in exactly one pack."""
    cells: dict[tuple[str, str, str, str], list[int]] = {}
    for task, variant, scale, setting, seed in lra_runs(config):
        if pack_size(config, task) > 1:
            cells.setdefault((task, variant, scale, setting), []).append(seed)
    packs: list[Pack] = []
    for (task, variant, scale, setting), seeds in cells.items():
        size = pack_size(config, task)
        packs += [
            (task, variant, scale, setting, tuple(seeds[i : i + size])) for i in range(0, len(seeds), size)
        ]
    return packs


def lra_training_jobs(config: Mapping[str, Any]) -> list[TrainingJob]:
    """The `train` rule's jobs (workflow/rules/train.smk): the runs of the unpacked tasks."""
    settings = selected_settings(config)
    jobs = []
    for run in lra_runs(config):
        if pack_size(config, run[0]) == 1:
            resources = merged(config, "resources", run[0])
            resolved = run_config(config, settings, *run)
            minutes = estimate.run_minutes(config, resolved, resources)  # cluster.runtime_from
            jobs.append(
                TrainingJob("train", run, resolved, resources["gpu"], minutes, **_asks(config, resources))
            )
    return jobs


def pack_training_jobs(config: Mapping[str, Any]) -> list[TrainingJob]:
    """The `train_pack` rule's jobs: one per pack, asking for its task's GPUs once."""
    settings = selected_settings(config)
    jobs = []
    for task, variant, scale, setting, seeds in run_packs(config):
        run: Run = (task, variant, scale, setting, seeds[0])
        resources = merged(config, "resources", task)
        resolved = run_config(config, settings, *run)
        minutes = estimate.run_minutes(config, resolved, resources)  # one run's (cluster.runtime_from)
        jobs.append(
            TrainingJob(
                "train_pack",
                run,
                resolved,
                resources["gpu"],
                pack_minutes(minutes, len(seeds), resources.get("pack_gain", 1.0)),
                len(seeds),
                **_asks(config, resources, len(seeds)),
            )
        )
    return jobs


# The LRA grid's training rules, whose model the plan can time (calibration, FLOPs); every other one is a
# part's, counted at its requested runtime and of priority class `related`.
LRA_RULES = ("train", "train_pack")
# Every training rule, the LRA's and the built-in parts': its jobs and where its runs are (as its .smk has
# them). A job's data is the folder {processed_dir}/{task} (for the LM, task = lm_{corpus}). A config's own
# part's finished runs are read by the plan from the timing `pdelra part run` records (pdelra.parts).
TRAINING_RULES: dict[str, TrainingRule] = {
    "train": TrainingRule("train", "runs"),  # lra_training_jobs
    "train_pack": TrainingRule("train_pack", "runs"),  # pack_training_jobs
    **parts.builtin_rules(),
}


def training_jobs(config: Mapping[str, Any]) -> list[TrainingJob]:
    """The jobs of every training rule, rule by rule: the LRA runs', then each part's."""
    jobs = lra_training_jobs(config) + pack_training_jobs(config)
    return jobs + [job for part in parts.registered(config) for job in part.jobs(config)]


# ---------------------------------------------------------------------------------------------------------
# The other jobs


def data_tasks(config: Mapping[str, Any]) -> set[str]:
    """Tasks whose raw data the DAG needs: the LRA runs' tasks and those each part reads (the LM's corpus,
    the IMDb raw folder of the official CTA grid, the LRA tasks a generic part's jobs name)."""
    return processed_tasks(config) | part_data_tasks(config)


def processed_tasks(config: Mapping[str, Any]) -> set[str]:
    """The LRA tasks whose processed data (`preprocess`) the DAG reads: the LRA runs' and those a generic
    part's jobs name."""
    return {task for task, *_ in lra_runs(config)} | part_processed_tasks(config)


def part_processed_tasks(config: Mapping[str, Any]) -> set[str]:
    """The tasks of the config's `tasks` that a generic part's jobs name (pdelra.parts.GENERIC): each such job
    waits for that task's processed manifest (workflow/rules/parts.smk), so a fresh data folder is prepared
    before the part's jobs read it."""
    return {
        job.task
        for part in parts.registered(config)
        if part.workflow == parts.GENERIC
        for job in part.jobs(config)
        if job.task in config["tasks"]
    }


def part_data_tasks(config: Mapping[str, Any]) -> set[str]:
    """The LRA tasks whose raw data the parts the config runs read."""
    return {task for part in parts.registered(config) for task in part.raw_data_tasks(config)}


def other_jobs(config: Mapping[str, Any]) -> dict[str, int]:
    """{rule: jobs} of every rule that is not a training rule, as a fresh `snakemake -n` plans them."""
    runs = lra_runs(config)
    jobs: dict[str, int] = {}
    raw = data_tasks(config)
    if config["data"]["source"] == "generated":
        jobs["generate"] = len(raw)
    else:
        sources = [source for source, tasks in tasks_of_source().items() if raw & set(tasks)]
        jobs["fetch"] = len(sources)
        jobs.update({f"extract_{source}": 1 for source in sources})
    jobs["preprocess"] = len(processed_tasks(config))
    jobs["packed_run"] = sum(len(seeds) for *_, seeds in run_packs(config))  # a packed run's files, copied
    for part in parts.registered(config):
        jobs.update(part.other_job_counts(config))
    jobs.update(
        diagnose=len(diagnose_parts(diagnosed_runs(config, runs))),
        diagnostics_table=1,
        data_summary=1,
        aggregate=1,
        report=1,
        version=1,
        all=1,
        smoke=smoke_jobs(config, runs),  # a GPU check per GPU model before any training
    )
    return {rule: count for rule, count in jobs.items() if count}


def smoke_jobs(config: Mapping[str, Any], runs: Sequence[Run]) -> int:
    """cluster.smoke's jobs: one per GPU model of the first LRA run's task (workflow/rules/smoke.smk)."""
    if not (config.get("cluster") or {}).get("smoke"):
        return 0
    task = runs[0][0] if runs else next(iter(config["tasks"]))
    return len(gpu_models.smoke_models(merged(config, "resources", task)))


def workflow_jobs(config: Mapping[str, Any]) -> dict[str, int]:
    """{rule: jobs} of the whole DAG (training rules first): what `snakemake -n` lists from scratch."""
    counts: dict[str, int] = {}
    for job in training_jobs(config):
        counts[job.rule] = counts.get(job.rule, 0) + 1
    return {**counts, **other_jobs(config)}
