"""Operator-theory diagnostics of every trained run (`pdelra diagnose`), then their table over runs.

Each run's job is its own rule, downstream of training: it reruns when the run's weights change or when the
diagnostics code changes — its digest is a parameter (Snakemake does not rerun on edits of imported Python
modules, but does on a changed parameter) — and never makes training rerun."""

from pdelra.diagnose import source_digest

DIAGNOSTICS_CODE = source_digest()  # sha256 of pdelra/diagnostics.py + pdelra/diagnose.py
DIAGNOSE_EXAMPLES = 32  # the first N validation examples of each task, the same for every run
DIAGNOSTICS = [f"{parent_dir(path)}/diagnostics.csv" for path in all_metrics()]  # one per selected run


rule diagnose:
    """Roughness, perturbation and bound, and diffusion–attention commutators of one trained run (CPU)."""
    input:
        metrics=f"{RESULTS}/runs/{RUN_PATTERN}/metrics.json",
        weights=f"{RESULTS}/runs/{RUN_PATTERN}/model.safetensors",
        manifest=manifest("{task}"),
    output:
        f"{RESULTS}/runs/{RUN_PATTERN}/diagnostics.csv",
    params:
        run_dir=lambda wildcards, input: parent_dir(input.metrics),
        data=lambda wildcards, input: parent_dir(input.manifest),
        examples=DIAGNOSE_EXAMPLES,
        code=DIAGNOSTICS_CODE,
    log:
        f"{LOGS}/diagnose/{RUN_PATTERN}.log",
    threads: 1
    resources:
        gpu=0,
        cpus_per_task=1,
        mem_mb=4000,
        runtime=30,
    conda:
        PDELRA_ENV
    shell:
        "pdelra diagnose run --run-dir {params.run_dir} --data {params.data} --out {output}"
        " --examples {params.examples} --num-threads {threads} > {log} 2>&1"


rule diagnostics_table:
    """diagnostics.csv over the selected runs (task, variant, scale, setting, seed, block, operator, …)."""
    localrule: True
    input:
        DIAGNOSTICS,
    output:
        f"{RESULTS}/tables/diagnostics.csv",
    params:
        inputs=f"{LOGS}/diagnostics_table.inputs",  # one file a line: too many for a command line
    log:
        f"{LOGS}/diagnostics_table.log",
    conda:
        PDELRA_ENV
    run:
        write_arg_file(params.inputs, input)
        shell("pdelra diagnose table --out {output} @{params.inputs} > {log} 2>&1")
