"""The jobs of every part that has no .smk file of its own (pdelra.parts, `workflow = GENERIC`): one job per
TrainingJob its training rules expand (`pdelra part run`, its run folder under results/{experiment}/{runs_dir}),
and its tables rule (`pdelra part aggregate`), whose tables the aggregate and report rules take (report.smk).
Its input functions: parts_inputs.smk. A new system is a part and needs no rule here
(docs/add-a-related-system.md)."""

for _part in GENERIC_PARTS:
    for _rule in _part.training:

        rule:
            name: _rule.name
            input:
                *SMOKE_GATE,  # cluster.smoke: the smoke test passed first
                part_data(_rule.name),  # the processed data of the LRA task it names, if any
            output:
                f"{RESULTS}/{_rule.runs_dir}/{{part_run}}/{_part.run_file}",
            params:
                part=_part.name,
                specs=PART_OPTIONS,
                run_config=part_run_config(_rule.name),
                out=lambda wildcards, output: parent_dir(output[0]),
                device=job_device,
            log:
                f"{LOGS}/{_part.name}/{{part_run}}.log",
            wildcard_constraints:
                part_run=PART_RUN,
            priority: PRIORITY["related"]  # cluster.priority
            resources:
                gpu=lambda wildcards, _job=part_job(_rule.name): _job(wildcards).gpus,
                runtime=part_runtime(_rule.name),
                **site_options({None: {}}),  # the site's partition, GPU model, qos (defaults.resources)
            conda:
                PDELRA_ENV
            shell:
                "pdelra part run {params.part} {params.specs} --run-config '{params.run_config}'"
                " --out {params.out} --device {params.device} > {log} 2>&1"

    rule:
        name: _part.aggregate_rule
        localrule: True
        input:
            part_run_files(_part),
        output:
            aggregate_part_tables(_part.name),
        params:
            part=_part.name,
            specs=PART_OPTIONS,
            out=lambda wildcards, output: parent_dir(output[0]),
        log:
            f"{LOGS}/{_part.aggregate_rule}.log",
        conda:
            PDELRA_ENV
        shell:
            "pdelra part aggregate {params.part} {input} --out {params.out} {params.specs} > {log} 2>&1"
