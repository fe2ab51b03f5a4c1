"""Tables from every run's metrics.json, then the papermill report: one local job each per experiment."""


rule aggregate:
    """runs.csv (one row per run, failures and divergences included) and the paper-style summary tables."""
    localrule: True
    input:
        all_metrics(),
    output:
        runs=f"{RESULTS}/tables/runs.csv",
        main=f"{RESULTS}/tables/main.csv",
        multiscale=f"{RESULTS}/tables/multiscale.csv",
        cost=f"{RESULTS}/tables/cost.csv",
        alpha=f"{RESULTS}/tables/alpha.csv",
        settings=f"{RESULTS}/tables/settings.csv",
    params:
        out=lambda wildcards, output: parent_dir(output.runs),
        inputs=f"{LOGS}/aggregate.inputs",  # the run files, one a line: too many for a command line
    log:
        f"{LOGS}/aggregate.log",
    conda:
        PDELRA_ENV
    run:
        write_arg_file(params.inputs, input)
        shell("pdelra aggregate --out {params.out} @{params.inputs} > {log} 2>&1")


rule report:
    """Execute the report notebook on the tables (kernel `pdelra`) and render it to HTML."""
    localrule: True
    input:
        tables=rules.aggregate.output,
        diagnostics=rules.diagnostics_table.output,  # read from the same tables folder
        lm=LM_TABLES,  # PhysQK-AD's LM (workflow/rules/lm.smk); none without an `lm` section
        notebook=REPORT_NOTEBOOK,
    output:
        notebook=f"{RESULTS}/report/report.ipynb",
        html=f"{RESULTS}/report/report.html",
        index=f"{RESULTS}/report/index.html",
        claims=f"{RESULTS}/report/tables/claims.csv",
        # Flagged for `snakemake --report report.zip`: Snakemake's own report (runtimes, provenance, rule
        # graph) then carries every figure of ours too.
        figures=report(
            directory(f"{RESULTS}/report/figures"),
            patterns=["{name}.png"],
            category="Figures",
            caption="../report/figures.rst",
        ),
    params:
        tables=lambda wildcards, input: parent_dir(input.tables[0]),
        out=lambda wildcards, output: parent_dir(output.html),
        experiment=config["experiment"],
    log:
        f"{LOGS}/report.log",
    conda:
        PDELRA_ENV
    shell:
        "pdelra report --tables {params.tables} --out {params.out} --notebook {input.notebook}"
        " --experiment {params.experiment} --kernel pdelra > {log} 2>&1"
