"""The workflow's hooks: at the start, the Slurm preflight (before any local work) and the checkpoint lock
the training jobs will take; at the start, on success and on error, the kept final state of the runs whose
jobs are complete is cleared."""

# ----------------------------------------------------------------------------------------------------
# The cluster: with the slurm executor, before any local work (downloads, preprocessing), the profile's
# placeholders must be replaced, sbatch/sacct must reach the cluster, and every partition the jobs use must
# exist and allow cluster.max_runtime (pdelra.planning.slurm_site.site_problems), and so must the MaxWall
# of the account's association and of the QOS the jobs use (sacctmgr). One message, then stop; a partition
# whose preemption cancels instead of requeueing is a warning. A submit limit (MaxSubmitJobs,
# MaxSubmitJobsPerUser, or what is free of the account's shared GrpSubmitJobs) below the profile's jobs lowers
# the run's concurrent jobs under it (sbatch would refuse the rest), where slurmctld enforces limits
# (AccountingStorageEnforce); a refusal that still comes (other jobs of the user's) is waited out by the sbatch
# shim. The GPU-minutes the jobs ask for are set against the account's GrpTRESMins budget (one line).
# A GPU model without bf16 allowed by a job's constraint stops the run; GPU jobs without any constraint are
# a warning (pdelra.planning.gpu_models).
# ----------------------------------------------------------------------------------------------------
def lower_concurrent_jobs(cap):
    """Lower the run's concurrent Slurm jobs (--jobs) to `cap` before the first job is selected. Snakemake
    9's scheduler, built before onstart, holds --jobs as its `_nodes` resource, both the total and what is
    free; nothing is selected before onstart returns. False (nothing changed) where it is not so."""
    scheduler = getattr(workflow, "scheduler", None)
    pools = [getattr(scheduler, name, None) for name in ("global_resources", "resources")]
    if not all(isinstance(pool, dict) and isinstance(pool.get("_nodes"), int) for pool in pools):
        return False
    if pools[0]["_nodes"] != pools[1]["_nodes"]:  # some jobs are out already
        return False
    for pool in pools:
        pool["_nodes"] = min(pool["_nodes"], cap)
    return True


def check_cluster():
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return
    import getpass

    from pdelra.planning import gpu_models

    forced_qos = getattr(workflow.executor_settings, "qos", None)  # --slurm-qos: on every sbatch line
    given, partitions, seen, placed, accounts, qos, models = [], {}, set(), [], set(), set(), []
    gpu_jobs = []  # the campaign's GPU jobs, set against the account's GrpTRESMins (campaign_gpu_minutes)
    for job in workflow.dag.needrun_jobs():  # one job per (rule, task), as Slurm would get it
        key = (job.rule.name, job.wildcards.get("task") or job.wildcards.get("cta_task"))
        if not job.is_local and (job.resources.get("gpu") or 0):
            gpu_jobs.append(job)
        if job.is_local or key in seen:
            continue
        seen.add(key)
        partition, account = (job.resources.get(k) for k in ("slurm_partition", "slurm_account"))
        given += [str(partition), str(account)]
        partitions.setdefault(partition, []).append((job.rule.name, job.resources.get("runtime") or 0))
        placed.append((job.rule.name, job.resources.get("gpu") or 0, partition))
        models.append((job.rule.name, {k: job.resources.get(k) for k in ("gpu", "gpu_model", "constraint")}))
        accounts.add(str(account) if account else "")
        qos.add(forced_qos or job.resources.get("qos"))
    status = getattr(workflow.executor_settings, "status_command", None) or "sacct"
    jobs = None if workflow.nodes in (None, sys.maxsize) else workflow.nodes
    found = slurm_site.site_problems(
        partitions, given, status, MAX_RUNTIME, user=getpass.getuser(), accounts=accounts, qos=qos, jobs=jobs,
        gpu_minutes=campaign_gpu_minutes(gpu_jobs),
    )
    if found.max_jobs is not None and (found.problems or not lower_concurrent_jobs(found.max_jobs)):
        # Not lowered: the run stops, for this (Snakemake's scheduler is not as expected) or other problems.
        found.warnings = [w for w in found.warnings if not w.startswith(found.cap_reason)]
        line = slurm_site.cap_line(found, jobs, lowered=False)
        (found.warnings if found.problems else found.problems).append(line)
    if cpu_warning := slurm_site.cpu_partition_warning(placed, config["cluster"]["cpu_partition"]):
        found.warnings.append(cpu_warning)
    # The jobs train in bf16: the constraint (or gpu_model) keeps them off GPUs without it.
    bf16_problems, bf16_warnings = gpu_models.bf16_findings(models)
    found.problems += bf16_problems
    found.warnings += bf16_warnings
    for warning in found.warnings:
        print(f"Warning (Slurm): {warning}", file=sys.stderr)
    for note in found.notes:
        print(f"Slurm: {note}", file=sys.stderr)
    if found.problems:
        lines = "\n".join(f"  - {problem}" for problem in found.problems)
        print(f"Cannot use Slurm (nothing was started):\n{lines}", file=sys.stderr)
        sys.exit(1)
    find_the_killed_runs_jobs()
    submit_through_retry()


