"""Config validation, the run grid and the input functions every rule uses (no rules here)."""

import inspect
import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

from snakemake.utils import validate

from pdelra.planning import experiment
from pdelra.cta_official import grid as cta_grid
from pdelra import runs as run_layout
from pdelra.planning import job_path, priorities, slurm_site
from pdelra.results.build import AGGREGATE_TABLES
from pdelra.planning.config_check import config_problems, load_schema, yaml_problem
from pdelra.training.lock import LOCK_ENV
from pdelra.steps import parts as aggregate_parts

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
# pdelra.planning.config_check.config_problems, makes every check (schema, grids, settings, models, data settings),
# the same that `pdelra config check` makes. Errors are printed without a traceback (it would only show
# lines of this file) and stop Snakemake with status 1.
# ----------------------------------------------------------------------------------------------------
def config_error(problems):
    """Print every problem of the config (a line each) and stop before the DAG is built."""
    files = ", ".join(map(str, workflow.configfiles)) or "config"
    lines = "\n".join(f"  - {problem}" for problem in problems)
    print(f"Invalid config ({files}):\n{lines}", file=sys.stderr)
    sys.exit(1)


if _problems := config_problems(config, load_schema(SCHEMA)):
    config_error(_problems)
validate(config, schema=str(SCHEMA), set_default=True)  # fills the schema's defaults in place

RESULTS = f"results/{config['experiment']}"
# No job asks Slurm for more minutes than this, whatever its attempt (profiles/slurm/README.md, time limits).
MAX_RUNTIME = config["cluster"]["max_runtime"]
# cluster.lock reaches every job through its environment (a local job inherits it; a Slurm job's own
# snakemake parses this file again with the same config): pdelra.training.lock reads it.
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
# Slurm requests. Every runtime is the configured one times the attempt, capped at cluster.max_runtime
# (pdelra.planning.slurm_site.attempt_runtime says why the multiplier stays under the cap). Site options (partition,
# constraint, GPU model, qos, extra sbatch flags) come from the same resources sections; CPU-only jobs go
# to cluster.cpu_partition when one is set.
# ----------------------------------------------------------------------------------------------------
def capped_runtime(minutes, attempt):
    return slurm_site.attempt_runtime(minutes, attempt, MAX_RUNTIME)


@declared
def train_runtime(wildcards, attempt):
    """Minutes of one attempt of a training job: its task's runtime times the attempt, capped."""
    return capped_runtime(_merged("resources", wildcards.task)["runtime"], attempt)


def runtime_of(resources_of):
    """A rule's runtime function from `resources_of(wildcards)` (a resources section with `runtime`)."""
    return declared(lambda wildcards, attempt: capped_runtime(resources_of(wildcards)["runtime"], attempt))


def site_options(sections):
    """The site options (pdelra.planning.slurm_site.SITE_KEYS) of the GPU jobs that read `sections`: {task:
    resources section}, or {None: section} for a rule without tasks. Every GPU rule takes them through here,
    over those of defaults.resources (slurm_site.shared_site_options), so that the site's partition, GPU model
    or qos set once there reach the related systems' jobs too; a section's own key wins. A key set for no task
    is left out (the profile's default-resources apply); one value for all is a constant; otherwise a function
    of the task (None where a task leaves it unset: Snakemake then drops the resource, and the plugin adds no
    flag)."""
    shared = slurm_site.shared_site_options(config)
    options = {}
    for key in slurm_site.SITE_KEYS:
        values = {task: section.get(key, shared.get(key)) for task, section in sections.items()}
        if all(value is None for value in values.values()):
            continue
        if len(set(values.values())) == 1:
            options[key] = next(iter(values.values()))
        else:
            options[key] = declared(lambda wildcards, _values=values: _values[_task_of(wildcards)])
    return options


def _task_of(wildcards):
    return wildcards.get("task") or wildcards.get("cta_task")


def task_site_options():
    return site_options({task: _merged("resources", task) for task in config["tasks"]})


# Priorities (cluster.priority, pdelra.planning.priorities): Snakemake submits the ready jobs of the highest
# `priority:` first, so under the profile's `jobs:` limit the paper's runs are not left pending behind the
# related systems'.
PRIORITY = priorities.rule_priorities(config["cluster"]["priority"])
CELL_CLASS = priorities.cell_classes(config)


