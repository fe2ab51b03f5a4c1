"""Raw data (downloaded or generated) → processed arrays + manifest.json per task. Local rules: they run once
per task, not per training job."""


if config["data"]["source"] == "generated":

    rule generate:
        """Synthetic stand-in for one task's raw data, in the real on-disk format (offline, seeded)."""
        priority: DATA_PRIORITY  # before any training job (resources.smk)
        localrule: True
        output:
            directory(f"{RAW}/{{task}}"),
        params:
            settings=generate_params,
        log:
            f"{LOGS}/data/generate_{{task}}.log",
        conda:
            PDELRA_ENV
        shell:
            "pdelra generate {wildcards.task} --out {output} --params '{params.settings}' > {log} 2>&1"

else:

    rule fetch:
        """Download one source archive with `dvc import-url` (records URL and md5); DVC runs one at a time."""
        priority: DATA_PRIORITY  # before any training job (resources.smk)
        localrule: True
        output:
            download_path("{source}"),
        params:
            url=download_setting("url"),
            md5=lambda wildcards: md5_option(download_setting("md5")(wildcards)),
        log:
            f"{LOGS}/data/fetch_{{source}}.log",
        resources:
            dvc=1,
        conda:
            PDELRA_ENV
        shell:
            "pdelra fetch --url {params.url} --out {output} {params.md5} > {log} 2>&1"

    # One extraction per archive: the LRA release feeds three task folders in a single streaming pass.
    for _source, _tasks in TASKS_OF_SOURCE.items():

        rule:
            name:
                f"extract_{_source}"
            localrule: not PREPARE_AS_JOBS  # cluster.prepare_as_jobs: a CPU job instead
            priority: DATA_PRIORITY  # before any training job (resources.smk)
            input:
                download_path(_source),
            output:
                [directory(f"{RAW}/{task}") for task in _tasks],
            params:
                source=_source,
                raw=lambda wildcards, output: parent_dir(output[0]),
            resources:
                **prepare_resources(),
            log:
                f"{LOGS}/data/extract_{_source}.log",
            conda:
                PDELRA_ENV
            shell:
                "pdelra extract {params.source} --archive {input} --out {params.raw} > {log} 2>&1"


rule preprocess:
    """Tokenise, split and pad one task into memory-mappable arrays; manifest.json is written last."""
    priority: DATA_PRIORITY  # before any training job (resources.smk)
    localrule: not PREPARE_AS_JOBS  # cluster.prepare_as_jobs: a CPU job instead
    input:
        f"{RAW}/{{task}}",
    output:
        manifest("{task}"),
    params:
        out=lambda wildcards, output: parent_dir(output[0]),
        max_length=lambda wildcards: config["tasks"][wildcards.task]["max_length"],
        seed=config["data"]["seed"],
    resources:
        **prepare_resources(),
    log:
        f"{LOGS}/data/preprocess_{{task}}.log",
    conda:
        PDELRA_ENV
    shell:
        "pdelra preprocess {wildcards.task} --raw {input} --out {params.out}"
        " --max-length {params.max_length} --seed {params.seed} > {log} 2>&1"
