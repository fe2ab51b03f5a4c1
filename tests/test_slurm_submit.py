"""What the Slurm profile submits: `sbatch` lines recorded by stub Slurm commands on PATH (no cluster).

The stubs (written into tmp_path) log every call. `sbatch` records its arguments and runs the job's command
(the plugin's `snakemake --executor slurm-jobstep ...` line, whose `srun` stub runs its step in place) before
it answers, or ends it unrun where the test asks (sacct: $STUB_UNRUN_STATE, default COMPLETED); `sacct`
reports each job's end state; `squeue` lists the ids in $STUB_LIVE as live; `sinfo`, `scontrol`,
`sacctmgr` answer as a small site with a GPU partition (the default) and a CPU partition would
(`sacctmgr`: the account, and the association's and QOS's limits). The preflight (pdelra.planning.slurm_site)
is checked against canned Slurm answers.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, load_config, make_workspace, snakemake_command, tool_env

from pdelra import runs as run_layout
from pdelra.cta_official import grid as cta_grid
from pdelra.planning import experiment, gpu_models, slurm_site

ACCOUNT = "pdelra"
MAX_RUNTIME = 20
ATTEMPTS = 3  # the profile's retries: 2
# Which submissions end unrun (the rest run): every attempt of the pack and the diagnosis, whose requests are
# all the test needs; the first two of the training job, whose third runs (diagnose needs its outputs).
UNRUN = {"train": ATTEMPTS - 1, "train_pack": ATTEMPTS, "diagnose": ATTEMPTS}

SBATCH = r"""#!/usr/bin/env python3
# sbatch stub: record the call and answer a job id. A rule's first STUB_UNRUN[rule] submissions end at once
# without running (sacct: $STUB_UNRUN_STATE or COMPLETED, no outputs); any other job runs here, now.
import json, os, pathlib, subprocess, sys

state = pathlib.Path(os.environ["STUB_SLURM"])
args = sys.argv[1:]
(state / "jobs").mkdir(exist_ok=True)
# A site at its submit limit: the first $STUB_REFUSE submissions are refused, as slurmctld words it.
with open(state / "refused", "a+") as f:
    f.seek(0)
    if len(f.read()) < int(os.environ.get("STUB_REFUSE", 0)):
        f.write("x")
        sys.exit("sbatch: error: QOSMaxSubmitJobPerUserLimit\n"
                 "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy"
                 " (job submit limit, user's size and/or time limits)")
