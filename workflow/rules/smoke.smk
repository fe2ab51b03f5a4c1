"""The campaign's first job (cluster.smoke): `pdelra smoke` on one GPU node of the jobs' partition, before
any training job is submitted (profiles/slurm/README.md)."""

# ----------------------------------------------------------------------------------------------------
# With cluster.smoke, every GPU training rule (train, train_pack, lm_train, cta_official_train,
# cta_lm_train) takes SMOKE_OK as an ancient() input: nothing is trained before one job has found CUDA, bf16
# and a training step of each LRA task working on a node, and a later smoke test (a changed config reruns
# it) does not make the finished runs out of date. The job runs the workflow's own resolved config, written
# beside its log, with the site options and requests of the first LRA task (its check steps each task in
# turn on the one GPU).
# ----------------------------------------------------------------------------------------------------
import shlex

import yaml

SMOKE_OK = f"{RESULTS}/cluster/smoke.ok"
SMOKE_MINUTES = 30
SMOKE_GATE = [ancient(SMOKE_OK)] if config["cluster"]["smoke"] else []
SMOKE_RESOURCES = _merged("resources", RUNS[0][0] if RUNS else next(iter(config["tasks"])))


if config["cluster"]["smoke"]:

    rule smoke:
        """One training step of each LRA task's baseline on a GPU node (pdelra.planning.smoke)."""
        output:
            SMOKE_OK,
        params:
            # YAML, as `pdelra smoke` reads it (JSON's 1e-05 is text to YAML 1.1); plain types first.
            config=shlex.quote(yaml.safe_dump(json.loads(json.dumps(config)), sort_keys=True)),
            config_file=f"{LOGS}/smoke/config.yaml",
        log:
            f"{LOGS}/smoke/smoke.log",
        priority: max(PRIORITY.values()) + 1  # above every class of cluster.priority
        resources:
            gpu=1,
            cpus_per_task=SMOKE_RESOURCES["cpus_per_task"],
            mem_mb=SMOKE_RESOURCES["mem_mb"],
            runtime=runtime_of(lambda wildcards: {"runtime": SMOKE_MINUTES}),
            **site_options({None: SMOKE_RESOURCES}),
        conda:
            PDELRA_ENV
        shell:
            "printf '%s' {params.config} > {params.config_file}"
            " && pdelra smoke {params.config_file} > {log} 2>&1 && touch {output}"
