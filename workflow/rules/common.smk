"""Config validation, the run grid and the input functions every rule uses (no rules here)."""

import inspect
import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

from pdelra import builtin_parts  # first: declares the built-in parts to the registry (pdelra.parts)
from pdelra.planning import experiment
from pdelra import runs as run_layout, tasks
from pdelra.planning import job_path, priorities, slurm_site
from pdelra.results.build import AGGREGATE_TABLES
from pdelra.planning.config_check import config_problems, load_schema, with_defaults, yaml_problem
from pdelra.locking import LOCK_ENV
from pdelra import parts as registry

try:
    from snakemake.common import overwrite_function_params
except ImportError:  # a Snakemake without this hook: the same workflow, only slower to plan

    def overwrite_function_params(func, params):
        pass

# ----------------------------------------------------------------------------------------------------
# The config file. A --configfile on the command line replaces the paper config instead of being merged
# into it: the demo and the test configs are complete experiments, not patches (a merge would leak the
# paper's grids and sizes).
# ----------------------------------------------------------------------------------------------------
if not workflow.overwrite_configfiles:
    # Snakemake's own message for a YAML syntax error names neither the file nor the line: find them first.
    # (A --configfile is read by Snakemake before the Snakefile runs; docs/troubleshooting.md
    # shows how to find the line then, and `pdelra config check FILE` names it.)
    if problem := yaml_problem("config/config.yaml"):
        print(f"Invalid config: {problem}", file=sys.stderr)
        sys.exit(1)

    configfile: "config/config.yaml"


SCHEMA = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
PDELRA_ENV = "../../envs/pdelra.yaml"
REPORT_NOTEBOOK = "workflow/notebooks/report.ipynb"


# ----------------------------------------------------------------------------------------------------
# The jobs' `pdelra` is the one beside the Python that runs this workflow, whatever the caller's PATH
# (pdelra.planning.job_path says how and why). With --use-conda each rule's own environment provides it.
# ----------------------------------------------------------------------------------------------------
def _uses_conda():
    settings = getattr(workflow, "deployment_settings", None)
    methods = getattr(settings, "deployment_method", None) or ()
    return any(getattr(method, "name", str(method)).upper() == "CONDA" for method in methods)


if _no_pdelra := job_path.put_first_on_path(conda=_uses_conda()):
    print(f"Cannot run the jobs: {_no_pdelra}", file=sys.stderr)
    sys.exit(1)


# ----------------------------------------------------------------------------------------------------
# Validation: fail before any job with a message that names the key and the allowed values. One function,
# pdelra.planning.config_check.config_problems, makes every check (task_modules, schema, grids, settings,
# models, data), as `pdelra config check` does; errors print without a traceback and stop Snakemake (status 1).
# ----------------------------------------------------------------------------------------------------
def config_error(problems):
    """Print every problem of the config (a line each) and stop before the DAG is built."""
    files = ", ".join(map(str, workflow.configfiles)) or "config"
    lines = "\n".join(f"  - {problem}" for problem in problems)
    print(f"Invalid config ({files}):\n{lines}", file=sys.stderr)
    sys.exit(1)


os.environ.update(tasks.job_environment(config.get("task_modules") or (), os.getcwd()))  # jobs: its tasks too
if workflow.is_main_process:
    _schema = load_schema(SCHEMA)
    if _problems := config_problems(config, _schema):
        config_error(_problems)
else:  # a job's own Snakemake (Slurm job step): the planning one checked this config; fill defaults only,
    # without the model probes and torch (pdelra.planning.config_check.load_schema; docs/measurements.md)
    tasks.load_modules(config.get("task_modules") or ())
    _schema = load_schema(SCHEMA, variant_names=False)
config.update(with_defaults(config, _schema))  # as validate(set_default=True), a part's section too