def find_the_killed_runs_jobs():
    """The live jobs an earlier, killed run of this workflow left (pdelra.planning.twins): found once, before
    anything is submitted, for the sbatch shim to take over (cluster.on_rerun: wait) or cancel per job."""
    from pdelra.planning import twins

    record = Path(RESULTS, "cluster", "twins.json")
    found, warning = twins.record(record, Path.cwd())
    os.environ[twins.TWINS_ENV] = str(record.resolve())
    os.environ[twins.ON_RERUN_ENV] = mode = config["cluster"]["on_rerun"]
    if warning:
        print(f"Warning (Slurm): {warning}", file=sys.stderr)
    if found:
        what = "taken over by" if mode == "wait" else "cancelled before"
        print(
            f"Slurm: {found} job(s) of an earlier run of this workflow are still queued or running: each is "
            f"{what} the job this run submits for the same step (cluster.on_rerun: {mode}; "
            f"{record.with_name('twins.log')} lists them)",
            file=sys.stderr,
        )


def campaign_gpu_minutes(jobs):
    """(GPU-minutes, what they are) of the campaign's GPU jobs: with cluster.gpu_model, each LRA run's FLOPs
    estimate on it (pdelra.planning.estimate, what `pdelra plan --gpu` counts) and the others' requests;
    without it, every job's first request (an upper bound: a finished job bills what it used)."""
    asked = sum((job.resources.get("gpu") or 0) * (job.resources.get("runtime") or 0) for job in jobs)
    model = config["cluster"].get("gpu_model")
    if not model:
        return asked, "what its GPU jobs ask for on their first attempts; set cluster.gpu_model for an estimate"
    try:
        gpu = estimate.estimate_gpu(config["cluster"])
    except estimate.EstimateError as err:
        return asked, f"what its GPU jobs ask for on their first attempts ({err})"
    needed = 0.0
    for job in jobs:
        w = job.wildcards
        if job.rule.name != "train":  # a pack or a related system's job: its request
            needed += (job.resources.get("gpu") or 0) * (job.resources.get("runtime") or 0)
            continue
        run = experiment.run_config(config, SETTINGS, w.task, w.variant, w.scale, w.setting, int(w.seed))
        needed += estimate.estimated_seconds(run, task_data(w.task), gpu) / 60
    return needed, f"the LRA runs' FLOPs estimate on {gpu}, the other jobs' requests; {asked:,.0f} requested"


def submit_through_retry():
    """The plugin's sbatch calls go through pdelra.planning.sbatch_retry (a shim first on PATH): a refusal
    (submit limit, an unanswering slurmctld) is waited out and logged, not counted as a failed attempt."""
    from pdelra.planning import sbatch_retry

    cluster = Path(RESULTS, "cluster")
    sbatch_retry.submit_through_shim(cluster / "bin", sys.executable, cluster / "refused.log")


# ----------------------------------------------------------------------------------------------------
# Finished runs and their locks (pdelra.training.finished, pdelra.locking). A trainer keeps a finished
# run's final files in CKPT_DIR/finished/ until Snakemake has stored its outputs, so a job (or a pack member)
# killed after its run finished is restored by the retry, not retrained. Each start, success and error of
# the workflow clears the kept copies of the runs whose jobs are complete. At the start it also says which
# lock the training jobs take in the checkpoint folders (flock, or lock files where flock is missing).
# ----------------------------------------------------------------------------------------------------
def clear_finished_runs():
    """Remove CKPT_DIR/finished/ of every run whose metrics.json is the output of a complete job: one that
    was not to be run, or that finished in this session (its outputs are stored)."""
    from pdelra.training import finished

    dag, cleared = workflow.dag, 0
    for job in dag.jobs:
        if not dag.noneedrun_finished(job):
            continue
        for path in job.output:
            out = Path(path)
            if out.name == "metrics.json" and "runs" in out.parts:
                cleared += finished.clear(finished.checkpoint_dir_of(out.parent))
    if cleared:
        print(f"Removed the kept final state of {cleared} stored run(s) from their checkpoint folders")


def checkpoint_lock_preflight():
    """Say which lock the training jobs will take in the checkpoint folders (probed where they are)."""
    from pdelra.training import finished
    from pdelra.locking import LockError, lock_mode

    rules = {job.rule for job in workflow.dag.needrun_jobs()}
    patterns = [rule.params.get("checkpoints") for rule in rules]
    roots = {finished.checkpoint_root(Path(p)) for p in patterns if isinstance(p, str) and "checkpoints" in p}
    for root in sorted(roots):
        try:
            mode = lock_mode(root)
        except (OSError, LockError) as exc:  # the training jobs could not lock or write there either
            print(f"Cannot use {root} for checkpoints (nothing was started): {exc}", file=sys.stderr)
            sys.exit(1)
        print(f"Checkpoint lock in {root}: {mode}", file=sys.stderr)



# ----------------------------------------------------------------------------------------------------
# A killed Snakemake's lock (pdelra.planning.stale_lock): the planning Snakemake of a run removes it where
# its owner is provably gone (this host, its pid no Snakemake now), or stops in one line saying what to run.
# A dry run or `--unlock` itself is left to Snakemake. At the start the run records itself as the owner.
# ----------------------------------------------------------------------------------------------------
def release_a_dead_runs_lock():
    from pdelra.planning import stale_lock

    verdict = stale_lock.examine(Path.cwd(), sys.argv[1:])
    if verdict.action == "unlocked":
        print(verdict.line, file=sys.stderr)
    elif verdict.action == "refuse" and not stale_lock.dry_or_unlock(sys.argv[1:]):
        print(f"Cannot start (nothing was started): {verdict.line}", file=sys.stderr)
        sys.exit(1)


def record_the_owner():
    from pdelra.planning import stale_lock

    stale_lock.write_owner(Path.cwd(), os.getpid())


if workflow.is_main_process:
    release_a_dead_runs_lock()


onstart:
    record_the_owner()
    check_cluster()
    checkpoint_lock_preflight()
    clear_finished_runs()


onsuccess:
    clear_finished_runs()


onerror:
    clear_finished_runs()
