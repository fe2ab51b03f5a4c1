"""DVC versioning of the finished artifacts: the last step of `rule all`.

The experiment's runs/, tables/ and report/ folders are recorded with `dvc add` (one .dvc file per folder) and
pushed when a DVC remote is set: `dvc.remote` in the config names one (configured with `dvc remote add`),
otherwise the DVC project's default remote is used, if any. After `dvc pull` on another machine, run
`pdelra version restore` (dvc pull + snakemake --touch) so that nothing is recomputed: DVC does not keep mtimes.
"""

# A remote *name* from .dvc/config; null = the project's default remote (none: record in the local cache only).
DVC_REMOTE = (config.get("dvc") or {}).get("remote")


rule version:
    """dvc add the runs, tables and report of this experiment; push them when a remote is set."""
    localrule: True
    input:
        # Only what it reads besides runs/: the tables already depend on every run's metrics.json, and
        # listing those 10,000s of files here too made Snakemake's input expansion quadratic.
        tables=rules.aggregate.output,
        report=rules.report.output,
    output:
        f"{RESULTS}/versioned.json",
    params:
        experiment_dir=lambda wildcards, output: parent_dir(output[0]),
        remote=f"--remote {DVC_REMOTE}" if DVC_REMOTE else "",
    resources:
        dvc=1,  # DVC takes a repository lock: one DVC rule (fetch, version) at a time
    log:
        f"{LOGS}/version.log",
    conda:
        PDELRA_ENV
    shell:
        "pdelra version add {params.experiment_dir} --out {output} {params.remote} > {log} 2>&1"