RESULTS = f"results/{config['experiment']}"
# No job asks Slurm for more minutes than this, whatever its attempt (profiles/slurm/README.md, time limits).
MAX_RUNTIME = config["cluster"]["max_runtime"]
# cluster.lock reaches every job through its environment (a local job inherits it; a Slurm job's own
# snakemake parses this file again with the same config): pdelra.locking reads it.
os.environ[LOCK_ENV] = config["cluster"]["lock"]
RAW = config["data"]["raw_dir"]
PROCESSED = config["data"]["processed_dir"]
LOGS = f"{RESULTS}/logs"


# ----------------------------------------------------------------------------------------------------
# The runs: union of the selected grids, each distinct (task, variant, scale, setting, seed) once.
# A grid's `settings` name overrides of model/train (pdelra.runs); without them its one setting is `base`.
# The expansion is pdelra.planning.experiment's, the same that `pdelra plan` counts.
# ----------------------------------------------------------------------------------------------------
try:
    SETTINGS = experiment.selected_settings(config)  # {setting: {"model": {...}, "train": {...}}}
    RUNS = experiment.lra_runs(config)
    # {own variant: hash of its operators' source}: in each of its runs' run config (a params value), so an
    # edit of the operator's code reruns exactly that variant's runs and what depends on them.
    OPERATOR_CODES = experiment.operator_codes(config)
except ValueError as err:
    config_error([str(err)])


RUN_PATTERN = run_layout.RUN_PATTERN  # {task}/{variant}/{scale}/{setting}/seed{seed}: rule wildcards


def run_dir(task, variant, scale, setting, seed):
    """A run's folder, as pdelra.runs.run_dir gives it (its RUN_PATTERN; a string, not a Path: this runs for
    every file of every diagnose and aggregate job)."""
    fields = {"task": task, "variant": variant, "scale": scale, "setting": setting, "seed": int(seed)}
    return f"{RESULTS}/runs/{RUN_PATTERN.format(**fields)}"


def all_metrics(wildcards):
    """Input function: every LRA run's metrics.json. A function, not a list. For each file of a named
    list input, Snakemake hashes the whole list again while it looks for the job that makes the file, which
    is quadratic (50 s of a 10,000-run dry run); a function's files are looked up by the function."""
    return [f"{run_dir(*run)}/metrics.json" for run in RUNS]


# The diagnose jobs: each task's runs of the pipeline's own encoder in order (experiment.diagnosed_runs), up
# to experiment.DIAGNOSE_RUNS_PER_JOB to a part (diagnose.smk).
DIAGNOSE_PARTS = experiment.diagnose_parts(experiment.diagnosed_runs(config, RUNS))


def diagnosed_runs(wildcards):
    return DIAGNOSE_PARTS[(wildcards.task, wildcards.part)]


def diagnosed_files(name):
    """Input function: one file of each run in a diagnose job's part (metrics.json, model.safetensors)."""
    return lambda wildcards: [f"{run_dir(*run)}/{name}" for run in diagnosed_runs(wildcards)]


def diagnose_runtime(wildcards, attempt):
    """Minutes: ten, plus one per run of the part (a CPU diagnosis of a paper-sized model takes seconds to
    a minute), times the attempt, at most cluster.max_runtime."""
    return capped_runtime(10 + len(diagnosed_runs(wildcards)), attempt)


# ----------------------------------------------------------------------------------------------------
# The functions of the training rule run once per job. Snakemake inspects such a function's signature
# three times per call (to learn which of wildcards/input/output/attempt it takes): a sixth of the time
# `snakemake -n` spends on a 10,000-job grid. `declared` hands it the signature once, through the hook its
# own ioutils use; the result is the same.
# ----------------------------------------------------------------------------------------------------
def declared(func):
    overwrite_function_params(func, inspect.signature(func).parameters)
    return func


@declared
def input_dir(wildcards, input):
    """The folder of the first input (a params value derived from the input: not recorded as provenance)."""
    return parent_dir(input[0])


@declared
def output_dir(wildcards, output):
    return parent_dir(output[0])


