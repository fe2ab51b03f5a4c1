"""Packs: several runs of one grid cell trained side by side as one job (config/README.md,
`resources.pack`); the input functions of rules train_pack and packed_run (train.smk)."""

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
    k, gain = len(pack_seeds(wildcards)), _merged("resources", wildcards.task)["pack_gain"]
    return slurm_site.pack_runtime(run_minutes(wildcards), k, gain, attempt, MAX_RUNTIME)



@declared
def pack_run_config(wildcards):
    """The run config of a pack's members (its first seed's; `pdelra train-pack` sets each member's seed). A
    params value: editing it reruns the pack, whose members resume or restore."""
    seed = pack_seeds(wildcards)[0]
    return run_config(SimpleNamespace(**dict(wildcards.items()), seed=seed))


def pack_checkpoints(wildcards):
    """The checkpoint folders of a pack's members (pdelra train-pack: CKPT_ROOT/seed{n})."""
    cell = CELL_PATTERN.format(**dict(wildcards.items()))
    return [f"{RESULTS}/checkpoints/{cell}/seed{seed}" for seed in pack_seeds(wildcards)]


def pack_seed_list(wildcards):
    return " ".join(map(str, pack_seeds(wildcards)))
