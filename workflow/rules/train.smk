"""One training job per distinct (task, variant, scale, setting, seed), or per pack of K such runs of a grid
cell for a task with `resources.pack: K`. Checkpoints live outside the declared outputs (Snakemake deletes
those before a job starts), so a retried or rerun job resumes where it stopped."""

import shlex

# ----------------------------------------------------------------------------------------------------
# Packs (config/README.md, `resources.pack`). Snakemake's own job groups do not fit: the Slurm executor
# runs a group's jobs one after another inside its allocation (profiles/slurm/README.md, "Several runs per
# GPU"). A pack is one job of rule train_pack instead: K `pdelra train` processes side by side, each with
# its own checkpoint folder, log and metrics.json, asking for the task's GPUs once and K times its cores and
# memory. Its runs' files land in the pack's folder; rule packed_run copies them to the runs' own folders,
# where every later rule finds them as it finds an unpacked run's.
# ----------------------------------------------------------------------------------------------------
PACKS = {
    (task, variant, scale, setting, experiment.pack_name(seeds)): seeds
    for task, variant, scale, setting, seeds in experiment.run_packs(config)
}
PACK_OF_RUN = {(*cell[:4], seed): cell[4] for cell, seeds in PACKS.items() for seed in seeds}
PACKED_TASKS = sorted({cell[0] for cell in PACKS})
PACK_PATTERN = "{task}/{variant}/{scale}/{setting}/{pack}"


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
    """cpus_per_task or mem_mb of a pack job: K times one run's (its GPUs and runtime are one run's)."""
    return declared(lambda wildcards: _merged("resources", wildcards.task)[name] * len(pack_seeds(wildcards)))


@declared
def pack_script(wildcards, output, resources):
    """The pack job's command (a params value: editing a run's config reruns its pack, which resumes each
    run). Each run's `pdelra train` starts in the background with one run's threads, its output in the
    pack's folder, its checkpoint and log where an unpacked run has them. The script itself outlives the
    SIGTERM that Slurm sends every process of the job (preemption, time limit): it waits for every trainer
    to checkpoint, then exits with the last failure's status (75 for a stop: the retry resumes them all)."""
    cell = "/".join((wildcards.task, wildcards.variant, wildcards.scale, wildcards.setting))
    lines = [
        "pids=(); logs=(); status=0",
        "trap : TERM USR1",
        f"mkdir -p {shlex.quote(f'{LOGS}/train/{cell}')} {shlex.quote(output[0])}",
    ]
    threads = _merged("resources", wildcards.task)["cpus_per_task"]
    for seed in pack_seeds(wildcards):
        fields = dict(wildcards.items(), seed=seed)
        resolved = experiment.run_config(config, SETTINGS, **{k: fields[k] for k in run_layout.RUN_KEYS})
        run = RUN_PATTERN.format(**fields)
        log = shlex.quote(f"{LOGS}/train/{run}.log")
        lines += [
            f"SLURM_CPUS_PER_TASK={threads} pdelra train"
            f" --run-config {shlex.quote(json.dumps(resolved, sort_keys=True, separators=(',', ':')))}"
            f" --data {shlex.quote(parent_dir(manifest(wildcards.task)))}"
            f" --out {shlex.quote(f'{output[0]}/seed{seed}')}"
            f" --checkpoint-dir {shlex.quote(f'{RESULTS}/checkpoints/{run}')}"
            f" --device {job_device(wildcards, resources)} > {log} 2>&1 &",
            f"pids+=($!); logs+=({log}); echo seed{seed}: pid $!, log {log}",
        ]
    lines += [  # a wait cut short by the trap (status > 128, trainer still alive) waits again
        'for i in "${!pids[@]}"; do',
        '  while wait "${pids[$i]}"; rc=$?; [ "$rc" -gt 128 ] && kill -0 "${pids[$i]}" 2>/dev/null; do :; done',
        '  if [ "$rc" -ne 0 ]; then status=$rc; echo "exit $rc: ${logs[$i]}"; tail -n 20 "${logs[$i]}"; fi',
        "done",
        'exit "$status"',
    ]
    return "\n".join(lines)


rule train:
    """Train and evaluate one run; exit 75 after checkpointing when preempted (a retry then resumes)."""
    input:
        manifest("{task}"),
    output:
        f"{RESULTS}/runs/{RUN_PATTERN}/metrics.json",
        f"{RESULTS}/runs/{RUN_PATTERN}/model.safetensors",  # best-validation weights (pdelra diagnose)
    params:
        run_config=run_config,
        data=input_dir,
        out=output_dir,
        checkpoints=f"{RESULTS}/checkpoints/{RUN_PATTERN}",
        device=job_device,
    log:
        f"{LOGS}/train/{RUN_PATTERN}.log",
    wildcard_constraints:
        task=task_choice(sorted(set(config["tasks"]) - set(PACKED_TASKS))),
    threads: task_resource("cpus_per_task")
    resources:
        gpu=task_resource("gpu"),
        cpus_per_task=task_resource("cpus_per_task"),
        mem_mb=task_resource("mem_mb"),
        runtime=train_runtime,
    conda:
        PDELRA_ENV
    shell:
        "pdelra train --run-config '{params.run_config}' --data {params.data}"
        " --out {params.out} --checkpoint-dir {params.checkpoints} --device {params.device} > {log} 2>&1"


rule train_pack:
    """Train the runs of one pack side by side on the job's GPU (pack_script); the folder holds their
    outputs, each run's seed{n}/metrics.json and model.safetensors."""
    input:
        manifest("{task}"),
    output:
        directory(f"{RESULTS}/packs/{PACK_PATTERN}"),
    params:
        script=pack_script,
    log:
        f"{LOGS}/train_pack/{PACK_PATTERN}.log",
    wildcard_constraints:
        task=task_choice(PACKED_TASKS),
        pack=r"seeds\d+(-\d+)*",
    threads: pack_resource("cpus_per_task")
    resources:
        gpu=task_resource("gpu"),  # once: the pack's runs share it
        cpus_per_task=pack_resource("cpus_per_task"),
        mem_mb=pack_resource("mem_mb"),
        runtime=train_runtime,
    conda:
        PDELRA_ENV
    shell:
        "exec > {log} 2>&1\n{params.script}"


rule packed_run:
    """A packed run's files in its own run folder, as rule train leaves an unpacked run's (a copy: a later
    rerun of the pack replaces its folder, not the run's files)."""
    localrule: True
    input:
        pack_dir,
    output:
        f"{RESULTS}/runs/{RUN_PATTERN}/metrics.json",
        f"{RESULTS}/runs/{RUN_PATTERN}/model.safetensors",
    wildcard_constraints:
        task=task_choice(PACKED_TASKS),
    shell:
        "cp {input}/seed{wildcards.seed}/model.safetensors {output[1]}"
        " && cp {input}/seed{wildcards.seed}/metrics.json {output[0]}"
