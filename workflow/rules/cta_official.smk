"""Continuous-Time Attention's own experiments (config key `cta_official`; pdelra.cta_official.grid): their
sources (downloaded with DVC, or generated), `pdelra preprocess-cta`, one `pdelra train` job per run with
the authors' model, and tables/cta_official_runs.csv (+ the official-vs-ours summary) for the claims and the
report. Runs: results/{experiment}/cta_official/runs/{task}/{variant}/h1/base/seed{n}; the WikiText-103 causal LM
(`cta_official.wikitext103`: `pdelra cta-official train-lm`, one job per run) under
.../runs/wikitext103/{variant}/h1/{setting}/seed{n}, its setting naming the ablation (base, steps{n},
data{p}; pdelra.cta_official.grid). Without the section there are no such jobs and the report's section
says "not run"."""

# ----------------------------------------------------------------------------------------------------
# The section's globals (here, not in common.smk: they serve these rules; report.smk's aggregate takes the
# section's tables as a part of pdelra.parts). Its input functions: cta_official_inputs.smk.
# ----------------------------------------------------------------------------------------------------

CTA = config.get("cta_official")
CTA_RESULTS = f"{RESULTS}/cta_official"
CTA_PROCESSED = f"{PROCESSED}/{cta_grid.PROCESSED_DIR}"
CTA_PATTERN = run_layout.RUN_PATTERN.format(
    task="{cta_task}", variant="{cta_variant}", scale=run_layout.MAIN_SCALE, setting=run_layout.BASE_SETTING, seed="{seed}"
)
# The WikiText-103 LM's runs: task wikitext103, a setting per ablation (pdelra.cta_official.grid.lm_runs).
CTA_LM = cta_grid.lm_section(CTA)
CTA_LM_PATTERN = run_layout.RUN_PATTERN.format(
    task=cta_grid.LM_TASK, variant="{cta_variant}", scale=run_layout.MAIN_SCALE, setting="{cta_lm_setting}", seed="{seed}"
)
CTA_METRICS = [
    f"{CTA_RESULTS}/runs/{CTA_PATTERN.format(cta_task=task, cta_variant=variant, seed=seed)}/metrics.json"
    for task, variant, _, _, seed in cta_grid.runs(CTA)
] + [
    f"{CTA_RESULTS}/runs/{CTA_LM_PATTERN.format(cta_variant=variant, cta_lm_setting=setting, seed=seed)}/metrics.json"
    for _, variant, _, setting, seed in cta_grid.lm_runs(CTA)
]
# The tables of this part (pdelra.parts), inputs of the aggregate rule (report.smk) for the claims and
# the report; none without the section.
CTA_OFFICIAL_TABLES = aggregate_part_tables("cta_official")