job_id = 1001
while True:  # claim the next free id (submissions may come side by side)
    try:
        os.close(os.open(state / "jobs" / str(job_id), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        break
    except FileExistsError:
        job_id += 1
comment = args[args.index("--comment") + 1]
rule = comment[len("rule_"):].split("_wildcards_")[0]
# When the plugin called sbatch: the start of our caller, the workflow's sbatch shim (clock ticks since boot).
# The plugin submits from two threads, so a call whose shim starts slowly is recorded after later calls.
try:
    called = int(pathlib.Path(f"/proc/{os.getppid()}/stat").read_text().rsplit(")", 1)[1].split()[19])
except (OSError, IndexError, ValueError):
    called = 0
with open(state / "sbatch.jsonl", "a") as f:
    record = {"id": job_id, "rule": rule, "comment": comment, "argv": args, "called": called}
    f.write(json.dumps(record) + "\n")
lines = (state / "sbatch.jsonl").read_text().splitlines()
earlier = sum(json.loads(line)["comment"] == comment for line in lines) - 1
unrun = dict(item.split(":") for item in os.environ.get("STUB_UNRUN", "").split())
if earlier < int(unrun.get(rule, 0)):
    outcome = os.environ.get("STUB_UNRUN_STATE", "COMPLETED")
else:
    wrap = next(a[len("--wrap="):] for a in args if a.startswith("--wrap="))
    cpus = next((a.split("=")[1] for a in args if a.startswith("--cpus-per-task=")), "1")
    log = args[args.index("--output") + 1].replace("%j", str(job_id))
    env = {**os.environ, "SLURM_JOB_ID": str(job_id), "SLURM_CPUS_PER_TASK": cpus}
    # A site of named nodes ($STUB_NODES 'NODE:FEATURE ...'): the job runs on the first whose feature its -C
    # allows and its --exclude does not name; on a node of $STUB_NO_CUDA it finds no GPU, on the others the
    # CPU stands in for the GPU (PDELRA_ALLOW_CPU=1).
    if os.environ.get("STUB_NODES"):
        constraint = next((args[i + 1] for i, a in enumerate(args) if a == "-C"), None)
        excluded = {n for a in args if a.startswith("--exclude=") for n in a.split("=", 1)[1].split(",")}
        node = next(name for name, feature in (item.split(":") for item in os.environ["STUB_NODES"].split())
                    if name not in excluded and (constraint is None or feature in constraint.split("|")))
        env["SLURMD_NODENAME"] = node
        env.pop("PDELRA_ALLOW_CPU", None)
        if node not in os.environ.get("STUB_NO_CUDA", "").split():
            env["PDELRA_ALLOW_CPU"] = "1"
        with open(state / "nodes.log", "a") as f:
            f.write(f"{job_id} {rule} {node}\n")
    with open(log, "w") as out:
        done = subprocess.run(["sh", "-c", wrap], env=env, stdout=out, stderr=subprocess.STDOUT)
    outcome = "COMPLETED" if done.returncode == 0 else "FAILED"
(state / "jobs" / str(job_id)).write_text(outcome)
print(job_id)
"""

SACCT = r"""#!/usr/bin/env python3
import os, pathlib, sys
state = pathlib.Path(os.environ["STUB_SLURM"])
with open(state / "calls.log", "a") as f:
    f.write("sacct " + " ".join(sys.argv[1:]) + "\n")
if "--format=JobIdRaw,State" in sys.argv:
    for job in sorted((state / "jobs").glob("*")):
        print(f"{job.name}|{job.read_text() or 'RUNNING'}")
elif "nodelist%-256" in sys.argv:
    print("node1")
"""

# scontrol show partition -o / show config, as a site with a 2-day GPU and a 4-hour CPU partition answers.
PARTITIONS = (
    "PartitionName=gpu AllowGroups=ALL Default=YES MaxTime=2-00:00:00 PreemptMode=OFF State=UP TotalCPUs=64\n"
    "PartitionName=cpu AllowGroups=ALL Default=NO MaxTime=04:00:00 PreemptMode=OFF State=UP TotalCPUs=256\n"
)
CONFIG = (
    "AccountingStorageEnforce = associations,limits,qos\nMinJobAge = 300 sec\nPreemptMode = OFF\n"
    "PreemptType = preempt/none\n"
)
# The association manager's answer (scontrol show assoc_mgr flags=assoc,qos): no shared limit set.
ASSOC_MGR = (
    f"Association Records\n\nClusterName=site Account={ACCOUNT} UserName= Partition= Priority=0 ID=3\n"
    "    ParentAccount=root(1) Lft=2 DefAssoc=No\n    GrpJobs=N(0) GrpJobsAccrue=N(0)\n"
    "    GrpSubmitJobs=N(0) GrpWall=N(0.00)\n    GrpTRESMins=cpu=N(0),mem=N(0),gres/gpu=N(0)\n"
)


# sacctmgr -nP show assoc / show qos (fields as slurm_site.ASSOC_FIELDS, QOS_FIELDS): no limits but a day's
# MaxWall on the QOS long.
ASSOC = f"{ACCOUNT}||normal,long|normal|||\n"
QOS = "normal|||\nlong|1-00:00:00||\n"


def _sacctmgr_stub(assoc: str, qos: str) -> str:
    """The account for the plugin's `sacctmgr list user`; the limits for the preflight's."""
    return (
        '#!/bin/sh\necho "sacctmgr $*" >> "$STUB_SLURM/calls.log"\ncase " $* " in\n'
        f"  *' assoc '*) cat <<'EOF'\n{assoc}EOF\n  ;;\n  *' qos '*) cat <<'EOF'\n{qos}EOF\n  ;;\n"
        f"  *) echo {ACCOUNT} ;;\nesac\n"
    )


def _plain_stub(name: str, answer: str) -> str:
    return f'#!/bin/sh\necho "{name} $*" >> "$STUB_SLURM/calls.log"\n' + (
        f"cat <<'EOF'\n{answer}EOF\n" if answer else ""
    )


def _write_stubs(
    bin_dir: Path,
    partitions: str = PARTITIONS,
    config: str = CONFIG,
    assoc: str = ASSOC,
    qos: str = QOS,
    assoc_mgr: str = ASSOC_MGR,
) -> None:
    bin_dir.mkdir(parents=True)
    stubs = {
        "sbatch": SBATCH,
        "sacct": SACCT,
        "sinfo": _plain_stub("sinfo", "gpu*\ncpu\n"),
        "sacctmgr": _sacctmgr_stub(assoc, qos),
        "srun": '#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n',  # drop the options
        "scancel": _plain_stub("scancel", ""),
        # The jobs still queued or running ($STUB_LIVE), as `squeue --me --noheader --format=%i` lists them.
        "squeue": _plain_stub("squeue", "") + "for id in $STUB_LIVE; do echo $id; done\n",
        "scontrol": (
            '#!/bin/sh\necho "scontrol $*" >> "$STUB_SLURM/calls.log"\n'
            f"if [ \"$2\" = partition ]; then cat <<'EOF'\n{partitions}EOF\n"
            f"elif [ \"$2\" = assoc_mgr ]; then cat <<'EOF'\n{assoc_mgr}EOF\n"
            f"else cat <<'EOF'\n{config}EOF\nfi\n"
        ),
    }
    for name, text in stubs.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _site_config() -> dict:
    """The tiny experiment: listops one run a job with every site option; retrieval two runs a pack."""
    config = load_config("tiny")
    config["run_grids"] = ["single", "packed"]
    cell = {"variants": ["after_embedding"], "scales": ["h1"]}
    config["grids"] = {
        "single": {"tasks": ["listops"], "seeds": [0], **cell},
        "packed": {"tasks": ["retrieval"], "seeds": [0, 1], **cell},
    }
    config["tasks"]["listops"]["resources"] = {
        "gpu": 1, "gpu_model": "h100", "constraint": "a100|h100", "qos": "long",
        "slurm_extra": "--mail-type=FAIL", "cpus_per_task": 2, "mem_mb": 1500, "runtime": 12,
    }  # fmt: skip
    config["tasks"]["retrieval"]["resources"] = {"pack": 2, "pack_gain": 0.8, "mem_mb": 700, "runtime": 4}
    config["cluster"] = {"max_runtime": MAX_RUNTIME, "cpu_partition": "cpu"}
    return config


def _sbatch_option(argv: list[str], flag: str) -> str | None:
    """The value of `flag` in an sbatch argv ('-t 12', '--gpus=h100:1')."""
    for i, arg in enumerate(argv):
        if arg == flag:
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


@pytest.mark.slow  # one real training job and three rounds of the plugin's status checks: ~25-50 s
def test_the_submitted_lines_carry_the_configs_requests_within_the_runtime_cap(tmp_path: Path):
    ws = make_workspace(tmp_path / "ws", _site_config())
    # A dead session's jobs still train the listops run (4242) and the pack's second run (4243); the job
    # recorded for the pack's first run (4244) is gone from the queue: each new job waits for the live ones.
    recorded = {"listops/seed0": 4242, "retrieval/seed1": 4243, "retrieval/seed0": 4244}
    for run, job_id in recorded.items():
        task, seed = run.split("/")
        folder = ws / "results/tiny/checkpoints" / task / "after_embedding/h1/base" / seed
        folder.mkdir(parents=True)
        (folder / "slurm_job").write_text(f"{job_id}\n")
    state = tmp_path / "slurm"
    _write_stubs(state / "bin")
    unrun = " ".join(f"{rule}:{count}" for rule, count in UNRUN.items())
    env = tool_env({"STUB_SLURM": str(state), "STUB_UNRUN": unrun, "PDELRA_ALLOW_CPU": "1",
                    "STUB_LIVE": "4242 4243 17", "USER": os.environ.get("USER", "root")})  # fmt: skip
    env["PATH"] = f"{state / 'bin'}{os.pathsep}{env['PATH']}"
    targets = [
        "results/tiny/diagnostics/listops/part0.csv",
        *(f"results/tiny/runs/retrieval/after_embedding/h1/base/seed{s}/metrics.json" for s in (0, 1)),
    ]
    overrides = ("--workflow-profile", "none", "--default-resources", "slurm_partition=gpu",
                 f"slurm_account={ACCOUNT}", "--slurm-init-seconds-before-status-checks", "1",
                 "--max-status-checks-per-second", "10", "--latency-wait", "1")  # fmt: skip
    command = snakemake_command(ws, (*targets, "--profile", "profiles/slurm", *overrides))
    proc = subprocess.run(
        ["timeout", "-k", "10", "170", *command], cwd=ws, env=env, capture_output=True, text=True
    )
    log = proc.stdout + proc.stderr
    calls = (state / "calls.log").read_text()
    assert "scontrol show partition -o" in calls and "scontrol show config" in calls  # the preflight
    submitted: dict[str, list[list[str]]] = {}
    for line in (state / "sbatch.jsonl").read_text().splitlines():
        job = json.loads(line)
        submitted.setdefault(job["rule"], []).append(job["argv"])
    counts = {rule: len(lines) for rule, lines in submitted.items()}
    assert counts == dict.fromkeys(UNRUN, ATTEMPTS), log[-5000:]
    # Nothing failed but the submissions left unrun (no outputs: Snakemake retried them); the pack and the
    # diagnosis never ran, so the run ends with an error; the training job ran on its third attempt.
    assert proc.returncode == 1, log[-5000:]
    assert "Error in rule" not in log, log[-5000:]
    unrun = re.findall(r"MissingOutputException in rule (\w+)", log)
    assert {rule: unrun.count(rule) for rule in set(unrun)} == UNRUN, log[-5000:]
    trained = ws / "results/tiny/runs/listops/after_embedding/h1/base/seed0/metrics.json"
    metrics = json.loads(trained.read_text())
    assert metrics["status"] == "completed"

    def option(rule: str, flag: str) -> list[str | None]:
        return [_sbatch_option(argv, flag) for argv in submitted[rule]]

    def every(value: str | None) -> list[str | None]:
        return [value] * ATTEMPTS

    # The unpacked task's requests and site options, as the config sets them, on every attempt; its runtime
    # grows with the attempt (12, 24, 36 minutes) but never above cluster.max_runtime.
    assert option("train", "--gpus") == every("h100:1")
    assert option("train", "--mem") == every("1500") and option("train", "--cpus-per-task") == every("2")
    assert option("train", "-C") == every("a100|h100") and option("train", "--qos") == every("long")
    assert all("--mail-type=FAIL" in argv for argv in submitted["train"])
    assert option("train", "-p") == every("gpu")
    assert option("train", "-t") == ["12", str(MAX_RUNTIME), str(MAX_RUNTIME)]
    # The pack of two runs (no GPU in this config): K x runtime / pack_gain = 2 x 4 / 0.8 = 10 minutes, capped
    # on the retries; K x the memory and cores; none of listops' site options.
    assert option("train_pack", "-t") == ["10", str(MAX_RUNTIME), str(MAX_RUNTIME)]
    assert option("train_pack", "--mem") == every("1400")
    assert option("train_pack", "--cpus-per-task") == every("2")
    assert (
        option("train_pack", "--gpus")
        == option("train_pack", "-C")
        == option("train_pack", "--qos")
        == every(None)
    )
    # Reattach: the runs still trained by a live job of the dead session are submitted after it (afterany),
    # on every attempt while it lives; the recorded job squeue no longer lists is not waited for.
    assert option("train", "--dependency") == every("afterany:4242")
    assert option("train_pack", "--dependency") == every("afterany:4243")
    assert option("diagnose", "--dependency") == every(None)
    assert 1 <= calls.count("squeue --me --noheader --format=%i") <= 3, "squeue is asked once a minute"
    # The CPU-only diagnosis goes to the CPU partition, not the default GPU one; 10 + 1 minutes, capped.
    assert option("diagnose", "-p") == every("cpu") and option("diagnose", "--gpus") == every(None)
    assert option("diagnose", "-t") == ["11", str(MAX_RUNTIME), str(MAX_RUNTIME)]


@pytest.mark.slow  # one real training job through the plugin: ~20-40 s
def test_a_refused_submission_is_waited_out_and_costs_no_attempt(tmp_path: Path):
    """At the submit limit sbatch refuses; through the workflow's sbatch shim the refusals are waited out and
    logged, and the job, allowed no retry here, is submitted once and trains (the plugin never sees them)."""
    config = _site_config()
    config["run_grids"] = ["single"]
    ws = make_workspace(tmp_path / "ws", config)
    state = tmp_path / "slurm"
    _write_stubs(state / "bin")
    env = tool_env({"STUB_SLURM": str(state), "STUB_REFUSE": "3", "PDELRA_ALLOW_CPU": "1",
                    "PDELRA_SBATCH_FIRST_WAIT": "0.2", "USER": os.environ.get("USER", "root")})  # fmt: skip
    env["PATH"] = f"{state / 'bin'}{os.pathsep}{env['PATH']}"
    target = "results/tiny/runs/listops/after_embedding/h1/base/seed0/metrics.json"
    overrides = ("--workflow-profile", "none", "--default-resources", "slurm_partition=gpu",
                 f"slurm_account={ACCOUNT}", "--slurm-init-seconds-before-status-checks", "1",
                 "--max-status-checks-per-second", "10", "--latency-wait", "1", "--retries", "0")  # fmt: skip
    command = snakemake_command(ws, (target, "--profile", "profiles/slurm", *overrides))
    proc = subprocess.run(
        ["timeout", "-k", "10", "170", *command], cwd=ws, env=env, capture_output=True, text=True
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    submitted = [json.loads(line) for line in (state / "sbatch.jsonl").read_text().splitlines()]
    assert [job["rule"] for job in submitted] == ["train"], log[-5000:]
    assert json.loads((ws / target).read_text())["status"] == "completed"
    refusals = (ws / "results/tiny/cluster/refused.log").read_text().splitlines()
    assert len(refusals) == 3 and all("QOSMaxSubmitJobPerUserLimit" in line for line in refusals), refusals


def test_a_partition_too_short_for_max_runtime_stops_the_run_before_any_work(tmp_path: Path):
    """The preflight through the profile: the CPU partition's MaxTime (4 h) is below cluster.max_runtime
    (24 h), and the GPU partition cancels preempted jobs: one message, a warning, nothing started."""
    config = _site_config()
    config["cluster"] = {"cpu_partition": "cpu"}  # max_runtime: the default, 1440
    ws = make_workspace(tmp_path / "ws", config)
    state = tmp_path / "slurm"
    cancels = PARTITIONS.replace(
        "MaxTime=2-00:00:00 PreemptMode=OFF", "MaxTime=2-00:00:00 PreemptMode=CANCEL"
    )
    _write_stubs(state / "bin", cancels, CONFIG.replace("preempt/none", "preempt/partition_prio"))
    env = tool_env({"STUB_SLURM": str(state), "USER": os.environ.get("USER", "root")})
    env["PATH"] = f"{state / 'bin'}{os.pathsep}{env['PATH']}"
    overrides = ("--workflow-profile", "none", "--default-resources", "slurm_partition=gpu",
                 f"slurm_account={ACCOUNT}")  # fmt: skip
    command = snakemake_command(ws, ("--profile", "profiles/slurm", *overrides))
    proc = subprocess.run(
        ["timeout", "-k", "10", "120", *command], cwd=ws, env=env, capture_output=True, text=True
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log[-3000:]
    assert "Cannot use Slurm (nothing was started)" in log, log[-3000:]
    assert "partition cpu allows 240 min (MaxTime 04:00:00), less than cluster.max_runtime 1440" in log
    assert "set cluster.max_runtime: 240 in the config" in log
    assert "Warning (Slurm): partition gpu preempts with PreemptMode=CANCEL" in log
    assert not (ws / "data").exists() and not (state / "sbatch.jsonl").exists(), "work started anyway"


def test_the_accounts_limits_lower_the_runs_jobs_and_a_short_qos_stops_it(tmp_path: Path):
    """The preflight through the profile (jobs: 250) on an association with MaxSubmitJobs=3: the run keeps
    at most one job at once (Snakemake's scheduler lowered, as its debug log shows). Then the QOS the jobs
    name (long) allows 12 h, less than max_runtime: one line, nothing started."""
    ws = make_workspace(tmp_path / "ws", _site_config())
    state = tmp_path / "slurm"
    _write_stubs(
        state / "bin", assoc=f"{ACCOUNT}||normal,long|normal||3|\n", qos="normal|||\nlong|12:00:00||\n"
    )
    env = tool_env(
        {"STUB_SLURM": str(state), "STUB_UNRUN": "train:9", "USER": os.environ.get("USER", "root")}
    )
    env["PATH"] = f"{state / 'bin'}{os.pathsep}{env['PATH']}"
    target = "results/tiny/runs/listops/after_embedding/h1/base/seed0/metrics.json"
    overrides = ("--workflow-profile", "none", "--default-resources", "slurm_partition=gpu",
                 f"slurm_account={ACCOUNT}", "--slurm-init-seconds-before-status-checks", "1",
                 "--max-status-checks-per-second", "10", "--latency-wait", "1", "--retries", "0",
                 "--verbose")  # fmt: skip
    command = snakemake_command(ws, (target, "--profile", "profiles/slurm", *overrides))
    proc = subprocess.run(
        ["timeout", "-k", "10", "120", *command], cwd=ws, env=env, capture_output=True, text=True
    )
    log = proc.stdout + proc.stderr
    assert "Cannot use Slurm" not in log, log[-3000:]
    warning = f"Warning (Slurm): association {ACCOUNT} takes at most 3 of your jobs queued or running"
    assert f"{warning} (MaxSubmitJobs)" in log, log[-3000:]
    assert "this run keeps at most 1 jobs at once (jobs: 250 lowered)" in log, log[-3000:]
    selections = re.findall(r"Resources before job selection: (\{.*\})", log)
    assert selections and all("'_nodes': 1," in line for line in selections), selections
    assert (state / "sbatch.jsonl").exists(), log[-3000:]  # the run went on

    config = _site_config()
    config["cluster"]["max_runtime"] = 1440
    ws = make_workspace(tmp_path / "ws2", config)
    command = snakemake_command(ws, (target, "--profile", "profiles/slurm", *overrides))
    proc = subprocess.run(
        ["timeout", "-k", "10", "120", *command], cwd=ws, env=env, capture_output=True, text=True
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Cannot use Slurm (nothing was started)" in log, log[-3000:]
    assert "  - QOS long allows 720 min a job (MaxWall 12:00:00), less than cluster.max_runtime 1440" in log
    assert "set cluster.max_runtime: 720 in the config" in log
    assert "run with --jobs 1 or less" in log  # not lowered: the run stops
    assert not (ws / "data").exists()

    # The account's GPU-minute budget against the campaign's FLOPs estimate (cluster.gpu_model), said before
    # the run stops for the QOS; a rerun of the preflight only (nothing starts).
    user = env["USER"]
    config["cluster"]["gpu_model"] = "H100"
    ws = make_workspace(tmp_path / "ws3", config)
    shared = SHARED.replace("UserName=me(1000)", f"UserName={user}(0)")
    _write_stubs(state / "bin3", assoc=f"{ACCOUNT}||normal,long|normal|||\n",
                 qos="normal|||\nlong|12:00:00||\n", assoc_mgr=shared)  # fmt: skip
    env["PATH"] = f"{state / 'bin3'}{os.pathsep}{env['PATH']}"
    command = snakemake_command(ws, (target, "--profile", "profiles/slurm", *overrides))
    proc = subprocess.run(
        ["timeout", "-k", "10", "120", *command], cwd=ws, env=env, capture_output=True, text=True
    )
    log = proc.stdout + proc.stderr
    budget = re.search(r"this campaign needs ≈ ([\d,.]+) of your 18,766 remaining GPU-minutes \((.*?)\)", log)
    assert budget, log[-3000:]
    estimated, what = budget.groups()
    assert what == "the LRA runs' FLOPs estimate on H100, the other jobs' requests; 12 requested", what
    assert estimated == "0", budget.group(0)  # the tiny run's FLOPs: seconds, far below its 12-minute request


# ---------------------------------------------------------------------------------------------------------
# Every GPU job of the paper config, submitted unrun: site options and the order of submission
# ---------------------------------------------------------------------------------------------------------
GPU_RULES = ("train", "train_pack", "lm_train", "cta_official_train", "cta_lm_train")
RELATED_RULES = ("lm_train", "cta_official_train", "cta_lm_train")
SITE = {"slurm_partition": "gpu", "constraint": "a100|h100", "gpu_model": "h100", "qos": "long",
        "slurm_extra": "--mail-type=FAIL"}  # fmt: skip


def _paper_config() -> dict:
    """The shipped paper config with one seed per grid (the LM's and CTA's own too): every rule and class
    is there, at least 20 submissions of each side, in a sixth of the submissions (each costs the plugin
    about half a second)."""
    with open(REPO / "config" / "config.yaml") as f:
        config = yaml.safe_load(f)
    for grid in config["grids"].values():
        grid["seeds"] = grid["seeds"][:1]
    config["lm"]["seeds"] = config["lm"]["seeds"][:1]
    config["cta_official"]["seeds"] = config["cta_official"]["seeds"][:1]
    return config


def _ready_inputs(ws: Path, config: dict, smoke_ok: bool) -> str:
    """Make every training job of `config` ready at once: its data (each manifest) exists, the smoke test
    passed where `smoke_ok`, and so do the runs of the first diagnose job (listops part 0), so that it is
    ready beside them. Returns that job's runs' class, as the order counts it."""
    if smoke_ok:
        smoke = ws / "results" / config["experiment"] / "cluster" / "smoke"
        smoke.mkdir(parents=True)
        task = experiment.lra_runs(config)[0][0]
        for model in gpu_models.smoke_models(experiment.merged(config, "resources", task)):
            (smoke / f"{model}.ok").write_text("")
    processed = ws / config["data"]["processed_dir"]
    cta = config["cta_official"]
    manifests = [*config["tasks"], f"lm_{config['lm']['corpus']}"]
    manifests += [f"{cta_grid.PROCESSED_DIR}/{task}" for task in [*cta["tasks"], cta_grid.LM_TASK]]
    for name in manifests:
        (processed / name).mkdir(parents=True, exist_ok=True)
        (processed / name / "manifest.json").write_text("{}")
    runs = experiment.lra_runs(config)
    for run in experiment.diagnose_parts(experiment.diagnosed_runs(config, runs))[("listops", "0")]:
        folder = (
            ws
            / "results"
            / config["experiment"]
            / "runs"
            / run_layout.RUN_PATTERN.format(**dict(zip(run_layout.RUN_KEYS, run, strict=True)))
        )
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text("{}")
        (folder / "model.safetensors").write_text("")
    return "diagnose"


# A site whose CPU partition allows what cluster.max_runtime allows (the shipped 1,440 min).
LONG_CPU_PARTITIONS = PARTITIONS.replace("MaxTime=04:00:00", "MaxTime=2-00:00:00")


def _submit_all(tmp_path: Path, config: dict, smoke_ok: bool = True) -> tuple[list[dict], str]:
    """Every GPU job and the ready diagnose job of `config` through the Slurm profile and the stubs, each
    submitted once and failed unrun (after the smoke test, which passed already where `smoke_ok`). Returns
    the sbatch records in the order the plugin called sbatch, and the log."""
    ws = make_workspace(tmp_path / "ws", config)
    _ready_inputs(ws, config, smoke_ok)
    state = tmp_path / "slurm"
    _write_stubs(state / "bin", LONG_CPU_PARTITIONS)
    unrun = " ".join(f"{rule}:99" for rule in (*GPU_RULES, "smoke", "diagnose"))
    env = tool_env({"STUB_SLURM": str(state), "STUB_UNRUN": unrun, "STUB_UNRUN_STATE": "FAILED",
                    "USER": os.environ.get("USER", "root")})  # fmt: skip
    env["PATH"] = f"{state / 'bin'}{os.pathsep}{env['PATH']}"
    targets = ("diagnostics_table", "lm_aggregate", "cta_official_aggregate")  # every GPU job is upstream
    overrides = ("--workflow-profile", "none", "--default-resources", "slurm_partition=gpu",
                 f"slurm_account={ACCOUNT}", "--slurm-init-seconds-before-status-checks", "1",
                 "--max-status-checks-per-second", "10", "--retries", "0",
                 "--allowed-rules", *GPU_RULES, "smoke", "diagnose", *targets)  # fmt: skip
    command = snakemake_command(ws, (*targets, "--profile", "profiles/slurm", *overrides))
    proc = subprocess.run(
        ["timeout", "-k", "10", "400", *command], cwd=ws, env=env, capture_output=True, text=True
    )
    log = proc.stdout + proc.stderr
    assert (state / "sbatch.jsonl").exists(), log[-5000:]
    records = [json.loads(line) for line in (state / "sbatch.jsonl").read_text().splitlines()]
    return sorted(records, key=lambda job: job["called"]), log  # a stable sort: ties keep their order


def _classes(submitted: list[dict]) -> list[str]:
    """The priority class of each submission: a related system's rule or variant, diagnose, or the paper."""
    related_variants = ("cta_", "physqk")
    classes = []
    for job in submitted:
        if job["rule"] in RELATED_RULES or any(f"variant_{v}" in job["comment"] for v in related_variants):
            classes.append("related")
        else:
            classes.append("diagnose" if job["rule"] == "diagnose" else "paper")
    return classes


def _out_of_order(classes: list[str], order: list[str]) -> list[tuple[int, int]]:
    """Pairs of submissions (i < j) where j's class comes first in `order`. Snakemake selects the jobs of
    highest priority up to the profile's 20 a second, and submits one selection in no particular order: only
    a pair within one selection (fewer than 20 apart) may be out of order: none is returned."""
    rank = [order.index(name) for name in classes]
    return [(i, j) for i in range(len(rank)) for j in range(i + 20, len(rank)) if rank[i] > rank[j]]


def _runs(classes: list[str]) -> list[tuple[str, int]]:
    """[(class, consecutive submissions)]: the order in blocks."""
    blocks: list[tuple[str, int]] = []
    for name in classes:
        if blocks and blocks[-1][0] == name:
            blocks[-1] = (name, blocks[-1][1] + 1)
        else:
            blocks.append((name, 1))
    return blocks


@pytest.mark.slow  # ~80 submissions through the plugin, none run: ~40 s
def test_the_paper_runs_are_submitted_first_then_diagnose_then_the_related_systems(tmp_path: Path):
    """The shipped paper config (cluster.priority unset: paper, diagnose, related; no cpu_partition): the
    order of the sbatch calls, and the preflight's one line about diagnose on the GPU partition."""
    config = _paper_config()
    submitted, log = _submit_all(tmp_path, config)
    counts = {rule: sum(job["rule"] == rule for job in submitted) for rule in (*GPU_RULES, "diagnose")}
    plan = experiment.workflow_jobs(config)
    assert counts == {
        "train": plan["train"] - experiment.DIAGNOSE_RUNS_PER_JOB,  # those of listops part 0 exist
        "train_pack": 0,
        **{rule: plan[rule] for rule in RELATED_RULES},
        "diagnose": 1,
    }, log[-5000:]
    classes = _classes(submitted)
    assert not _out_of_order(classes, ["paper", "diagnose", "related"]), _runs(classes)
    assert classes[:20] == ["paper"] * 20 and classes[-20:] == ["related"] * 20, _runs(classes)
    warning = (
        "Warning (Slurm): the CPU-only jobs of diagnose go to the GPU jobs' partition gpu: name a CPU "
        "partition as cluster.cpu_partition in the config"
    )
    assert log.count(warning) == 1, log[-5000:]
    print("first 20 submissions:\n" + "\n".join(job["comment"] for job in submitted[:20]))


@pytest.mark.slow  # as above
def test_every_gpu_rule_carries_the_site_options_and_the_order_is_the_configs(tmp_path: Path):
    """Site options set once in defaults.resources reach every GPU rule's sbatch line, the LM's and the
    official CTA grid's too; diagnose goes to cluster.cpu_partition (no warning then); cluster.priority
    reorders."""
    config = _paper_config()
    config["defaults"]["resources"].update(SITE)
    config["cluster"].update(cpu_partition="cpu", priority=["related", "diagnose", "paper"])
    submitted, log = _submit_all(tmp_path, config)
    rules = {job["rule"] for job in submitted}
    assert rules == {"train", "diagnose", *RELATED_RULES}, log[-5000:]  # the paper config packs no task
    for job in submitted:
        argv, rule = job["argv"], job["rule"]
        if rule == "diagnose":
            assert _sbatch_option(argv, "-p") == "cpu" and _sbatch_option(argv, "--gpus") is None, argv
            continue
        assert _sbatch_option(argv, "-p") == "gpu" and _sbatch_option(argv, "--gpus") == "h100:1", argv
        assert _sbatch_option(argv, "-C") == "a100|h100" and _sbatch_option(argv, "--qos") == "long", argv
        assert "--mail-type=FAIL" in argv, argv
    assert "cluster.cpu_partition" not in log
    classes = _classes(submitted)
    assert not _out_of_order(classes, config["cluster"]["priority"]), _runs(classes)
    assert classes[:20] == ["related"] * 20 and classes[-20:] == ["paper"] * 20, _runs(classes)
    for rule in sorted(rules):
        print(rule, " ".join(next(job["argv"] for job in submitted if job["rule"] == rule)))


@pytest.mark.slow  # one submission through the plugin: ~15 s
def test_the_smoke_test_is_the_first_job_and_nothing_is_submitted_before_it_passed(tmp_path: Path):
    """cluster.smoke (true in the shipped config): its one GPU job, with the site options of every GPU rule
    and 30 minutes, is the only submission while it has not passed (here it fails)."""
    config = _paper_config()
    assert config["cluster"]["smoke"] is True
    config["defaults"]["resources"].update(SITE)
    submitted, log = _submit_all(tmp_path, config, smoke_ok=False)
    assert [job["rule"] for job in submitted] == ["smoke"], log[-5000:]
    argv = submitted[0]["argv"]
    assert _sbatch_option(argv, "-p") == "gpu" and _sbatch_option(argv, "--gpus") == "h100:1", argv
    assert _sbatch_option(argv, "-C") == "a100|h100" and _sbatch_option(argv, "--qos") == "long", argv
    assert _sbatch_option(argv, "-t") == "30" and "--mail-type=FAIL" in argv, argv
    print("smoke", " ".join(argv))


@pytest.mark.slow  # three smoke jobs run through the plugin: ~40-70 s
def test_a_smoke_job_on_a_node_without_cuda_records_it_and_its_retry_passes_elsewhere(tmp_path: Path):
    """cluster.smoke with constraint 'a100|h100': one smoke job per model, each constrained to it. The A100
    job lands on a01, where torch sees no GPU: it records a01 in bad_nodes.txt, and its retry carries
    --exclude=a01 and passes on a02. Then the training job follows, a01 excluded too."""
    config = load_config("tiny")
    config["run_grids"] = ["single"]
    config["grids"] = {"single": {"tasks": ["listops"], "seeds": [0], "variants": ["none"], "scales": ["h1"]}}
    config["defaults"]["resources"].update(gpu=1, constraint="a100|h100")
    config["cluster"] = {"smoke": True}
    ws = make_workspace(tmp_path / "ws", config)
    state = tmp_path / "slurm"
    _write_stubs(state / "bin")
    env = tool_env({"STUB_SLURM": str(state), "STUB_NODES": "a01:a100 a02:a100 h01:h100",
                    "STUB_NO_CUDA": "a01", "USER": os.environ.get("USER", "root")})  # fmt: skip
    env["PATH"] = f"{state / 'bin'}{os.pathsep}{env['PATH']}"
    target = "results/tiny/runs/listops/none/h1/base/seed0/metrics.json"
    overrides = ("--workflow-profile", "none", "--default-resources", "slurm_partition=gpu",
                 f"slurm_account={ACCOUNT}", "--slurm-init-seconds-before-status-checks", "1",
                 "--max-status-checks-per-second", "10", "--latency-wait", "1", "--retries", "1")  # fmt: skip
    command = snakemake_command(ws, (target, "--profile", "profiles/slurm", *overrides))
    proc = subprocess.run(
        ["timeout", "-k", "10", "300", *command], cwd=ws, env=env, capture_output=True, text=True
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    submitted = [json.loads(line) for line in (state / "sbatch.jsonl").read_text().splitlines()]
    smoke = [
        (_sbatch_option(job["argv"], "-C"), _sbatch_option(job["argv"], "--exclude"))
        for job in submitted
        if job["rule"] == "smoke"
    ]
    expected = [("a100", None), ("a100", "a01"), ("h100", None)]  # the A100 job's retry excludes a01
    assert sorted(smoke, key=str) == sorted(expected, key=str), log[-5000:]
    nodes = [line.split() for line in (state / "nodes.log").read_text().splitlines()]
    assert sorted(node for _, rule, node in nodes if rule == "smoke") == ["a01", "a02", "h01"]
    assert (ws / "results/tiny/cluster/bad_nodes.txt").read_text() == "a01\n"
    assert sorted(p.name for p in (ws / "results/tiny/cluster/smoke").glob("*.ok")) == ["a100.ok", "h100.ok"]
    assert "no CUDA device visible" in log or any(
        "node a01 recorded" in path.read_text() for path in (ws / "results/tiny/logs/smoke").glob("*.log")
    )
    train = [job for job in submitted if job["rule"] == "train"]
    assert len(train) == 1 and _sbatch_option(train[0]["argv"], "--exclude") == "a01", train
    assert _sbatch_option(train[0]["argv"], "-C") == "a100|h100"
    assert json.loads((ws / target).read_text())["status"] == "completed"
    for job in submitted:
        flags = [a for a in job["argv"] if a.startswith(("-C", "--exclude", "a1", "h1"))]
        print(job["id"], job["rule"], " ".join(flags))


# ---------------------------------------------------------------------------------------------------------
# The arithmetic and the preflight, without Snakemake
# ---------------------------------------------------------------------------------------------------------
def test_no_attempt_asks_for_more_than_the_cap():
    assert [slurm_site.attempt_runtime(720, attempt, 1440) for attempt in (1, 2, 3)] == [720, 1440, 1440]
    assert [slurm_site.attempt_runtime(1440, attempt, 1440) for attempt in (1, 2, 3)] == [1440] * 3
    assert slurm_site.pack_runtime(300, 4, 1.0, 1, 1440) == 1200  # no measured gain: K times one run
    assert slurm_site.pack_runtime(300, 4, 2.0, 1, 1440) == 600
    assert slurm_site.pack_runtime(720, 4, 1.0, 1, 1440) == 1440


def test_a_pack_longer_than_the_cap_is_named_with_a_k_that_fits():
    config = load_config("tiny")
    config["defaults"]["resources"].update(runtime=600, pack=4)
    config["tasks"]["retrieval"]["resources"] = {"runtime": 2000, "pack": 1}
    config["cluster"] = {"max_runtime": 1440}
    warnings = slurm_site.runtime_warnings(config)
    assert len(warnings) == 2, warnings
    assert "tasks.listops.resources.pack 4" in warnings[0] and "2400 min" in warnings[0], warnings
    assert "use pack: 2 or less" in warnings[0], warnings
    assert "tasks.retrieval.resources.runtime 2000" in warnings[1], warnings
    config["defaults"]["resources"]["pack_gain"] = 2.0  # measured: 4 runs take twice one run's time
    assert not [w for w in slurm_site.runtime_warnings(config) if "listops" in w]


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("2-00:00:00", 2880), ("12:00:00", 720), ("30:00", 30), ("90", 90), ("1-12", 2160), ("UNLIMITED", None)],
)
def test_slurm_times_are_read_in_minutes(text: str, minutes: float | None):
    assert slurm_site.slurm_minutes(text) == minutes


def _answers(
    partitions: str,
    config: str = CONFIG,
    sinfo: str = "gpu*\ncpu\n",
    assoc: str = ASSOC,
    qos: str = QOS,
    assoc_mgr: str = ASSOC_MGR,
):
    def run(commands):
        canned = {"sinfo": sinfo, "partition": partitions, "config": config, "sacct": "", "assoc": assoc}
        canned.update(qos=qos, assoc_mgr=assoc_mgr)
        return [
            (canned[c[3] if c[0] == "sacctmgr" else c[2] if c[0] == "scontrol" else c[0]], None)
            for c in commands
        ]

    return run


def test_preflight_names_a_short_partition_and_a_preemption_that_cancels():
    partitions = PARTITIONS.replace("MaxTime=04:00:00 PreemptMode=OFF", "MaxTime=04:00:00 PreemptMode=CANCEL")
    config = CONFIG.replace("preempt/none", "preempt/partition_prio")
    jobs = {"gpu": [("train", 720)], "cpu": [("diagnose", 11)]}
    report = slurm_site.site_problems(jobs, ["gpu", ACCOUNT], "sacct", 1440, run=_answers(partitions, config))
    assert len(report.problems) == 1 and "partition cpu allows 240 min" in report.problems[0], report
    assert "set cluster.max_runtime: 240" in report.problems[0]
    (warning,) = report.warnings
    assert "partition cpu preempts with PreemptMode=CANCEL" in warning
    # Within the limits, requeueing, the site's default partition (None): nothing to say.
    fine = PARTITIONS.replace("PreemptMode=OFF", "PreemptMode=REQUEUE")
    report = slurm_site.site_problems({None: [("train", 720)]}, [], "sacct", 240, run=_answers(fine, config))
    assert report.problems == [] and report.warnings == [], report


def test_preflight_names_placeholders_an_unknown_partition_and_a_silent_cluster():
    report = slurm_site.site_problems(
        {"gpus": [("train", 5)]}, ["gpus", ACCOUNT], "sacct", 1440, run=_answers(PARTITIONS)
    )
    assert report.problems == ["partition 'gpus' (rules train) is not one of this cluster's: cpu, gpu"]
    report = slurm_site.site_problems({"gpu,cpu": [("train", 5)]}, [], "sacct", 240, run=_answers(PARTITIONS))
    assert report.problems == [] and report.warnings == [], report  # several partitions: each is checked
    report = slurm_site.site_problems(
        {"SET-YOUR-GPU-PARTITION": [("train", 5)]},
        ["SET-YOUR-GPU-PARTITION", "SET-YOUR-ACCOUNT"],
        "sacct",
        1440,
        run=lambda commands: [(None, "Unable to contact slurm controller")] * len(commands),
    )
    assert "placeholders SET-YOUR-ACCOUNT, SET-YOUR-GPU-PARTITION" in report.problems[0]
    assert "`sinfo --noheader --format=%P` failed (Unable to contact slurm controller)" in report.problems[1]
    assert any("use --slurm-status-command squeue" in problem for problem in report.problems)


# ---------------------------------------------------------------------------------------------------------
# The account's and QOS's limits (sacctmgr)
# ---------------------------------------------------------------------------------------------------------
def _limits(assoc: str, qos: str = QOS, jobs: int | None = 250, max_runtime: int = 1440, used=(None,)):
    found = slurm_site.account_limits(assoc, qos, [ACCOUNT], ["gpu"], used)
    return slurm_site.limit_decisions(found, jobs, max_runtime)


def test_sacctmgrs_lines_are_read_by_position_and_odd_lines_skipped():
    text = f"{ACCOUNT}|gpu|normal,long|normal|20|100|2-00:00:00\nsacctmgr: a message\n"
    assert slurm_site.parse_rows(text, slurm_site.ASSOC_FIELDS) == [
        {"account": ACCOUNT, "partition": "gpu", "qos": "normal,long", "defaultqos": "normal",
         "maxjobs": "20", "maxsubmit": "100", "maxwall": "2-00:00:00"}
    ]  # fmt: skip
    limits = slurm_site.account_limits(text, QOS, [ACCOUNT.upper()], ["gpu,cpu"], [None])
    assert [(limit.kind, limit.value, limit.source) for limit in limits] == [
        ("jobs", 20, f"association {ACCOUNT} (partition gpu)"),
        ("submit", 100, f"association {ACCOUNT} (partition gpu)"),
        ("wall", 2880, f"association {ACCOUNT} (partition gpu)"),
    ]
    # Another partition's, another account's limits do not apply; a QOS is read only when the jobs use it.
    assert slurm_site.account_limits(text, QOS, [ACCOUNT], ["cpu"], [None]) == []
    assert slurm_site.account_limits(f"other|||||5|\n{ACCOUNT}||||||\n", QOS, [ACCOUNT], [None], [None]) == []
    assert slurm_site.account_limits("", QOS, [], [None], ["long"])[0].source == "QOS long"


def test_a_submit_limit_caps_the_runs_jobs_below_it():
    """MaxSubmitJobs=100 with the profile's jobs: 250: at most 90, 10 left for the user's other jobs."""
    report = _limits(f"{ACCOUNT}||normal|normal||100|\n")
    assert report.problems == [] and report.max_jobs == 90, report
    (line,) = report.warnings
    assert line.startswith(f"association {ACCOUNT} takes at most 100 of your jobs queued or running "
                           "(MaxSubmitJobs), and sbatch refuses more"), line  # fmt: skip
    assert "10 of them are left for your other jobs" in line and "at most 90 jobs at once (jobs: 250" in line
    assert "set jobs: 90 in the profile (or --jobs 90)" in line
    assert "run with --jobs 90 or less" in slurm_site.cap_line(report, 250, lowered=False)
    # The QOS's per-user limit, when lower, is the one; a run already below the cap is left alone.
    qos = "normal||8|40\n"
    report = _limits(f"{ACCOUNT}||normal|normal||100|\n", qos)
    assert report.max_jobs == 36 and "QOS normal takes at most 40" in report.warnings[0], report
    assert "QOS normal runs at most 8 of your jobs at once (MaxJobsPerUser)" in report.notes[0], report
    report = _limits(f"{ACCOUNT}||normal|normal||100|\n", jobs=50)
    assert report.max_jobs is None and report.warnings == [] and report.problems == [], report


def test_a_qos_maxwall_below_max_runtime_stops_the_run_in_one_line():
    report = _limits(f"{ACCOUNT}||normal,long|normal|||\n", "normal|||\nlong|12:00:00||\n", used=["long"])
    assert report.problems == [
        "QOS long allows 720 min a job (MaxWall 12:00:00), less than cluster.max_runtime 1440: a job asking "
        "for more pends forever (QOSMaxWallDurationPerJobLimit); set cluster.max_runtime: 720 in the config"
    ], report
    assert report.warnings == [] and report.max_jobs is None
    # The default QOS (the association's, or its only one) is the jobs' QOS when they name none.
    assert _limits(f"{ACCOUNT}||long||||\n", "long|12:00:00||\n").problems, "the only QOS is the default"
    assert not _limits(f"{ACCOUNT}||long||||\n", "long|12:00:00||\n", max_runtime=720).problems


def test_no_limits_nothing_said_and_an_unanswering_sacctmgr_is_a_warning():
    report = slurm_site.site_problems(
        {"gpu": [("train", 720)]}, ["gpu", ACCOUNT], "sacct", 1440, run=_answers(PARTITIONS.replace(
            "MaxTime=04:00:00", "MaxTime=2-00:00:00")), user="me", accounts=[ACCOUNT], qos=[None], jobs=250,
    )  # fmt: skip
    assert report == slurm_site.Preflight(), report

    def sacctmgr_fails(commands):
        answers = _answers(PARTITIONS)(commands)
        return [
            (None, "no answer within 30 s") if c[0] == "sacctmgr" else a
            for c, a in zip(commands, answers, strict=True)
        ]

    report = slurm_site.site_problems(
        {"gpu": [("train", 720)]}, ["gpu", ACCOUNT], "sacct", 1440, run=sacctmgr_fails, user="me", jobs=250
    )
    assert report.problems == [] and len(report.warnings) == 1, report
    assert report.warnings[0].startswith(
        "the account's and QOS's limits are unread (`sacctmgr -nP show assoc`"
    )
    # Through site_problems: the limits' problem and cap reach the report.
    report = slurm_site.site_problems(
        {"gpu": [("train", 720)]}, ["gpu", ACCOUNT], "sacct", 1440, user="me", accounts=[ACCOUNT], jobs=250,
        run=_answers(PARTITIONS, assoc=f"{ACCOUNT}||long||||\n", qos="long|12:00:00||100\n"),
    )  # fmt: skip
    assert report.max_jobs == 90 and "QOS long allows 720 min" in report.problems[0], report


# ---------------------------------------------------------------------------------------------------------
# The account's shared limits (scontrol show assoc_mgr) and whether the cluster enforces any
# ---------------------------------------------------------------------------------------------------------
# The whole account may keep 50 jobs queued (30 are, colleagues' included) and run 20; it has 60,000
# GPU-minutes of which 41,234 are spent. The user's own association and another account's set nothing that
# applies here, the QOS long has its own GrpSubmitJobs.
SHARED = f"""Current Association Manager state

Association Records

ClusterName=site Account=root UserName= Partition= Priority=0 ID=1
    ParentAccount= Lft=1 DefAssoc=No
    GrpJobs=N(0) GrpJobsAccrue=N(0)
    GrpSubmitJobs=N(0) GrpWall=N(0.00)
    GrpTRESMins=cpu=N(0),mem=N(0),gres/gpu=N(0)
ClusterName=site Account={ACCOUNT} UserName= Partition= Priority=0 ID=3
    ParentAccount=root(1) Lft=2 DefAssoc=No
    GrpJobs=20(5) GrpJobsAccrue=N(0)
    GrpSubmitJobs=50(30) GrpWall=N(0.00)
    GrpTRES=cpu=N(0),mem=N(0),gres/gpu=8(2)
    GrpTRESMins=cpu=N(0),mem=N(0),gres/gpu=60000(41234)
ClusterName=site Account={ACCOUNT} UserName=me(1000) Partition= Priority=0 ID=4
    ParentAccount= Lft=3 DefAssoc=Yes
    GrpJobs=N(2) GrpJobsAccrue=N(0)
    GrpSubmitJobs=N(9) GrpWall=N(0.00)
    GrpTRESMins=cpu=N(0),mem=N(0),gres/gpu=N(700)
ClusterName=site Account=other UserName= Partition= Priority=0 ID=5
    ParentAccount=root(1) Lft=4 DefAssoc=No
    GrpJobs=1(0) GrpJobsAccrue=N(0)
    GrpSubmitJobs=1(0) GrpWall=N(0.00)
    GrpTRESMins=cpu=N(0),mem=N(0),gres/gpu=10(0)

QOS Records

QOS=long(2)
    UsageRaw=0.000000
    GrpJobs=N(0) GrpJobsAccrue=N(0) GrpSubmitJobs=200(100) GrpWall=N(0.00)
    GrpTRESMins=cpu=N(0),mem=N(0),gres/gpu=N(0)
QOS=normal(1)
    GrpJobs=N(0) GrpJobsAccrue=N(0) GrpSubmitJobs=3(0) GrpWall=N(0.00)
"""
LONG_GPU = PARTITIONS.replace("MaxTime=04:00:00", "MaxTime=2-00:00:00")


def test_the_accounts_shared_limits_are_read_with_what_is_in_use():
    limits, budgets = slurm_site.shared_limits(f"{ACCOUNT}||long|long|||\n", SHARED, "me", [ACCOUNT], [None])
    assert sorted((limit.kind, limit.value, limit.name) for limit in limits) == [
        ("jobs", 20, "GrpJobs"),
        ("submit", 20, "GrpSubmitJobs"),  # 50 less the 30 queued now
        ("submit", 100, "GrpSubmitJobs"),  # the QOS long (the association's default): 200 less 100
    ]
    assert {limit.source for limit in limits} == {
        f"association {ACCOUNT} (the whole account) with 30 in use now",
        f"association {ACCOUNT} (the whole account) with 5 in use now",
        "QOS long with 100 in use now",
    }
    (budget,) = budgets
    assert (budget.limit, budget.used, budget.left) == (60000, 41234, 18766)
    # Another account's limits, and a QOS the jobs do not use (normal), do not apply.
    assert not any("other" in limit.source or "normal" in limit.source for limit in limits)


def test_the_grp_limits_cap_the_run_and_the_gpu_minutes_are_set_against_the_budget():
    """Enforced limits (AccountingStorageEnforce has `limits`): what is free of the account's GrpSubmitJobs
    (20) caps the run's jobs (18, 2 left), GrpJobs is a note, and the campaign's GPU-minutes are set against
    the GrpTRESMins budget: a note when they fit, a warning when they do not."""
    run = _answers(LONG_GPU, assoc=f"{ACCOUNT}||long|long|||\n", assoc_mgr=SHARED)

    def preflight(gpu_minutes: float):
        return slurm_site.site_problems(
            {"gpu": [("train", 720)]}, ["gpu", ACCOUNT], "sacct", 1440, run=run, user="me",
            accounts=[ACCOUNT], qos=[None], jobs=250, gpu_minutes=(gpu_minutes, "what its GPU jobs ask for"),
        )  # fmt: skip

    report = preflight(12000)
    assert report.problems == [] and report.max_jobs == 18, report
    (cap,) = report.warnings
    assert cap.startswith(f"association {ACCOUNT} (the whole account) with 30 in use now takes at most 20 ")
    assert "(GrpSubmitJobs)" in cap and "at most 18 jobs at once (jobs: 250 lowered)" in cap, cap
    assert not any("GrpJobs" in note for note in report.notes), "18 at once: GrpJobs (20) holds none back"
    budget = (
        f"association {ACCOUNT} (the whole account) has 18,766 GPU-minutes left of its 60,000 (GrpTRESMins "
        "gres/gpu, 41,234 used, shared by its jobs): this campaign needs ≈ 12,000 of your 18,766 remaining "
        "GPU-minutes (what its GPU jobs ask for)"
    )
    assert budget in report.notes, report
    report = preflight(30000)
    over = [w for w in report.warnings if "GrpTRESMins" in w]
    assert len(over) == 1 and "needs ≈ 30,000 of your 18,766 remaining GPU-minutes" in over[0], report
    assert "AssocGrpGRESMinutes" in over[0]


def test_limits_a_cluster_does_not_enforce_cap_nothing_and_are_one_note():
    """AccountingStorageEnforce without `limits`: sbatch refuses nothing over a submit limit and no MaxWall
    holds a job, so neither the submit cap nor the MaxWall stop applies; the limits are named once."""
    config = CONFIG.replace("associations,limits,qos", "associations")
    run = _answers(
        LONG_GPU, config, assoc=f"{ACCOUNT}||long|long||100|\n", qos="long|12:00:00||\n", assoc_mgr=SHARED
    )
    report = slurm_site.site_problems(
        {"gpu": [("train", 720)]}, ["gpu", ACCOUNT], "sacct", 1440, run=run, user="me", accounts=[ACCOUNT],
        qos=[None], jobs=250, gpu_minutes=(30000.0, "asked"),
    )  # fmt: skip
    assert report.problems == [] and report.warnings == [] and report.max_jobs is None, report
    (note,) = report.notes
    assert note.startswith("limits are set (GrpJobs (association") and "MaxSubmitJobs" in note, note
    assert note.endswith(
        "but this cluster does not enforce them (AccountingStorageEnforce=associations, without `limits`): "
        "the run's jobs are not capped for them"
    ), note
    assert slurm_site.enforced({"AccountingStorageEnforce": "associations,safe"})  # safe implies limits
    assert not slurm_site.enforced({"AccountingStorageEnforce": "none"}) and not slurm_site.enforced({})


def test_an_unreadable_association_manager_leaves_the_users_own_limits_applied():
    def mgr_fails(commands):
        answers = _answers(LONG_GPU, assoc=f"{ACCOUNT}||normal|normal||100|\n")(commands)
        return [(None, "Access/permission denied") if c[:3] == ["scontrol", "show", "assoc_mgr"] else a
                for c, a in zip(commands, answers, strict=True)]  # fmt: skip

    report = slurm_site.site_problems(
        {"gpu": [("train", 720)]}, ["gpu", ACCOUNT], "sacct", 1440, run=mgr_fails, user="me",
        accounts=[ACCOUNT], qos=[None], jobs=250,
    )  # fmt: skip
    assert report.max_jobs == 90 and report.problems == [], report  # MaxSubmitJobs=100 still caps
    assert any("shared limits (GrpSubmitJobs, GrpJobs, GrpTRESMins) are unread" in n for n in report.notes)
