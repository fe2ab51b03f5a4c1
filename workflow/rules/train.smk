"""One training job per distinct (task, variant, scale, setting, seed), or per pack of K such runs of a grid
cell for a task with `resources.pack: K`. Checkpoints live outside the declared outputs (Snakemake deletes
those before a job starts), so a retried or rerun job resumes where it stopped."""

rule train:
    """Train and evaluate one run; exit 75 after checkpointing when preempted (a retry then resumes)."""
    input:
        manifest("{task}"),
        *SMOKE_GATE,  # cluster.smoke: the smoke test passed first
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
    priority: run_priority()  # cluster.priority: the paper's runs before the related systems'
    resources:
        gpu=task_resource("gpu"),
        cpus_per_task=task_resource("cpus_per_task"),
        mem_mb=task_resource("mem_mb"),
        runtime=train_runtime,
        **task_site_options(f"{RESULTS}/checkpoints/{RUN_PATTERN}"),
    conda:
        PDELRA_ENV
    shell:
        "pdelra train --run-config '{params.run_config}' --data {params.data}"
        " --out {params.out} --checkpoint-dir {params.checkpoints} --device {params.device} > {log} 2>&1"


rule train_pack:
    """Train the runs of one pack side by side on the job's GPU (`pdelra train-pack`); the folder holds their
    outputs, each run's seed{n}/metrics.json and model.safetensors. A member that finished before another
    failed keeps its final state in its checkpoint folder, and the retry restores it instead of training."""
    input:
        manifest("{task}"),
        *SMOKE_GATE,  # cluster.smoke: the smoke test passed first
    output:
        directory(f"{RESULTS}/packs/{PACK_PATTERN}"),
    params:
        run_config=pack_run_config,
        seeds=pack_seed_list,
        data=input_dir,
        checkpoints=f"{RESULTS}/checkpoints/{CELL_PATTERN}",
        logs=f"{LOGS}/train/{CELL_PATTERN}",
        threads=task_resource("cpus_per_task"),  # each member's: one run's
        device=job_device,
    log:
        f"{LOGS}/train_pack/{PACK_PATTERN}.log",
    wildcard_constraints:
        task=task_choice(PACKED_TASKS),
        pack=r"seeds\d+(-\d+)*",
    threads: pack_resource("cpus_per_task")
    priority: run_priority()
    resources:
        gpu=task_resource("gpu"),  # once: the pack's runs share it
        cpus_per_task=pack_resource("cpus_per_task"),
        mem_mb=pack_resource("mem_mb"),
        runtime=pack_runtime,  # K runs' time / pack_gain, capped
        **task_site_options(pack_checkpoints),
    conda:
        PDELRA_ENV
    shell:
        "pdelra train-pack --run-config '{params.run_config}' --seeds {params.seeds} --data {params.data}"
        " --out {output} --checkpoint-dir {params.checkpoints} --log-dir {params.logs}"
        " --threads {params.threads} --device {params.device} > {log} 2>&1"


rule packed_run:
    """A packed run's files in its own run folder, as rule train leaves an unpacked run's (a copy: a later
    rerun of the pack replaces its folder, not the run's files)."""
    localrule: True
    input:
        pack_dir,
    output:
        metrics=f"{RESULTS}/runs/{RUN_PATTERN}/metrics.json",
        weights=f"{RESULTS}/runs/{RUN_PATTERN}/model.safetensors",
    wildcard_constraints:
        task=task_choice(PACKED_TASKS),
    log:
        f"{LOGS}/packed_run/{RUN_PATTERN}.log",
    conda:
        PDELRA_ENV
    shell:
        "(cp {input}/seed{wildcards.seed}/model.safetensors {output.weights}"
        " && cp {input}/seed{wildcards.seed}/metrics.json {output.metrics}) > {log} 2>&1"
