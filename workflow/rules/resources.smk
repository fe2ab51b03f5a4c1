"""What each job asks the cluster for: runtimes capped at cluster.max_runtime, the site options of
every GPU rule, the priorities, and the CPU jobs' partition (profiles/slurm/README.md)."""

import functools

from pdelra.planning import estimate, gpu_models, reattach
from pdelra.training import bad_nodes

# ----------------------------------------------------------------------------------------------------
# Slurm requests. Every runtime is the configured one (an LRA run's: or its estimate, cluster.runtime_from)
# times the attempt, capped at cluster.max_runtime
# (pdelra.planning.slurm_site.attempt_runtime says why the multiplier stays under the cap). Site options (partition,
# constraint, GPU model, qos, extra sbatch flags) come from the same resources sections; CPU-only jobs go
# to cluster.cpu_partition when one is set.
# ----------------------------------------------------------------------------------------------------
def capped_runtime(minutes, attempt):
    return slurm_site.attempt_runtime(minutes, attempt, MAX_RUNTIME)


@declared
def train_runtime(wildcards, attempt):
    """Minutes of one attempt of a training job: its run's minutes times the attempt, capped."""
    return capped_runtime(run_minutes(wildcards), attempt)


def run_minutes(wildcards):
    """First-attempt minutes of one LRA run of the job's grid cell: its task's runtime, or with
    cluster.runtime_from: estimate its FLOPs estimate x cluster.runtime_margin (pdelra.planning.estimate,
    the figure `pdelra plan` counts too)."""
    resources = _merged("resources", wildcards.task)
    if config["cluster"]["runtime_from"] == "config":
        return resources["runtime"]
    w = wildcards  # the seed does not change the work: a pack's cell is timed at seed 0
    run = experiment.run_config(config, SETTINGS, w.task, w.variant, w.scale, w.setting, 0)
    return estimate.run_minutes(config, run, resources, task_data(w.task))


@functools.cache
def task_data(task):
    """A task's counts and max_length, read once (a manifest written later changes no request)."""
    return estimate.task_data(config, task)


def runtime_of(resources_of):
    """A rule's runtime function from `resources_of(wildcards)` (a resources section with `runtime`)."""
    return declared(lambda wildcards, attempt: capped_runtime(resources_of(wildcards)["runtime"], attempt))


def site_options(sections, checkpoints=None):
    """The site options (pdelra.planning.slurm_site.SITE_KEYS) of the GPU jobs that read `sections`: {task:
    resources section}, or {None: section} for a rule without tasks. Every GPU rule takes them through here,
    over those of defaults.resources (slurm_site.shared_site_options), so that the site's partition, GPU model
    or qos set once there reach the related systems' jobs too; a section's own key wins. A key set for no task
    is left out (the profile's default-resources apply); one value for all is a constant; otherwise a function
    of the task (None where a task leaves it unset: Snakemake then drops the resource, and the plugin adds no
    flag). `checkpoints`: the job's checkpoint folder as a pattern of its wildcards, or a function of them
    giving its folders: a run there still trained by a live job of a dead session makes the new job wait for
    it (pdelra.planning.reattach). None for a job that trains no run (the smoke test)."""
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
    configured = options.get("slurm_extra")

    def folders(wildcards):
        if checkpoints is None:
            return []
        if callable(checkpoints):
            return checkpoints(wildcards)
        return [checkpoints.format(**dict(wildcards.items()))]

    def slurm_extra(wildcards, attempt):
        flags = configured(wildcards) if callable(configured) else configured
        if not workflow.is_main_process:  # a job's own Snakemake submits nothing: no bad nodes, no squeue
            return flags
        return reattach.slurm_extra(bad_nodes.slurm_extra(BAD_NODES, flags), folders(wildcards))

    options["slurm_extra"] = declared(slurm_extra)
    return options


def model_site_options(section, models):
    """The site options of `section` for a job of one GPU model, its wildcard `gpu` one of `models`
    (pdelra.planning.gpu_models.smoke_models): the constraint narrowed to that model where the models are the
    constraint's alternatives."""
    options = site_options({None: section})
    if len(models) > 1 and not section.get("gpu_model"):
        options["constraint"] = declared(lambda wildcards: gpu_models.smoke_constraint(wildcards.gpu, section))
    return options


# Nodes where a training job found no CUDA device (pdelra.training.bad_nodes): the job adds its node to this
# file (the path reaches it in $PDELRA_BAD_NODES) and every GPU job submitted after, a retry included, asks
# Slurm to --exclude those nodes. Snakemake evaluates the resources again for each attempt.
BAD_NODES = f"{RESULTS}/cluster/bad_nodes.txt"
os.environ[bad_nodes.BAD_NODES_ENV] = os.path.abspath(BAD_NODES)


def _task_of(wildcards):
    return wildcards.get("task") or wildcards.get("cta_task")


def task_site_options(checkpoints):
    return site_options({task: _merged("resources", task) for task in config["tasks"]}, checkpoints)


# Priorities (cluster.priority, pdelra.planning.priorities): Snakemake submits the ready jobs of the highest
# `priority:` first, so under the profile's `jobs:` limit the paper's runs are not left pending behind the
# related systems'; within a class, the longest runs first.
PRIORITY = priorities.rule_priorities(config["cluster"]["priority"])
# Data preparation above every class: every training job waits on it and it takes seconds to minutes, whereas
# at Snakemake's default 0 a task's preprocessing waited until no training job of any other task was ready
# (the demo prepared its last task 97 s into a 150 s run).
DATA_PRIORITY = max(PRIORITY.values()) + 1
CELL_PRIORITY = priorities.cell_priorities(config)


def run_priority():
    """`priority:` of an LRA training job: its grid cell's (class, then estimated length); a constant where
    every cell has the same."""
    values = set(CELL_PRIORITY.values())
    if len(values) <= 1:
        return values.pop() if values else PRIORITY["paper"]
    return cell_priority


@declared
def cell_priority(wildcards):
    return CELL_PRIORITY[(wildcards.task, wildcards.variant, wildcards.scale, wildcards.setting)]


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
