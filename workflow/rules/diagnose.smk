"""Operator-theory diagnostics of the trained runs (`pdelra diagnose`), then their table over runs.

One job per task and part of up to DIAGNOSE_RUNS_PER_JOB of its runs, not one per run: a wide grid's 10,000 runs
would otherwise double its DAG, and every job would load torch, the data and its model code again. Each run's
rows are cached in its folder with a stamp (weights, code, data), so a job redoes only the runs retrained since
it last ran. A job reruns when one of its runs' weights change or when the diagnostics code changes — its digest
is a parameter (Snakemake does not rerun on edits of imported Python modules, but does on a changed parameter)
— and never makes training rerun."""

from pdelra.steps.diagnose_code import source_digest  # torch-free: every job's parse reads it

DIAGNOSTICS_CODE = source_digest()  # sha256 of the diagnostics code (diagnose.DIAGNOSTICS_SOURCES)
# The first N validation examples of each task, the same for every run (diagnostics.examples, default 32).
DIAGNOSE_EXAMPLES = (config.get("diagnostics") or {}).get("examples", 32)


rule diagnose:
    """Roughness, perturbation bounds and diffusion–attention commutators of a part of a task's runs (CPU)."""
    input:
        metrics=diagnosed_files("metrics.json"),
        weights=diagnosed_files("model.safetensors"),
        manifest=manifest("{task}"),
    output:
        f"{RESULTS}/diagnostics/{{task}}/part{{part}}.csv",
    params:
        run_dirs=lambda wildcards, input: " ".join(map(parent_dir, input.metrics)),
        data=lambda wildcards, input: parent_dir(input.manifest),
        examples=DIAGNOSE_EXAMPLES,
        code=DIAGNOSTICS_CODE,
    log:
        f"{LOGS}/diagnose/{{task}}/part{{part}}.log",
    threads: 1
    priority: PRIORITY["diagnose"]  # cluster.priority
    resources:
        gpu=0,
        cpus_per_task=1,
        mem_mb=4000,
        runtime=diagnose_runtime,
        **cpu_site_options(),  # cluster.cpu_partition: CPU-only, no reason to queue on the GPU partition
    conda:
        PDELRA_ENV
    shell:
        "pdelra diagnose run {params.run_dirs} --data {params.data} --out {output}"
        " --examples {params.examples} --num-threads {threads} > {log} 2>&1"


rule diagnostics_table:
    """diagnostics.csv over the selected runs (task, variant, scale, setting, seed, block, operator, …)."""
    localrule: True
    input:
        [f"{RESULTS}/diagnostics/{task}/part{part}.csv" for task, part in DIAGNOSE_PARTS],
    output:
        aggregate_part_tables("diagnostics"),  # tables/diagnostics.csv (pdelra.parts)
    log:
        f"{LOGS}/diagnostics_table.log",
    conda:
        PDELRA_ENV
    shell:
        "pdelra diagnose table --out {output} {input} > {log} 2>&1"