def run_priority():
    """`priority:` of an LRA training job: its grid cell's class (paper or related); a constant where every
    cell has the same class."""
    values = {PRIORITY[name] for name in CELL_CLASS.values()}
    if len(values) <= 1:
        return values.pop() if values else PRIORITY["paper"]
    return cell_priority


@declared
def cell_priority(wildcards):
    return PRIORITY[CELL_CLASS[(wildcards.task, wildcards.variant, wildcards.scale, wildcards.setting)]]


def cpu_site_options():
    """The partition of CPU-only jobs (diagnose; data preparation with cluster.prepare_as_jobs)."""
    partition = config["cluster"]["cpu_partition"]
    return {"slurm_partition": partition} if partition else {}


# Extraction and preprocessing: local rules on the submit host, or CPU jobs with cluster.prepare_as_jobs
# (login nodes often cap CPU time and memory; a download stays local, since compute nodes often lack internet).
# The data writers stream to disk (pdelra.data.store.ArrayWriter): 8 GB and 4 h are a generous estimate for
# the 7.7 GB LRA archive, not a measurement; --set-resources RULE:mem_mb=... changes them.
PREPARE_AS_JOBS = config["cluster"]["prepare_as_jobs"]
PREPARE_MEM_MB, PREPARE_MINUTES = 8000, 240


def prepare_resources():
    if not PREPARE_AS_JOBS:
        return {}  # runs locally: nothing to ask Slurm for, and nothing to take from a local pool
    runtime = declared(lambda wildcards, attempt: capped_runtime(PREPARE_MINUTES, attempt))
    return {"gpu": 0, "cpus_per_task": 1, "mem_mb": PREPARE_MEM_MB, "runtime": runtime, **cpu_site_options()}


# Said once, by the Snakemake that plans the jobs (not again in each job's own Snakemake).
if workflow.is_main_process and (_runtime_warnings := slurm_site.runtime_warnings(config)):
    print("Warning (runtime):\n" + "\n".join(f"  - {line}" for line in _runtime_warnings), file=sys.stderr)




# ----------------------------------------------------------------------------------------------------
# Data: the archive each task comes from (real source) and its generation settings (generated source).
# ----------------------------------------------------------------------------------------------------
TASKS_OF_SOURCE = experiment.TASKS_OF_SOURCE  # the archive of each task (pdelra extract)


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


def aggregate_part_tables(name):
    """The tables the part `name` of pdelra.steps.parts (diagnostics, lm, cta_official) writes, its rule's
    outputs and the aggregate rule's inputs; none when the config does not run the part."""
    part = aggregate_parts.PART[name]
    if not part.runs_in(config):
        return []
    return [f"{RESULTS}/{aggregate_parts.TABLES_DIR}/{table}.csv" for table in part.tables]


def aggregate_extra_args(inputs):
    """`--lm-runs F --lm-dynamics F --diagnostics F --cta-official-runs F`: of the parts' tables (every one an
    input of the aggregate rule, so the claims and summaries rerun when they change) those `pdelra aggregate`
    reads (pdelra.steps.parts, which the partial report follows too)."""
    tables = [path for part in aggregate_parts.PARTS for path in getattr(inputs, part.name)]
    read = aggregate_parts.aggregate_inputs(tables)
    return " ".join(f"{aggregate_parts.option(name)} {path}" for name, path in read.items())


def parent_dir(path):
    """The folder of a declared input/output: for params, so no path prefix is hard-coded twice. (os.path,
    not pathlib: it runs for every job of the DAG.)"""
    return os.path.dirname(os.path.normpath(path)) or "."


def manifest(task):
    return f"{PROCESSED}/{task}/manifest.json"


