"""Tables from every run's metrics.json, then the papermill report: one local job each per experiment."""


rule aggregate:
    """Every table of numbers and the claims (pdelra.results): runs.csv (one row per run, failures and
    divergences included), the paper's tables beside ours, the related systems', the diagnostics' summaries
    and claims.csv. The report only displays them."""
    localrule: True
    input:
        metrics=all_metrics,
        # The tables of every part (pdelra.parts: the diagnostics, PhysQK-AD's LM, CTA's own experiments,
        # the config's own parts), by part; a part the config does not run has none.
        **{part.name: aggregate_part_tables(part.name) for part in PARTS},
    output:
        [f"{RESULTS}/tables/{name}.csv" for name in AGGREGATE_TABLES],
    params:
        out=lambda wildcards, output: parent_dir(output[0]),
        inputs=f"{LOGS}/aggregate.inputs",  # the run files, one a line: too many for a command line
        extra=lambda wildcards, input: aggregate_extra_args(input),
    log:
        f"{LOGS}/aggregate.log",
    conda:
        PDELRA_ENV
    run:
        write_arg_file(params.inputs, input.metrics)
        shell("pdelra aggregate --out {params.out} {params.extra} @{params.inputs} > {log} 2>&1")


rule data_summary:
    """tables/data.csv: real or generated data, split sizes, length and model size per task vs the paper."""
    localrule: True
    input:
        [manifest(task) for task in sorted({run[0] for run in RUNS})],
    output:
        f"{RESULTS}/tables/data.csv",
    params:
        spec=data_spec(),
    log:
        f"{LOGS}/data_summary.log",
    conda:
        PDELRA_ENV
    shell:
        "pdelra data-summary --spec '{params.spec}' --out {output} > {log} 2>&1"


rule report:
    """Execute the report notebook on the tables (kernel `pdelra`) and render it to HTML."""
    localrule: True
    input:
        tables=rules.aggregate.output,  # every table the report reads (it computes nothing)
        data=rules.data_summary.output,  # the data banner
        parts=report_part_tables(),  # what the parts' report sections read (parts_inputs.smk)
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
        specs=PART_OPTIONS,  # the config's own parts: their sections too
    log:
        f"{LOGS}/report.log",
    conda:
        PDELRA_ENV
    shell:
        "pdelra report --tables {params.tables} --out {params.out} --notebook {input.notebook}"
        " --experiment {params.experiment} --kernel pdelra {params.specs} > {log} 2>&1"
