"""One training job per distinct (task, variant, scale, setting, seed). Checkpoints live outside the declared outputs
(Snakemake deletes those before a job starts), so a retried or rerun job resumes where it stopped."""


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
