"""PhysQK-AD's own experiment (config key `lm`): a byte-level causal LM on a corpus the pipeline already has.

Runs: every condition (mha, physqk, physqk_ad) in the setting `base`, and physqk_ad in each of `lm.settings`
(the α-allocation ablation), for every seed. Folders follow pdelra.runs under results/{experiment}/lm/:
runs/lm_{corpus}/{condition}/d{width}/{setting}/seed{n}. Without an `lm` section there are no LM jobs and
the report's section says "not run"."""

from pdelra.lm import grid as lm_grid

LM = config.get("lm")
LM_RESULTS = f"{RESULTS}/lm"
LM_PATTERN = run_layout.RUN_PATTERN.format(
    task="{lm_task}", variant="{condition}", scale="{width}", setting="{allocation}", seed="{seed}"
)
LM_FIELDS = ("lm_task", "condition", "width", "allocation", "seed")
LM_METRICS = [
    f"{LM_RESULTS}/runs/{LM_PATTERN.format(**dict(zip(LM_FIELDS, run)))}/metrics.json"
    for run in lm_grid.runs(LM)
]
# The LM tables (pdelra.parts), inputs of the aggregate rule; none without an `lm` section.
LM_TABLES = aggregate_part_tables("lm")


if LM:

    rule lm_prepare:
        """Split the corpus by document and pack byte windows (pdelra lm prepare)."""
        priority: DATA_PRIORITY  # before any training job (resources.smk)
        localrule: not PREPARE_AS_JOBS  # cluster.prepare_as_jobs: a CPU job instead
        input:
            f"{RAW}/{LM['corpus']}",
        output:
            f"{PROCESSED}/lm_{LM['corpus']}/manifest.json",
        params:
            out=lambda wildcards, output: parent_dir(output[0]),
            corpus=LM["corpus"],
            window=LM["window"],
            val=LM["val_fraction"],
            test=LM["test_fraction"],
            seed=config["data"]["seed"],
            max_documents=f"--max-documents {LM['max_documents']}" if LM.get("max_documents") else "",
        resources:
            **prepare_resources(),
        log:
            f"{LOGS}/data/lm_prepare.log",
        conda:
            PDELRA_ENV
        shell:
            "pdelra lm prepare {params.corpus} --raw {input} --out {params.out} --window {params.window}"
            " --val-fraction {params.val} --test-fraction {params.test} --seed {params.seed}"
            " {params.max_documents} > {log} 2>&1"

    rule lm_train:
        """One LM run; exit 75 after checkpointing when preempted (a retry then resumes)."""
        input:
            rules.lm_prepare.output,
            *SMOKE_GATE,
        output:
            f"{LM_RESULTS}/runs/{LM_PATTERN}/metrics.json",
        params:
            run_config=lambda w: lm_grid.run_config(LM, w.lm_task, w.condition, w.width, w.allocation, w.seed),
            data=lambda wildcards, input: parent_dir(input[0]),
            out=lambda wildcards, output: parent_dir(output[0]),
            checkpoints=f"{LM_RESULTS}/checkpoints/{LM_PATTERN}",
            device=job_device,
        log:
            f"{LOGS}/lm/{LM_PATTERN}.log",
        threads: LM["resources"]["cpus_per_task"]
        priority: PRIORITY["related"]  # cluster.priority
        resources:
            gpu=LM["resources"]["gpu"],
            cpus_per_task=LM["resources"]["cpus_per_task"],
            mem_mb=LM["resources"]["mem_mb"],
            runtime=runtime_of(lambda wildcards: LM["resources"]),
            **site_options({None: LM["resources"]}, f"{LM_RESULTS}/checkpoints/{LM_PATTERN}"),
        conda:
            PDELRA_ENV
        shell:
            "pdelra lm train --run-config '{params.run_config}' --data {params.data}"
            " --out {params.out} --checkpoint-dir {params.checkpoints} --device {params.device} > {log} 2>&1"

    rule lm_aggregate:
        """lm_runs.csv, lm_dynamics.csv (α, η, eff_Pe per layer over training), lm_history.csv."""
        localrule: True
        input:
            LM_METRICS,
        output:
            LM_TABLES,
        params:
            out=lambda wildcards, output: parent_dir(output[0]),
        log:
            f"{LOGS}/lm_aggregate.log",
        conda:
            PDELRA_ENV
        shell:
            "pdelra lm aggregate --out {params.out} {input} > {log} 2>&1"
