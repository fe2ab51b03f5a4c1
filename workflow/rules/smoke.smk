"""The campaign's first jobs (cluster.smoke): `pdelra smoke` on one GPU node of each GPU model the jobs may
land on, before any training job is submitted (profiles/slurm/README.md)."""

# ----------------------------------------------------------------------------------------------------
# With cluster.smoke, every GPU training rule (train, train_pack, lm_train, cta_official_train,
# cta_lm_train) takes every SMOKE_OKS file as an ancient() input: nothing is trained before a job on each GPU
# model has found CUDA, bf16 and a training step of each LRA task working, and a later smoke test (a changed
# config reruns it) does not make the finished runs out of date. One job per model of the constraint
# ('a100|h100': two, each constrained to its model; pdelra.planning.gpu_models), one where a gpu_model is
# pinned or the constraint names no list ("any"). The job runs the workflow's own resolved config, written
# beside its log, with the site options and requests of the first LRA task (its check steps each task in
# turn on the one GPU). A node without CUDA is recorded in BAD_NODES by the job, so its retry excludes it.
# ----------------------------------------------------------------------------------------------------
import shlex

import yaml

from pdelra.planning import gpu_models

SMOKE_MINUTES = 30
SMOKE_RESOURCES = _merged("resources", RUNS[0][0] if RUNS else next(iter(config["tasks"])))
SMOKE_MODELS = gpu_models.smoke_models(SMOKE_RESOURCES)
SMOKE_OKS = [f"{RESULTS}/cluster/smoke/{model}.ok" for model in SMOKE_MODELS]
SMOKE_GATE = [ancient(path) for path in SMOKE_OKS] if config["cluster"]["smoke"] else []


if config["cluster"]["smoke"]:

    rule smoke:
        """One training step of each LRA task's baseline on a GPU node of one model (pdelra.planning.smoke)."""
        output:
            f"{RESULTS}/cluster/smoke/{{gpu}}.ok",
        wildcard_constraints:
            gpu="|".join(re.escape(model) for model in SMOKE_MODELS),
        params:
            # YAML, as `pdelra smoke` reads it (JSON's 1e-05 is text to YAML 1.1); plain types first.
            config=shlex.quote(yaml.safe_dump(json.loads(json.dumps(config)), sort_keys=True)),
            config_file=f"{LOGS}/smoke/config-{{gpu}}.yaml",
        log:
            f"{LOGS}/smoke/{{gpu}}.log",
        priority: max(PRIORITY.values()) + 1  # above every class of cluster.priority
        resources:
            gpu=1,
            cpus_per_task=SMOKE_RESOURCES["cpus_per_task"],
            mem_mb=SMOKE_RESOURCES["mem_mb"],
            runtime=runtime_of(lambda wildcards: {"runtime": SMOKE_MINUTES}),
            **model_site_options(SMOKE_RESOURCES, SMOKE_MODELS),
        conda:
            PDELRA_ENV
        shell:
            "printf '%s' {params.config} > {params.config_file}"
            " && pdelra smoke {params.config_file} > {log} 2>&1 && touch {output}"