if CTA:

    wildcard_constraints:
        cta_task="|".join(cta_grid.TASKS),
        cta_variant="|".join(cta_grid.VARIANTS),
        cta_source="|".join(cta_grid.ARCHIVES + (cta_grid.WORDPIECE, cta_grid.BPE)),
        cta_lm_setting="|".join(map(re.escape, cta_grid.lm_settings(CTA))) or "(?!)",
        cta_download="|".join(map(re.escape, cta_grid.DOWNLOAD_FILES.values())),

    if config["data"]["source"] == "generated":

        rule cta_generate:
            """A generated stand-in for AG News, SST-2, WikiText-103, the WordPiece vocab.txt or the BPE
            tokenizer.json (pdelra generate)."""
            priority: DATA_PRIORITY  # before any training job (resources.smk)
            localrule: True
            output:
                directory(f"{RAW}/{{cta_source}}"),
            params:
                settings=lambda w: json.dumps(
                    {"seed": config["data"]["seed"], **CTA.get("generate", {}).get(w.cta_source, {})},
                    sort_keys=True,
                    separators=(",", ":"),
                ),
            log:
                f"{LOGS}/data/cta_generate_{{cta_source}}.log",
            conda:
                PDELRA_ENV
            shell:
                "pdelra generate {wildcards.cta_source} --out {output} --params '{params.settings}' > {log} 2>&1"

    else:
        CTA_SOURCE_OF_FILE = {file: source for source, file in cta_grid.DOWNLOAD_FILES.items()}

        rule cta_fetch:
            """Download one source with `dvc import-url` (records URL and md5; DVC runs one at a time)."""
            priority: DATA_PRIORITY  # before any training job (resources.smk)
            localrule: True
            output:
                f"{RAW}/downloads/{{cta_download}}",
            params:
                url=lambda w: CTA["downloads"][CTA_SOURCE_OF_FILE[w.cta_download]]["url"],
                md5=lambda w: md5_option(CTA["downloads"][CTA_SOURCE_OF_FILE[w.cta_download]].get("md5")),
            log:
                f"{LOGS}/data/cta_fetch_{{cta_download}}.log",
            resources:
                dvc=1,
            conda:
                PDELRA_ENV
            shell:
                "pdelra fetch --url {params.url} --out {output} {params.md5} > {log} 2>&1"

        rule cta_extract:
            """Unpack AG News, SST-2 or WikiText-103 into its raw folder (pdelra extract; tar or zip told
            by content)."""
            priority: DATA_PRIORITY  # before any training job (resources.smk)
            localrule: not PREPARE_AS_JOBS  # cluster.prepare_as_jobs: a CPU job instead
            input:
                lambda w: f"{RAW}/downloads/{cta_grid.DOWNLOAD_FILES[w.cta_source]}",
            output:
                directory(f"{RAW}/{{cta_source}}"),
            params:
                raw=lambda wildcards, output: parent_dir(output[0]),
            resources:
                **prepare_resources(),
            log:
                f"{LOGS}/data/cta_extract_{{cta_source}}.log",
            conda:
                PDELRA_ENV
            shell:
                "pdelra extract {wildcards.cta_source} --archive {input} --out {params.raw} > {log} 2>&1"

    rule cta_preprocess:
        """One task as the official code prepares it (pdelra preprocess-cta); manifest.json is written last."""
        priority: DATA_PRIORITY  # before any training job (resources.smk)
        localrule: not PREPARE_AS_JOBS  # cluster.prepare_as_jobs: a CPU job instead
        input:
            raw=lambda w: f"{RAW}/{cta_grid.RAW_OF_TASK[w.cta_task]}",
            tokenizer=lambda w: cta_tokenizer(w.cta_task),
        output:
            f"{CTA_PROCESSED}/{{cta_task}}/manifest.json",
        params:
            out=lambda wildcards, output: parent_dir(output[0]),
            tokenizer=cta_tokenizer_option,
            max_length=lambda w: CTA["tasks"][w.cta_task]["max_length"],
            seed=config["data"]["seed"],
        resources:
            **prepare_resources(),
        log:
            f"{LOGS}/data/cta_preprocess_{{cta_task}}.log",
        conda:
            PDELRA_ENV
        shell:
            "pdelra preprocess-cta {wildcards.cta_task} --raw {input.raw} {params.tokenizer}"
            " --out {params.out} --max-length {params.max_length} --seed {params.seed} > {log} 2>&1"

    rule cta_official_train:
        """One run of the authors' model (pdelra train); exit 75 after checkpointing when preempted."""
        input:
            f"{CTA_PROCESSED}/{{cta_task}}/manifest.json",
            *SMOKE_GATE,
        output:
            f"{CTA_RESULTS}/runs/{CTA_PATTERN}/metrics.json",
        params:
            run_config=lambda w: json.dumps(
                cta_grid.run_config(CTA, w.cta_task, w.cta_variant, w.seed), sort_keys=True, separators=(",", ":")
            ),
            data=input_dir,
            out=output_dir,
            checkpoints=f"{CTA_RESULTS}/checkpoints/{CTA_PATTERN}",
            device=job_device,
        log:
            f"{LOGS}/cta_official/{CTA_PATTERN}.log",
        threads: cta_setting("resources", "cpus_per_task")
        priority: PRIORITY["related"]  # cluster.priority
        resources:
            gpu=cta_setting("resources", "gpu"),
            cpus_per_task=cta_setting("resources", "cpus_per_task"),
            mem_mb=cta_setting("resources", "mem_mb"),
            runtime=runtime_of(lambda w: cta_grid.merged(CTA, "resources", w.cta_task)),
            **site_options(
                {task: cta_grid.merged(CTA, "resources", task) for task in CTA["tasks"]},
                f"{CTA_RESULTS}/checkpoints/{CTA_PATTERN}",
            ),
        conda:
            PDELRA_ENV
        shell:
            "pdelra train --run-config '{params.run_config}' --data {params.data}"
            " --out {params.out} --checkpoint-dir {params.checkpoints} --device {params.device} > {log} 2>&1"

    if CTA_LM:

        rule cta_lm_preprocess:
            """WikiText-103 as LM blocks of block_size TinyLlama tokens (pdelra preprocess-cta wikitext103)."""
            priority: DATA_PRIORITY  # before any training job (resources.smk)
            localrule: not PREPARE_AS_JOBS  # cluster.prepare_as_jobs: a CPU job instead
            input:
                raw=f"{RAW}/wikitext103",
                tokenizer=cta_lm_tokenizer(),
            output:
                f"{CTA_PROCESSED}/{cta_grid.LM_TASK}/manifest.json",
            params:
                out=lambda wildcards, output: parent_dir(output[0]),
                tokenizer=lambda wildcards, input: (
                    f"{input.tokenizer}/tokenizer.json"
                    if config["data"]["source"] == "generated"
                    else input.tokenizer
                ),
                block_size=CTA_LM["block_size"],
            resources:
                **prepare_resources(),
            log:
                f"{LOGS}/data/cta_preprocess_{cta_grid.LM_TASK}.log",
            conda:
                PDELRA_ENV
            shell:
                "pdelra preprocess-cta wikitext103 --raw {input.raw} --tokenizer {params.tokenizer}"
                " --out {params.out} --max-length {params.block_size} > {log} 2>&1"

        rule cta_lm_train:
            """One WikiText-103 LM run of the authors' model and recipe (pdelra cta-official train-lm); exit 75
            after checkpointing when preempted (a retry resumes)."""
            input:
                rules.cta_lm_preprocess.output,
                *SMOKE_GATE,
            output:
                f"{CTA_RESULTS}/runs/{CTA_LM_PATTERN}/metrics.json",
            params:
                run_config=lambda w: json.dumps(
                    cta_grid.lm_run_config(CTA, w.cta_variant, w.cta_lm_setting, w.seed),
                    sort_keys=True,
                    separators=(",", ":"),
                ),
                data=input_dir,
                out=output_dir,
                checkpoints=f"{CTA_RESULTS}/checkpoints/{CTA_LM_PATTERN}",
                device=job_device,
            log:
                f"{LOGS}/cta_official/{CTA_LM_PATTERN}.log",
            threads: CTA_LM["resources"]["cpus_per_task"]
            priority: PRIORITY["related"]
            resources:
                gpu=CTA_LM["resources"]["gpu"],
                cpus_per_task=CTA_LM["resources"]["cpus_per_task"],
                mem_mb=CTA_LM["resources"]["mem_mb"],
                runtime=runtime_of(lambda wildcards: CTA_LM["resources"]),
                **site_options({None: CTA_LM["resources"]}, f"{CTA_RESULTS}/checkpoints/{CTA_LM_PATTERN}"),
            conda:
                PDELRA_ENV
            shell:
                "pdelra cta-official train-lm --run-config '{params.run_config}' --data {params.data}"
                " --out {params.out} --checkpoint-dir {params.checkpoints} --device {params.device} > {log} 2>&1"

    rule cta_official_aggregate:
        """cta_official_runs.csv (one row per run), cta_official_summary.csv (official vs ours, Tables 1-2)
        and cta_official_lm.csv (the WikiText-103 LM per variant and setting, Tables 3-5)."""
        localrule: True
        input:
            CTA_METRICS,
        output:
            CTA_OFFICIAL_TABLES,
        params:
            out=lambda wildcards, output: parent_dir(output[0]),
        log:
            f"{LOGS}/cta_official_aggregate.log",
        conda:
            PDELRA_ENV
        shell:
            "pdelra cta-official aggregate --out {params.out} {input} > {log} 2>&1"