# ----------------------------------------------------------------------------------------------------
# One run's resolved config: only its own slice, so editing a task's settings reruns only its jobs.
# ----------------------------------------------------------------------------------------------------
def _merged(section, task):
    return experiment.merged(config, section, task)


@declared
def run_config(wildcards):
    """The run config of docs/interfaces.md as compact JSON (a params value: a change reruns the job)."""
    w = wildcards  # defaults < task < the grid setting
    resolved = experiment.run_config(
        config, SETTINGS, w.task, w.variant, w.scale, w.setting, w.seed, OPERATOR_CODES
    )
    return json.dumps(resolved, sort_keys=True, separators=(",", ":"))


def task_resource(name):
    """One resource of a training job: tasks.{task}.resources over defaults.resources. A number when every
    task has the same value (Snakemake calls a function once per job, seconds over a 10,000-job grid),
    otherwise a function of the task."""
    values = {_merged("resources", task)[name] for task in config["tasks"]}
    if len(values) == 1:
        return values.pop()
    return declared(lambda wildcards: _merged("resources", wildcards.task)[name])


@declared
def job_device(wildcards, resources):
    """`--device` of a training job: cuda when it reserved a GPU (resources.gpu >= 1), else cpu. A CPU job
    never takes the card from a GPU job, and a GPU job without CUDA stops before training (pdelra train
    --help; PDELRA_ALLOW_CPU=1 allows the CPU on purpose)."""
    return "cuda" if resources.gpu else "cpu"


# ----------------------------------------------------------------------------------------------------
# Data: the archive each task comes from (real source) and its generation settings (generated source).
# ----------------------------------------------------------------------------------------------------
TASKS_OF_SOURCE = tasks.tasks_of_source()  # the archive of each task (pdelra extract; pdelra.tasks)


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


def data_spec():
    """`pdelra data-summary --spec`: per task its manifest, where the data came from and the model size."""
    downloads = config["data"].get("downloads", {})
    source_of = {task: source for source, tasks in TASKS_OF_SOURCE.items() for task in tasks}
    spec = {}
    for task in sorted({run[0] for run in RUNS}):
        if config["data"]["source"] == "generated":
            settings = {"seed": config["data"]["seed"], **config["data"]["generate"].get(task, {})}
            origin = f"pdelra generate {task} {json.dumps(settings, sort_keys=True)}"
        else:
            archive = downloads.get(source_of[task], {})
            origin = f"{archive.get('url')} (md5 {archive.get('md5') or 'recorded by the first fetch'})"
        model = {**_merged("model", task), "batch_size": _merged("train", task)["batch_size"]}
        spec[task] = {
            "manifest": manifest(task),
            "source": "generated" if config["data"]["source"] == "generated" else "real",
            "origin": origin,
            "model": {k: model.get(k) for k in ("d_model", "n_layers", "n_heads", "batch_size")},
        }
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def write_arg_file(path, items):
    """One argument a line, for `pdelra ... @path`: a rule's list of every run's file would make its
    command line longer than Linux allows for one argument (128 KiB, ~1,800 paths)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(f"{item}\n" for item in items))


def parent_dir(path):
    """The folder of a declared input/output: for params, so no path prefix is hard-coded twice. (os.path,
    not pathlib: it runs for every job of the DAG.)"""
    return os.path.dirname(os.path.normpath(path)) or "."


def manifest(task):
    return f"{PROCESSED}/{task}/manifest.json"


wildcard_constraints:
    task="|".join(config["tasks"]),
    variant=r"[a-z][a-z0-9_]*",  # the schema's variant names: digits allowed, as in task names
    scale=r"h1|h2|h4|multi",
    setting="|".join(map(re.escape, SETTINGS)),
    seed=r"\d+",
    part=r"\d+",
    source="|".join(map(re.escape, TASKS_OF_SOURCE)),  # the task registry's archives (pdelra.tasks)
