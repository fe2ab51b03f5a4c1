"""What a Slurm job asks for, and whether the site can give it: the workflow's resource arithmetic and the
preflight probe it runs before any local work (workflow/rules/hooks.smk).

Runtimes. A job's `runtime` (minutes, Slurm's `-t`) is the configured one times the attempt, never more than
`cluster.max_runtime`. A pack of K runs sharing one GPU asks for K times one run's time divided by
`pack_gain`, the runs-per-hour gain `pdelra bench pack` measures (1.0 until measured: the runs time-slice
the card, so K of them take K times one run's time).

Preflight (`site_problems`). With the Slurm executor, before anything runs: the profile's placeholders are
gone; `sinfo` (slurmctld) and `sacct` (slurmdbd, when it is the status command) answer; every partition the
jobs use exists, its MaxTime holds `cluster.max_runtime`, and its preemption requeues. The plugin takes a
job in state PREEMPTED for one still running (it leaves requeueing to Slurm), so on a partition whose
PreemptMode is CANCEL a preempted job is waited on forever.

Limits (`account_limits`, from `sacctmgr`): the user's associations (MaxSubmitJobs, MaxJobs, MaxWall) and the
QOS the jobs use (MaxSubmitJobsPerUser, MaxJobsPerUser, MaxWall). sbatch refuses a job past the submit limit,
and the plugin counts that refusal as a failed attempt (three in seconds, then the job stays failed until
Snakemake is restarted), so the run's concurrent jobs are capped below it, a few left for the user's other
jobs; a refusal that still comes is waited out by the run's sbatch shim (pdelra.planning.sbatch_retry). A
`cluster.max_runtime` above a QOS's or association's MaxWall stops the run: such a job pends forever. Past
MaxJobs a job only pends (it keeps its place in the queue), so MaxJobs is reported, not capped at. The
account's shared limits (GrpSubmitJobs, GrpJobs, GrpTRESMins; pdelra.planning.grp_limits) are read with what
is in use now: what is free of a GrpSubmitJobs caps the run as a MaxSubmitJobs does, and the GPU-minute
budget is set against what the campaign asks for. All of it applies only where slurmctld enforces limits
(AccountingStorageEnforce has `limits`): elsewhere a cap would slow the run for nothing.
"""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The grid's arithmetic of a job's time (a job's first request, the cap) lives with the jobs themselves.
from pdelra.parts import DEFAULT_MAX_RUNTIME
from pdelra.planning import grp_limits
from pdelra.planning.experiment import merged, pack_minutes

# Site options a job may carry from the config (config/README.md), read by snakemake-executor-plugin-slurm
# 2.x: `-p`, `-C`, the model in `--gpus=MODEL:N`, `--qos=`, and free sbatch flags (the plugin refuses flags
# it sets itself, e.g. --gres or --time, in slurm_extra).
SITE_KEYS = ("slurm_partition", "constraint", "gpu_model", "qos", "slurm_extra")
PLACEHOLDER = re.compile(r"SET-YOUR-[A-Z-]+")


def shared_site_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The site options of `defaults.resources`: every GPU rule's (the LRA tasks', the LM's, the official
    CTA grid's), under the keys its own resources section sets. A site's partition, GPU model or qos is the
    site's, not one experiment's: set once, it must not leave the related systems' jobs on the profile's
    default partition without a GPU model."""
    resources = (config.get("defaults") or {}).get("resources") or {}
    return {key: resources[key] for key in SITE_KEYS if resources.get(key) is not None}


def cpu_partition_warning(
    jobs: Iterable[tuple[str, int, str | None]], cpu_partition: str | None
) -> str | None:
    """One line when, without `cluster.cpu_partition`, the CPU-only jobs among `jobs` (rule, GPUs, partition;
    None: the profile's default) would queue on a partition the GPU jobs use: there they take a GPU node's
    cores and memory while its GPUs idle, and wait behind the GPU queue. None otherwise."""
    if cpu_partition:
        return None
    jobs = list(jobs)
    gpu_partitions = {partition for _, gpus, partition in jobs if gpus}
    on_gpu = {
        (rule, str(partition)) for rule, gpus, partition in jobs if not gpus and partition in gpu_partitions
    }
    if not on_gpu:
        return None
    rules, partitions = (sorted({pair[i] for pair in on_gpu}) for i in (0, 1))
    return (
        f"the CPU-only jobs of {', '.join(rules)} go to the GPU jobs' partition {', '.join(partitions)}: "
        "name a CPU partition as cluster.cpu_partition in the config"
    )


PROBE_TIMEOUT_S = 30
# sacctmgr's parsable (-P: '|' between fields) answers, in the order these formats name the fields.
ASSOC_FIELDS = ("account", "partition", "qos", "defaultqos", "maxjobs", "maxsubmit", "maxwall")
QOS_FIELDS = ("name", "maxwall", "maxjobspu", "maxsubmitpu")
QOS_PROBE = ["sacctmgr", "-nP", "show", "qos", f"format={','.join(QOS_FIELDS)}"]


def assoc_probe(user: str) -> list[str]:
    """The user's associations, one line each, fields as ASSOC_FIELDS."""
    return ["sacctmgr", "-nP", "show", "assoc", "where", f"user={user}", f"format={','.join(ASSOC_FIELDS)}"]


# Jobs of the user's that the run leaves room for under a submit limit (interactive sessions, other runs):
# a tenth of the limit, at least 2.
def submit_headroom(limit: int) -> int:
    return max(2, limit // 10)


SACCT_HINT = "; without Slurm accounting, use --slurm-status-command squeue"


# ---------------------------------------------------------------------------------------------------------
# Runtimes
# ---------------------------------------------------------------------------------------------------------
def attempt_runtime(minutes: float, attempt: int, max_runtime: int) -> int:
    """Minutes for one attempt: `minutes` times the attempt, capped at `max_runtime`.

    A retry resumes from the run's checkpoint, so it needs at most what is left, never more than the first
    attempt had. The multiplier stays anyway, under the cap: a time-out means the estimate was short, and
    with the profile's two retries a growing request gives an underestimated run 1 + 2 + 3 = 6 times its
    estimate in three submissions instead of 3 times, while a finished job only bills the time it used. The
    cap keeps every attempt within the partition (a request above its MaxTime pends forever)."""
    return max(1, min(math.ceil(minutes * attempt), max_runtime))


def pack_runtime(minutes: float, k: int, gain: float, attempt: int, max_runtime: int) -> int:
    """Minutes for one attempt of a pack: `pack_minutes` times the attempt, capped at `max_runtime`."""
    return attempt_runtime(pack_minutes(minutes, k, gain), attempt, max_runtime)


def runtime_warnings(config: Mapping[str, Any]) -> list[str]:
    """One line per LRA task whose first attempt would already be cut to `cluster.max_runtime`: a single
    run configured longer, or a pack whose K x runtime / pack_gain exceeds it (with the K that fits)."""
    cap = config.get("cluster", {}).get("max_runtime", DEFAULT_MAX_RUNTIME)
    lines = []
    for task in sorted(config["tasks"]):
        resources = merged(config, "resources", task)
        runtime, k = resources["runtime"], resources.get("pack", 1)
        gain = resources.get("pack_gain", 1.0)
        if runtime > cap:
            lines.append(
                f"tasks.{task}.resources.runtime {runtime} min is above cluster.max_runtime {cap}: each "
                f"attempt asks for {cap} and resumes from its checkpoint"
            )
        elif k > 1 and pack_minutes(runtime, k, gain) > cap:
            fits = max(1, math.floor(cap * gain / runtime))
            advice = f"use pack: {fits} or less" if fits > 1 else "use pack: 1 (a run a job)"
            lines.append(
                f"tasks.{task}.resources.pack {k}: a pack needs {k} x {runtime} min / pack_gain {gain:g} = "
                f"{pack_minutes(runtime, k, gain)} min, above cluster.max_runtime {cap}: each attempt asks "
                f"for {cap} and resumes, and the retries may not finish it; {advice}"
            )
    return lines


# ---------------------------------------------------------------------------------------------------------
# Slurm's answers
# ---------------------------------------------------------------------------------------------------------
def slurm_minutes(text: str) -> float | None:
    """Minutes of a Slurm time ('2-00:00:00', '12:00:00', '30:00', '90', '1-12'); None for UNLIMITED,
    INFINITE or anything unreadable."""
    text = text.strip()
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not match:
        return None
    days, first, second, third = match.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
        return int(days) * 1440 + hours * 60 + minutes + seconds / 60
    if third is not None:  # H:M:S
        return int(first) * 60 + int(second) + int(third) / 60
    if second is not None:  # M:S
        return int(first) + int(second) / 60
    return float(first)  # M


def parse_partitions(text: str) -> dict[str, dict[str, str]]:
    """`scontrol show partition -o` (one line per partition, Key=Value fields) as {name: {key: value}}."""
    partitions = {}
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "PartitionName" in fields:
            partitions[fields["PartitionName"]] = fields
    return partitions


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config` ('Key = Value' lines) as {key: value}."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"(?m)^(\w+)\s*=\s*(.*)$", text)}


def default_partition(sinfo: str) -> str | None:
    """The partition `sinfo --format=%P` marks with '*' (where a job without -p goes)."""
    return next((p.rstrip("*") for p in sinfo.split() if p.endswith("*")), None)


@dataclass
class Preflight:
    """What the probe found: `problems` stop the run (nothing started); `warnings` and `notes` are printed;
    `max_jobs`, when set, is the most jobs the run may keep queued or running at once (a submit limit,
    `cap_reason`)."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    max_jobs: int | None = None
    cap_reason: str = ""


def parse_rows(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """sacctmgr's `-nP` lines ('|' between fields, as many as `fields`) as dicts; shorter lines are
    skipped (a message, not a row)."""
    rows = []
    for line in text.splitlines():
        values = [value.strip() for value in line.split("|")]
        if len(values) >= len(fields):
            rows.append(dict(zip(fields, values, strict=False)))
    return rows


def _count(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


@dataclass(frozen=True)
class Limit:
    """One limit sacctmgr reports: kind 'submit' (jobs queued or running), 'jobs' (running) or 'wall'
    (minutes a job), its `value`, the Slurm field and where it is set ('QOS long', 'association pdelra')."""

    kind: str
    value: float
    name: str
    source: str


def account_limits(
    assoc: str,
    qos: str,
    accounts: Iterable[str],
    partitions: Iterable[str | None],
    qos_used: Iterable[str | None],
) -> list[Limit]:
    """The limits that apply to the jobs, from sacctmgr's answers (`assoc`: the user's associations, fields
    ASSOC_FIELDS; `qos`: every QOS, fields QOS_FIELDS). accounts, partitions: those the jobs name (none, or
    None: any association of the user's); qos_used: each job's QOS (None: its association's default QOS)."""
    wanted = {a.lower() for a in accounts if a}
    named = {p for names in partitions if names for p in names.split(",")}
    rows = parse_rows(assoc, ASSOC_FIELDS)
    rows = [r for r in rows if not wanted or r["account"].lower() in wanted] or rows
    rows = [r for r in rows if not r["partition"] or not named or r["partition"] in named]
    limits = []
    for row in rows:
        source = f"association {row['account']}" + (
            f" (partition {row['partition']})" if row["partition"] else ""
        )
        for kind, key, name in (("submit", "maxsubmit", "MaxSubmitJobs"), ("jobs", "maxjobs", "MaxJobs")):
            if (value := _count(row[key])) is not None:
                limits.append(Limit(kind, value, name, source))
        if (minutes := slurm_minutes(row["maxwall"])) is not None:
            limits.append(Limit("wall", minutes, f"MaxWall {row['maxwall']}", source))
    used = qos_in_use(rows, qos_used)
    for row in parse_rows(qos, QOS_FIELDS):
        if row["name"] not in used:
            continue
        source = f"QOS {row['name']}"
        for kind, key, field_name in (
            ("submit", "maxsubmitpu", "MaxSubmitJobsPerUser"),
            ("jobs", "maxjobspu", "MaxJobsPerUser"),
        ):
            if (value := _count(row[key])) is not None:
                limits.append(Limit(kind, value, field_name, source))
        if (minutes := slurm_minutes(row["maxwall"])) is not None:
            limits.append(Limit("wall", minutes, f"MaxWall {row['maxwall']}", source))
    return sorted(limits, key=lambda limit: (limit.kind, limit.value, limit.source))


def qos_in_use(rows: Iterable[Mapping[str, str]], qos_used: Iterable[str | None]) -> set[str]:
    """The QOS names the jobs run under: those they name, and for a job naming none (None) the default QOS of
    the association rows (ASSOC_FIELDS; one allowed QOS is the default too)."""
    rows = list(rows)
    used = set()
    for name in set(qos_used) or {None}:  # no job named: the default QOS
        if name:
            used.add(name)
            continue
        for row in rows:
            allowed = [q for q in row["qos"].split(",") if q]
            default = row["defaultqos"] or (allowed[0] if len(allowed) == 1 else "")
            if default:
                used.add(default)
    return used


def shared_limits(
    assoc: str, assoc_mgr: str, user: str, accounts: Iterable[str], qos_used: Iterable[str | None]
) -> tuple[list[Limit], list[grp_limits.GrpLimit]]:
    """The account's and QOS's shared limits (pdelra.planning.grp_limits) that bind the user's jobs, from
    `scontrol show assoc_mgr flags=assoc,qos`: GrpSubmitJobs and GrpJobs as Limits of what is free now (the
    limit less the jobs in it, colleagues' included), and the GPU-minute budgets (GrpTRESMins gres/gpu)."""
    accounts = list(accounts)
    rows = parse_rows(assoc, ASSOC_FIELDS)
    wanted = {a.lower() for a in accounts if a}
    rows = [r for r in rows if not wanted or r["account"].lower() in wanted] or rows
    records = grp_limits.applying(
        grp_limits.parse_assoc_mgr(assoc_mgr), user, accounts, qos_in_use(rows, qos_used)
    )
    limits, budgets = [], []
    for found in grp_limits.group_limits(records):
        if found.kind == "gpu_minutes":
            budgets.append(found)
            continue
        value = found.left if found.kind == "submit" else found.limit  # a submit limit: what is free now
        limits.append(Limit(found.kind, value, found.name, f"{found.source} with {found.used} in use now"))
    return limits, budgets


def enforced(settings: Mapping[str, str]) -> bool:
    """Whether slurmctld applies the associations' and QOS's limits: `AccountingStorageEnforce` (scontrol
    show config) contains `limits` or `safe` (which implies it). Without it sbatch refuses nothing over a
    submit limit and no MaxWall holds a job, so the run is not capped for them."""
    value = settings.get("AccountingStorageEnforce", "").lower()
    return any(word in value.split(",") for word in ("limits", "safe"))


def limit_decisions(limits: Iterable[Limit], jobs: int | None, max_runtime: int) -> Preflight:
    """What the limits mean for a run of at most `jobs` concurrent jobs (None: unlimited) whose jobs ask
    for up to `max_runtime` minutes: a problem per MaxWall below it (such a job pends forever), and
    `max_jobs`, the cap below the lowest submit limit (headroom left), when `jobs` is above it."""
    report = Preflight()
    limits = list(limits)
    for limit in dict.fromkeys(limits):
        if limit.kind == "wall" and limit.value < max_runtime:
            reason = (
                "QOSMaxWallDurationPerJobLimit"
                if limit.source.startswith("QOS")
                else "AssocMaxWallDurationPerJobLimit"
            )
            report.problems.append(
                f"{limit.source} allows {limit.value:g} min a job ({limit.name}), less than "
                f"cluster.max_runtime {max_runtime}: a job asking for more pends forever ({reason}); set "
                f"cluster.max_runtime: {math.floor(limit.value)} in the config"
            )
    submit = min(
        (limit for limit in limits if limit.kind == "submit"), key=lambda limit: limit.value, default=None
    )
    if submit is not None:
        headroom = submit_headroom(int(submit.value))
        cap = max(1, int(submit.value) - headroom)
        if jobs is None or jobs > cap:
            report.max_jobs = cap
            report.cap_reason = (
                f"{submit.source} takes at most {submit.value:g} of your jobs queued or running "
                f"({submit.name}), and sbatch refuses more (each refusal costs a job an attempt); {headroom} "
                "of them are left for your other jobs"
            )
            report.warnings.append(cap_line(report, jobs, lowered=True))
    running = min(
        (limit for limit in limits if limit.kind == "jobs"), key=lambda limit: limit.value, default=None
    )
    if running is not None and (report.max_jobs or jobs or math.inf) > running.value:
        reason = "QOSMaxJobsPerUserLimit" if running.source.startswith("QOS") else "AssocMaxJobsLimit"
        report.notes.append(
            f"{running.source} runs at most {running.value:g} of your jobs at once ({running.name}); the "
            f"others pend in the queue (reason {reason}) until one ends"
        )
    return report


def cap_line(report: Preflight, jobs: int | None, lowered: bool) -> str:
    """The line about `report.max_jobs`: a warning when the run's concurrent jobs were lowered to it, a
    problem (what to pass) when they could not be."""
    cap, limit = report.max_jobs, report.cap_reason
    if not lowered:
        return f"{limit}: run with --jobs {cap} or less (or set jobs: {cap} in the profile)"
    return (
        f"{limit}: this run keeps at most {cap} jobs at once (jobs: {'unlimited' if jobs is None else jobs} "
        f"lowered); set jobs: {cap} in the profile (or --jobs {cap}), or less if your other jobs need more"
    )


# ---------------------------------------------------------------------------------------------------------
# Preflight
# ---------------------------------------------------------------------------------------------------------
def _run_probes(
    commands: Sequence[Sequence[str]], timeout: float = PROBE_TIMEOUT_S
) -> list[tuple[str | None, str | None]]:
    """Run the commands side by side; per command (stdout, None) or (None, why it failed)."""
    running: list[tuple[Sequence[str], subprocess.Popen[str] | None]] = []
    for command in commands:
        try:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            running.append((command, proc))
        except FileNotFoundError:
            running.append((command, None))
    results: list[tuple[str | None, str | None]] = []
    for command, proc in running:
        if proc is None:
            results.append((None, f"`{command[0]}` is not installed here"))
            continue
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            results.append((None, f"no answer within {timeout:g} s"))
            continue
        if proc.returncode:
            detail = (err or out).strip().splitlines()
            results.append((None, detail[-1] if detail else f"exit {proc.returncode}"))
        else:
            results.append((out, None))
    return results


def _apply_limits(
    report: Preflight,
    limits: list[Limit],
    budgets: list[grp_limits.GrpLimit],
    settings: Mapping[str, str],
    jobs: int | None,
    max_runtime: int,
    gpu_minutes: tuple[float, str] | None,
) -> None:
    """Add to `report` what the limits mean (`limit_decisions`) where slurmctld enforces them; one note
    naming them where it does not. Each GPU-minute budget is set against `gpu_minutes`: a note, a warning
    where the campaign needs more than is left."""
    if not enforced(settings):
        if limits or budgets:
            names = sorted({f"{limit.name} ({limit.source})" for limit in [*limits, *budgets]})
            report.notes.append(
                f"limits are set ({'; '.join(names)}) but this cluster does not enforce them "
                f"(AccountingStorageEnforce={settings.get('AccountingStorageEnforce') or 'none'}, without "
                "`limits`): the run's jobs are not capped for them"
            )
        return
    decided = limit_decisions(limits, jobs, max_runtime)
    report.problems += decided.problems
    report.warnings += decided.warnings
    report.notes += decided.notes
    report.max_jobs, report.cap_reason = decided.max_jobs, decided.cap_reason
    for budget in budgets:
        needed, what = gpu_minutes if gpu_minutes is not None else (0.0, "not counted")
        line = grp_limits.budget_line(budget, needed, what)
        (report.warnings if needed > budget.left else report.notes).append(line)


def site_problems(
    partitions: Mapping[str | None, Iterable[tuple[str, int]]],
    given: Iterable[str],
    status_command: str,
    max_runtime: int,
    run: Callable[[Sequence[Sequence[str]]], list[tuple[str | None, str | None]]] = _run_probes,
    *,
    user: str | None = None,
    accounts: Iterable[str] = (),
    qos: Iterable[str | None] = (),
    jobs: int | None = None,
    gpu_minutes: tuple[float, str] | None = None,
) -> Preflight:
    """Check the site before a run.

    partitions: {partition (None: the site's default) -> [(rule, first-attempt runtime in minutes), ...]}
        for the jobs Snakemake will submit. given: the partition and account values the jobs carry (for the
        profile's placeholders). status_command: the plugin's (sacct or squeue). user (None: no limits
        read), accounts, qos (each job's; None: the association's default), jobs (the run's concurrent jobs,
        None: unlimited): for the account's and QOS's limits (`account_limits`, `limit_decisions`) and their
        shared ones (`shared_limits`: GrpSubmitJobs, GrpJobs, GrpTRESMins); sacctmgr failing or missing is a
        warning. The limits are applied (the cap, the MaxWall stop) only where slurmctld enforces them
        (`enforced`); elsewhere they are one note. gpu_minutes: (the campaign's GPU-minutes, what they are)
        to set against each GrpTRESMins budget of gres/gpu."""
    report = Preflight()
    placeholders = sorted(set(PLACEHOLDER.findall(" ".join(given))))
    if placeholders:
        report.problems.append(
            f"the Slurm profile's placeholders {', '.join(placeholders)} are still in default-resources: set "
            "slurm_partition and slurm_account in profiles/slurm/profile.yaml (or pass --default-resources "
            "slurm_partition=... slurm_account=...)"
        )
    probes = [
        ["sinfo", "--noheader", "--format=%P"],  # answers only when slurmctld does
        ["scontrol", "show", "partition", "-o"],
        ["scontrol", "show", "config"],
    ]
    if status_command == "sacct":
        probes.append(["sacct", "--noheader", "-X", "--starttime=now", "--format=JobID"])  # slurmdbd
    limit_probes = [assoc_probe(user), QOS_PROBE, grp_limits.ASSOC_MGR_PROBE] if user else []
    answers = run(probes + limit_probes)
    answers, limit_answers = answers[: len(probes)], answers[len(probes) :]
    conf = answers[2][0]
    if limit_answers:
        accounts, qos = list(accounts), list(qos)
        failures = [
            f"`{' '.join(p[:4])}` failed ({why})"
            for p, (_, why) in zip(limit_probes[:2], limit_answers[:2], strict=True)
            if why
        ]
        mgr_text, mgr_failure = limit_answers[2]
        if failures:
            report.warnings.append(
                f"the account's and QOS's limits are unread ({'; '.join(failures)}): keep the profile's jobs "
                "below your MaxSubmitJobs and cluster.max_runtime within your QOS's MaxWall yourself"
            )
        else:
            assoc_text, qos_text = (answer or "" for answer, _ in limit_answers[:2])
            found = account_limits(assoc_text, qos_text, accounts, partitions, qos)
            shared, budgets = shared_limits(assoc_text, mgr_text or "", user or "", accounts, qos)
            if mgr_failure:  # a site may hide the association manager (PrivateData): the rest still holds
                report.notes.append(
                    f"the account's shared limits (GrpSubmitJobs, GrpJobs, GrpTRESMins) are unread "
                    f"(`{' '.join(grp_limits.ASSOC_MGR_PROBE)}` failed: {mgr_failure}); see `sshare -l`"
                )
            _apply_limits(report, [*found, *shared], budgets, parse_config(conf or ""), jobs, max_runtime,
                          gpu_minutes)  # fmt: skip
    for probe, (_, failure) in zip(probes, answers, strict=True):
        if failure and "not installed" in failure:
            report.problems.append(f"{failure}: run Snakemake on a Slurm login node")
        elif failure:
            hint = SACCT_HINT if probe[0] == "sacct" else ""
            command = " ".join(probe)
            report.problems.append(f"`{command}` failed ({failure}): no answer from the cluster{hint}")
    sinfo, shown = (answer for answer, _ in answers[:2])
    if sinfo is None or shown is None or placeholders:
        return report  # nothing more to compare against
    known = parse_partitions(shown)
    settings = parse_config(conf or "")
    cluster_mode, preempt_type = settings.get("PreemptMode", ""), settings.get("PreemptType", "")
    default = default_partition(sinfo)
    # A job may name several partitions ("gpu,gpu-long"): Slurm takes the first that can run it; check each.
    by_partition: dict[str | None, list[tuple[str, int]]] = {}
    for names, jobs in partitions.items():
        for name in names.split(",") if names else [None]:
            by_partition.setdefault(name, []).extend(jobs)
    for name, jobs in by_partition.items():
        partition = name or default
        label = f"partition {partition}" + ("" if name else " (the site's default)")
        if partition is None or partition not in known:
            report.problems.append(
                f"partition {name!r} (rules {', '.join(sorted({r for r, _ in jobs}))}) is not one of this "
                f"cluster's: {', '.join(sorted(known)) or 'none listed'}"
            )
            continue
        fields = known[partition]
        limit = slurm_minutes(fields.get("MaxTime", "UNLIMITED"))
        if limit is not None and limit < max_runtime:
            longest = max((minutes for _, minutes in jobs), default=0)
            report.problems.append(
                f"{label} allows {limit:g} min (MaxTime {fields['MaxTime']}), less than cluster.max_runtime "
                f"{max_runtime} (longest first attempt there: {longest} min): a job asking for more pends "
                f"forever (PartitionTimeLimit); set cluster.max_runtime: {math.floor(limit)} in the config"
            )
        mode = fields.get("PreemptMode") or cluster_mode
        preempts = preempt_type not in ("", "preempt/none") and mode.upper() not in ("", "OFF")
        if preempts and "REQUEUE" not in mode.upper():
            report.warnings.append(
                f"{label} preempts with PreemptMode={mode}, not REQUEUE: a job it cancels ends PREEMPTED, "
                "which the Slurm plugin takes for still running, so Snakemake waits for it forever (a "
                "suspended job resumes, holding its node meanwhile). If `sacct` shows PREEMPTED, stop "
                "Snakemake (Ctrl-C) and run it again: the run resumes from its checkpoint. Better: a "
                "partition or QOS that requeues (PreemptMode=REQUEUE)"
            )
    return report
