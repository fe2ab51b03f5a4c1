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
"""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The grid's arithmetic of a job's time (a job's first request, the cap) lives with the jobs themselves.
from pdelra.planning.experiment import DEFAULT_MAX_RUNTIME, merged, pack_minutes

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


# ---------------------------------------------------------------------------------------------------------
# Preflight
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Preflight:
    """What the probe found: `problems` stop the run (nothing started); `warnings` are printed."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


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


def site_problems(
    partitions: Mapping[str | None, Iterable[tuple[str, int]]],
    given: Iterable[str],
    status_command: str,
    max_runtime: int,
    run: Callable[[Sequence[Sequence[str]]], list[tuple[str | None, str | None]]] = _run_probes,
) -> Preflight:
    """Check the site before a run.

    partitions: {partition (None: the site's default) -> [(rule, first-attempt runtime in minutes), ...]}
        for the jobs Snakemake will submit. given: the partition and account values the jobs carry (for the
        profile's placeholders). status_command: the plugin's (sacct or squeue)."""
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
    answers = run(probes)
    for probe, (_, failure) in zip(probes, answers, strict=True):
        if failure and "not installed" in failure:
            report.problems.append(f"{failure}: run Snakemake on a Slurm login node")
        elif failure:
            hint = SACCT_HINT if probe[0] == "sacct" else ""
            command = " ".join(probe)
            report.problems.append(f"`{command}` failed ({failure}): no answer from the cluster{hint}")
    sinfo, shown, conf = (answer for answer, _ in answers[:3])
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
