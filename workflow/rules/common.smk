"""Config validation, the run grid and the input functions every rule uses (no rules here)."""

import json
import re
from itertools import product
from pathlib import Path

import jsonschema
import yaml
from snakemake.utils import validate

from pdelra import runs as run_layout

SCHEMA = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
PDELRA_ENV = "../../envs/pdelra.yaml"
REPORT_NOTEBOOK = "workflow/notebooks/report.ipynb"


# ----------------------------------------------------------------------------------------------------
# Validation: fail before any job with a message that names the key and the allowed values.
# ----------------------------------------------------------------------------------------------------
def _key_path(error):
    """'grids.main.variants[2]' for an error at that place in the config."""
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def _explain(error):
    where = _key_path(error)
    schema = error.schema
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        unknown = ", ".join(map(repr, unknown))
        return f"unknown key(s) {unknown} in {where!r}; allowed keys: {', '.join(allowed)}"
    if error.validator == "enum":
        return f"{where!r} is {error.instance!r}; allowed values: {', '.join(map(str, schema['enum']))}"
    if error.validator == "type":
        return f"{where!r} must be of type {error.validator_value}, got {error.instance!r}"
    if error.validator == "required":
        return f"{where!r} is missing a required key: {error.message.split(' is a required')[0]}"
    return f"{where!r}: {error.message}"


def check_config(cfg):
    """Raise a ValueError listing every schema violation in plain words."""
    with open(SCHEMA) as f:
        schema = yaml.safe_load(f)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        files = ", ".join(map(str, workflow.configfiles)) or "config"
        lines = "\n".join(f"  - {_explain(e)}" for e in errors)
        raise ValueError(f"Invalid config ({files}):\n{lines}")


check_config(config)
validate(config, schema=str(SCHEMA), set_default=True)  # fills the schema's defaults in place

RESULTS = f"results/{config['experiment']}"
RAW = config["data"]["raw_dir"]
PROCESSED = config["data"]["processed_dir"]
LOGS = f"{RESULTS}/logs"


# ----------------------------------------------------------------------------------------------------
# The runs: union of the selected grids, each distinct (task, variant, scale, setting, seed) once.
# A grid's `settings` name overrides of model/train (pdelra.runs); without them its one setting is `base`.
# ----------------------------------------------------------------------------------------------------
def selected_settings():
    """{setting: {"model": {...}, "train": {...}}} over the selected grids (a name means one thing)."""
    for name in config["run_grids"]:
        if name not in config["grids"]:
            raise ValueError(f"run_grids names {name!r}, but grids.{name} is not defined in the config")
    return run_layout.merge_settings(config["grids"], config["run_grids"])


SETTINGS = selected_settings()


def selected_runs():
    runs = set()
    for name in config["run_grids"]:
        grid = config["grids"][name]
        settings = run_layout.grid_settings(grid, f"grids.{name}")
        runs.update(product(grid["tasks"], grid["variants"], grid["scales"], settings, grid["seeds"]))
    missing = sorted({task for task, *_ in runs} - set(config["tasks"]))
    if missing:
        raise ValueError(f"the selected grids use task(s) {missing} that have no entry under 'tasks'")
    return sorted(runs)


RUNS = selected_runs()


RUN_PATTERN = run_layout.RUN_PATTERN  # {task}/{variant}/{scale}/{setting}/seed{seed}: rule wildcards


def run_dir(task, variant, scale, setting, seed):
    return str(run_layout.run_dir(f"{RESULTS}/runs", task, variant, scale, setting, seed))


def all_metrics():
    return [f"{run_dir(*run)}/metrics.json" for run in RUNS]


# ----------------------------------------------------------------------------------------------------
# One run's resolved config: only its own slice, so editing a task's settings reruns only its jobs.
# ----------------------------------------------------------------------------------------------------
def _merged(section, task):
    return {**config["defaults"][section], **config["tasks"][task].get(section, {})}


def run_config(wildcards):
    """The run config of docs/interfaces.md as compact JSON (a params value: a change reruns the job)."""
    overrides = SETTINGS[wildcards.setting]  # defaults < task < the grid setting
    resolved = {
        "task": wildcards.task,
        "variant": wildcards.variant,
        "scale": wildcards.scale,
        "setting": wildcards.setting,
        "seed": int(wildcards.seed),
        "model": {**_merged("model", wildcards.task), **overrides["model"]},
        "train": {**_merged("train", wildcards.task), **overrides["train"]},
    }
    return json.dumps(resolved, sort_keys=True, separators=(",", ":"))


def task_resource(name):
    """Input function for one resource of a training job: tasks.{task}.resources over defaults.resources."""
    return lambda wildcards: _merged("resources", wildcards.task)[name]


def train_runtime(wildcards, attempt):
    """Minutes: the configured runtime times the attempt, so a retry after a time-out gets longer."""
    return _merged("resources", wildcards.task)["runtime"] * attempt


def train_threads(wildcards):
    return _merged("resources", wildcards.task)["cpus_per_task"]


# ----------------------------------------------------------------------------------------------------
# Data: the archive each task comes from (real source) and its generation settings (generated source).
# ----------------------------------------------------------------------------------------------------
# Archive names as `pdelra extract` knows them; IMDb and CIFAR-10 are not part of the LRA release.
TASKS_OF_SOURCE = {
    "lra_release": ("listops", "retrieval", "pathfinder"),
    "imdb": ("text",),
    "cifar10": ("image",),
}


def download_path(source):
    return f"{RAW}/downloads/{source}.tar.gz"


def download_setting(name):
    """Input function for data.downloads.{source}.{name}; a missing source is named, not a KeyError."""

    def lookup(wildcards):
        downloads = config["data"].get("downloads", {})
        if wildcards.source not in downloads:
            raise ValueError(f"data.downloads.{wildcards.source} is needed with data.source: real")
        return downloads[wildcards.source].get(name)

    return lookup


def md5_option(md5):
    """`--md5 X` when a checksum is published; nothing otherwise (the first fetch records it)."""
    return f"--md5 {md5}" if md5 else ""


def generate_params(wildcards):
    """`pdelra generate` settings of one task as JSON; its seed defaults to data.seed."""
    settings = {"seed": config["data"]["seed"], **config["data"]["generate"].get(wildcards.task, {})}
    return json.dumps(settings, sort_keys=True, separators=(",", ":"))


def parent_dir(path):
    """The folder of a declared input/output: for params, so no path prefix is hard-coded twice."""
    return str(Path(path).parent)


def manifest(task):
    return f"{PROCESSED}/{task}/manifest.json"


wildcard_constraints:
    task="|".join(config["tasks"]),
    variant=r"[a-z_]+",
    scale=r"h1|h2|h4|multi",
    setting="|".join(map(re.escape, SETTINGS)),
    seed=r"\d+",
    source=r"lra_release|imdb|cifar10",
