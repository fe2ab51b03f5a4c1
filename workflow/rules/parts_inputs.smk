"""The experiment's parts (pdelra.parts: the built-in ones and those the config registers under `parts`):
the tables each writes, what the aggregate and report rules take of them, and the input functions of the
generic rules that run a part without a .smk file of its own (parts.smk)."""

# Every part, in the registry's order (config_problems has imported the config's own already).
PARTS = registry.registered(config)
PART = {part.name: part for part in PARTS}
PART_OPTIONS = registry.options(config)  # `--part MODULE ...`: a config's own parts, for aggregate and report


def aggregate_part_tables(name):
    """The tables the part `name` writes, its rule's outputs and the aggregate rule's inputs; none when the
    config does not run the part."""
    part = PART[name]
    if not part.runs_in(config):
        return []
    return [f"{RESULTS}/{registry.TABLES_DIR}/{table}.csv" for table in part.tables]


def aggregate_extra_args(inputs):
    """`--lm-runs F --lm-dynamics F --diagnostics F --cta-official-runs F --part SPEC`: of the built-in
    parts' tables (every part's tables are inputs of the aggregate rule, so the claims and summaries rerun
    when they change) those `pdelra aggregate` reads, as the partial report passes them too; a config's own
    parts by their record (aggregate reads their tables from its --out folder, where they are)."""
    tables = [path for part in registry.builtin() for path in getattr(inputs, part.name)]
    read = registry.aggregate_inputs(tables)
    options = [f"{registry.option(name)} {path}" for name, path in read.items()]
    return " ".join([*options, PART_OPTIONS]).strip()


def report_part_tables():
    """The tables of every part with a report section, inputs of the report rule (none of a part the config
    does not run: its section says "not run")."""
    return [table for part in PARTS if part.report for table in aggregate_part_tables(part.name)]


# ----------------------------------------------------------------------------------------------------
# The generic rules (parts.smk): a part with `workflow = GENERIC` has its jobs (TrainingJob, the planner's
# own) run by `pdelra part run` and its tables written by `pdelra part aggregate`.
# ----------------------------------------------------------------------------------------------------
GENERIC_PARTS = [part for part in PARTS if part.workflow == registry.GENERIC and part.runs_in(config)]
# {(rule, run folder under its runs_dir): TrainingJob}
PART_JOBS = {
    (job.rule, run_layout.RUN_PATTERN.format(**dict(zip(run_layout.RUN_KEYS, job.run)))): job
    for part in GENERIC_PARTS
    for job in part.jobs(config)
}
PART_RUN = r"[^/]+/[^/]+/[^/]+/[^/]+/seed\d+"  # a run folder (pdelra.runs.RUN_PATTERN)


def part_job(rule_name):
    """The TrainingJob of a generic training rule's job, from its wildcard `part_run`."""
    return lambda wildcards: PART_JOBS[(rule_name, wildcards.part_run)]


def part_data(rule_name):
    """Input function: the processed manifest of the LRA task the job names, if it names one of the config's
    `tasks` (pdelra.planning.experiment.part_processed_tasks): its data is prepared before it runs."""
    job = part_job(rule_name)
    return lambda wildcards: [manifest(task) for task in [job(wildcards).task] if task in config["tasks"]]


def part_run_config(rule_name):
    """Input function: the job's run config as compact JSON (a params value: a change reruns the job)."""
    job = part_job(rule_name)
    return lambda wildcards: json.dumps(job(wildcards).config, sort_keys=True, separators=(",", ":"))


def part_runtime(rule_name):
    """Minutes of one attempt: the job's runtime times the attempt, capped at cluster.max_runtime."""
    job = part_job(rule_name)
    return declared(lambda wildcards, attempt: capped_runtime(job(wildcards).runtime_min, attempt))


def part_run_files(part):
    """Every run file of a generic part's jobs: the inputs of its tables rule."""
    rules = {rule.name: rule.runs_dir for rule in part.training}
    return [
        f"{RESULTS}/{rules[rule]}/{run}/{part.run_file}" for (rule, run) in PART_JOBS if rule in rules
    ]