# ----------------------------------------------------------------------------------------------------
# The cluster: with the slurm executor, before any local work (downloads, preprocessing), the profile's
# placeholders must be replaced, sbatch/sacct must reach the cluster, and every partition the jobs use must
# exist and allow cluster.max_runtime (pdelra.planning.slurm_site.site_problems). One message, then stop; a partition
# whose preemption cancels instead of requeueing is a warning.
# ----------------------------------------------------------------------------------------------------
def check_cluster():
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return
    given, partitions, seen, placed = [], {}, set(), []
    for job in workflow.dag.needrun_jobs():  # one job per (rule, task), as Slurm would get it
        key = (job.rule.name, job.wildcards.get("task") or job.wildcards.get("cta_task"))
        if job.is_local or key in seen:
            continue
        seen.add(key)
        partition, account = (job.resources.get(k) for k in ("slurm_partition", "slurm_account"))
        given += [str(partition), str(account)]
        partitions.setdefault(partition, []).append((job.rule.name, job.resources.get("runtime") or 0))
        placed.append((job.rule.name, job.resources.get("gpu") or 0, partition))
    status = getattr(workflow.executor_settings, "status_command", None) or "sacct"
    found = slurm_site.site_problems(partitions, given, status, MAX_RUNTIME)
    if cpu_warning := slurm_site.cpu_partition_warning(placed, config["cluster"]["cpu_partition"]):
        found.warnings.append(cpu_warning)
    for warning in found.warnings:
        print(f"Warning (Slurm): {warning}", file=sys.stderr)
    if found.problems:
        lines = "\n".join(f"  - {problem}" for problem in found.problems)
        print(f"Cannot use Slurm (nothing was started):\n{lines}", file=sys.stderr)
        sys.exit(1)


onstart:
    check_cluster()
    checkpoint_lock_preflight()
    clear_finished_runs()


onsuccess:
    clear_finished_runs()


onerror:
    clear_finished_runs()


wildcard_constraints:
    task="|".join(config["tasks"]),
    variant=r"[a-z_]+",
    scale=r"h1|h2|h4|multi",
    setting="|".join(map(re.escape, SETTINGS)),
    seed=r"\d+",
    part=r"\d+",
    source=r"lra_release|imdb|cifar10",



# ----------------------------------------------------------------------------------------------------
# Packs (config/README.md, `resources.pack`). Snakemake's own job groups do not fit: the Slurm executor
# runs a group's jobs one after another inside its allocation (profiles/slurm/README.md, "Several runs per
# GPU"). A pack is one job of the train_pack rule instead - `pdelra train-pack`, K `pdelra train` processes
# side by side, each with its own checkpoint folder, log and metrics.json, asking for the task's GPUs once and
# K times its cores and memory. Its runs' files land in the pack's folder; rule packed_run copies them to the runs' own folders,
# where every later rule finds them as it finds an unpacked run's.
# ----------------------------------------------------------------------------------------------------
PACKS = {
    (task, variant, scale, setting, experiment.pack_name(seeds)): seeds
    for task, variant, scale, setting, seeds in experiment.run_packs(config)
}
PACK_OF_RUN = {(*cell[:4], seed): cell[4] for cell, seeds in PACKS.items() for seed in seeds}
PACKED_TASKS = sorted({cell[0] for cell in PACKS})
PACK_PATTERN = "{task}/{variant}/{scale}/{setting}/{pack}"
CELL_PATTERN = "{task}/{variant}/{scale}/{setting}"  # a grid cell: the folder of its runs' seed{n}


def task_choice(tasks):
    """A wildcard constraint matching exactly these tasks (none: a pattern that never matches)."""
    return "|".join(map(re.escape, tasks)) or "(?!)"


def pack_seeds(wildcards):
    return PACKS[(wildcards.task, wildcards.variant, wildcards.scale, wildcards.setting, wildcards.pack)]


def pack_dir(wildcards):
    """packed_run's input: the folder of the pack its run was trained in."""
    cell = (wildcards.task, wildcards.variant, wildcards.scale, wildcards.setting)
    return f"{RESULTS}/packs/{'/'.join(cell)}/{PACK_OF_RUN[(*cell, int(wildcards.seed))]}"


def pack_resource(name):
    """cpus_per_task or mem_mb of a pack job: K times one run's (its GPUs are one run's)."""
    return declared(lambda wildcards: _merged("resources", wildcards.task)[name] * len(pack_seeds(wildcards)))


@declared
def pack_runtime(wildcards, attempt):
    """Minutes of one attempt of a pack: K x one run's runtime / pack_gain (the K runs share the card:
    without a measured gain they take K times as long), times the attempt, capped at cluster.max_runtime
    (runtime_warnings says so at parse time when a pack's first attempt is already cut)."""
    resources = _merged("resources", wildcards.task)
    k = len(pack_seeds(wildcards))
    return slurm_site.pack_runtime(resources["runtime"], k, resources["pack_gain"], attempt, MAX_RUNTIME)



@declared
def pack_run_config(wildcards):
    """The run config of a pack's members (its first seed's; `pdelra train-pack` sets each member's seed). A
    params value: editing it reruns the pack, whose members resume or restore."""
    seed = pack_seeds(wildcards)[0]
    return run_config(SimpleNamespace(**dict(wildcards.items()), seed=seed))


def pack_seed_list(wildcards):
    return " ".join(map(str, pack_seeds(wildcards)))


# ----------------------------------------------------------------------------------------------------
# Finished runs and their locks (pdelra.training.finished, pdelra.training.lock). A trainer keeps a finished
# run's final files in CKPT_DIR/finished/ until Snakemake has stored its outputs, so a job (or a pack member)
# killed after its run finished is restored by the retry, not retrained. Each start, success and error of
# the workflow clears the kept copies of the runs whose jobs are complete. At the start it also says which
# lock the training jobs take in the checkpoint folders (flock, or lock files where flock is missing).
# ----------------------------------------------------------------------------------------------------
def clear_finished_runs():
    """Remove CKPT_DIR/finished/ of every run whose metrics.json is the output of a complete job: one that
    was not to be run, or that finished in this session (its outputs are stored)."""
    from pdelra.training import finished

    dag, cleared = workflow.dag, 0
    for job in dag.jobs:
        if not dag.noneedrun_finished(job):
            continue
        for path in job.output:
            out = Path(path)
            if out.name == "metrics.json" and "runs" in out.parts:
                cleared += finished.clear(finished.checkpoint_dir_of(out.parent))
    if cleared:
        print(f"Removed the kept final state of {cleared} stored run(s) from their checkpoint folders")


def checkpoint_lock_preflight():
    """Say which lock the training jobs will take in the checkpoint folders (probed where they are)."""
    from pdelra.training import finished
    from pdelra.training.lock import LockError, lock_mode

    rules = {job.rule for job in workflow.dag.needrun_jobs()}
    patterns = [rule.params.get("checkpoints") for rule in rules]
    roots = {finished.checkpoint_root(Path(p)) for p in patterns if isinstance(p, str) and "checkpoints" in p}
    for root in sorted(roots):
        try:
            mode = lock_mode(root)
        except (OSError, LockError) as exc:  # the training jobs could not lock or write there either
            print(f"Cannot use {root} for checkpoints (nothing was started): {exc}", file=sys.stderr)
            sys.exit(1)
        print(f"Checkpoint lock in {root}: {mode}", file=sys.stderr)


# ----------------------------------------------------------------------------------------------------
# Input functions of Continuous-Time Attention's own experiments (workflow/rules/cta_official.smk, which
# holds the section's globals: CTA, CTA_RESULTS, …; they are read when the functions are called)
# ----------------------------------------------------------------------------------------------------
def cta_lm_tokenizer():
    """The tokenizer.json the LM is tokenised with: TinyLlama's download, or the generated folder."""
    if config["data"]["source"] == "real":
        return f"{RAW}/downloads/{cta_grid.DOWNLOAD_FILES[cta_grid.LM_TOKENIZER]}"
    return f"{RAW}/{cta_grid.BPE}"


def cta_tokenizer(task):
    """What holds the WordPiece vocab.txt a task is tokenised with: the download, or the generated folder
    (a directory output: its files cannot be inputs themselves); none for imdb_char."""
    if task not in cta_grid.WORDPIECE_TASKS:
        return []
    if config["data"]["source"] == "real":
        return [f"{RAW}/downloads/{cta_grid.DOWNLOAD_FILES[cta_grid.VOCAB]}"]
    return [f"{RAW}/{cta_grid.WORDPIECE}"]


@declared
def cta_tokenizer_option(wildcards, input):
    if not input.tokenizer:
        return ""
    generated = config["data"]["source"] == "generated"
    tokenizer = Path(input.tokenizer[0])
    return f"--tokenizer {tokenizer / 'vocab.txt' if generated else tokenizer}"


def cta_setting(part, name):
    """cta_official.{defaults < tasks.{task}}.{part}.{name} of a job (a number when every task agrees)."""
    values = {cta_grid.merged(CTA, part, task)[name] for task in CTA["tasks"]}
    if len(values) == 1:
        return values.pop()
    return declared(lambda wildcards: cta_grid.merged(CTA, part, wildcards.cta_task)[name])
