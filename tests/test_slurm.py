"""The Slurm profile against a real Slurm cluster (scripts/local-slurm.sh), and the script's own contracts.

The end-to-end tests start a single-node cluster on 127.0.0.1 in a temporary state folder (installing the
Debian packages on a fresh machine), run the tiny demo grid through `snakemake --profile profiles/slurm` with
one task asking for a GPU (the node's fake gres), and stop exactly the daemons they started.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from conftest import (
    REPO,
    VENV_BIN,
    load_config,
    make_workspace,
    parse_job_counts,
    snakemake_command,
    start_snakemake,
    tool_env,
)
from test_faults import _same_run

from pdelra.planning import experiment

SCRIPT = REPO / "scripts" / "local-slurm.sh"
PROFILE = REPO / "profiles" / "slurm" / "profile.yaml"
ACCOUNT = "pdelra"  # the account local-slurm.sh registers in sacctmgr
# What the test machine needs instead of the profile's placeholders; the rest of the profile is used as is.
TEST_OVERRIDES = (
    "--workflow-profile",
    "none",
    "--default-resources",
    "slurm_partition=debug",
    f"slurm_account={ACCOUNT}",
    "--slurm-init-seconds-before-status-checks",
    "1",
)
GPU_TASK = "listops"


def slurm_config() -> dict:
    """The tiny experiment with small memory requests and one task whose training jobs ask for a GPU."""
    config = load_config("tiny")
    config["defaults"]["resources"]["mem_mb"] = 500
    config["tasks"][GPU_TASK].setdefault("resources", {})["gpu"] = 1
    return config


# ---------------------------------------------------------------------------------------------------------
# The profile (no cluster needed)
# ---------------------------------------------------------------------------------------------------------
def test_profile_leaves_per_task_resources_to_the_rules():
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"
    assert profile["retries"] > 0, "training resumes from its checkpoint, so failed jobs should be retried"
    assert profile["rerun-incomplete"] is True
    assert profile["latency-wait"] >= 30
    assert profile["jobs"] >= 200, "the paper grid has ~245 training jobs"
    defaults = dict(item.split("=", 1) for item in profile["default-resources"])
    assert set(defaults) == {"slurm_partition", "slurm_account"}, "per-task values belong to the rules"
    assert "dvc=1" in profile["resources"]


def _profile_dry_run(ws: Path) -> str:
    """`snakemake -n` through the Slurm profile (the test cluster's overrides) in `ws`; its output."""
    proc = subprocess.run(
        snakemake_command(ws, ("--profile", "profiles/slurm", *TEST_OVERRIDES, "-n")),
        cwd=ws,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_dry_run_requests_come_from_the_config(tmp_path: Path):
    """A dry run through the profile shows each training job with its task's gpu, memory and runtime."""
    config = slurm_config()
    config["tasks"]["retrieval"]["resources"] = {"mem_mb": 700, "runtime": 9}
    ws = make_workspace(tmp_path / "ws", config)
    out = _profile_dry_run(ws)
    assert parse_job_counts(out)["train"] == 4
    # One "rule train:" block per job: its wildcards line names the task, its resources line the requests.
    blocks = re.findall(r"rule train:\n(.*?)\n\n", out, flags=re.S)
    assert len(blocks) == 4
    for block in blocks:
        task = re.search(r"task=(\w+)", block).group(1)
        resources = re.search(r"resources: (.*)", block).group(1)
        assert "slurm_partition=debug" in resources
        if task == GPU_TASK:
            assert "gpu=1" in resources and "mem_mb=500" in resources and "runtime=5" in resources
        else:
            assert "gpu=0" in resources and "mem_mb=700" in resources and "runtime=9" in resources


def _packed_config(seeds: list[int], pack: int) -> dict:
    """The Slurm test experiment with the GPU task's runs `pack` to a training job."""
    config = slurm_config()
    config["grids"]["main"]["seeds"] = seeds
    config["tasks"][GPU_TASK]["resources"]["pack"] = pack
    return config


def test_dry_run_packs_a_cells_seeds_into_one_job_with_one_gpu(tmp_path: Path):
    """resources.pack: 2 with 3 seeds: each GPU cell is 2 pack jobs (seeds 0-1, seed 2), each asking for the
    GPU once and for 2 x the cores, memory and time; every run is still its own, copied to its run folder; and
    `pdelra plan` counts the same jobs as the dry run."""
    config = _packed_config([0, 1, 2], 2)
    ws = make_workspace(tmp_path / "ws", config)
    out = _profile_dry_run(ws)
    counts = parse_job_counts(out)
    assert counts["train"] == 6 and counts["train_pack"] == 4 and counts["packed_run"] == 6, counts
    assert {k: v for k, v in experiment.workflow_jobs(config).items() if k != "all"} == {
        k: v for k, v in counts.items() if k != "all"
    }
    # One "rule train_pack:" block per job: its wildcards name the pack, its resources line the requests.
    blocks = re.findall(r"rule train_pack:\n(.*?)\n\n", out, flags=re.S)
    packs = sorted(re.search(r"variant=(\w+).*pack=(seeds[\d-]+)", b).groups() for b in blocks)
    assert packs == [(v, p) for v in ("after_embedding", "none") for p in ("seeds0-1", "seeds2")], packs
    for block in blocks:
        runs = len(re.search(r"pack=(seeds[\d-]+)", block).group(1).split("-"))
        resources = re.search(r"resources: (.*)", block).group(1)
        assert "gpu=1," in resources, resources  # once, not per run: the pack's runs share it
        assert f"cpus_per_task={runs}," in resources and f"mem_mb={500 * runs}," in resources, resources
        assert re.search(rf"runtime={5 * runs}\b", resources), resources  # K runs share the card: K x time
    for block in re.findall(r"rule train:\n(.*?)\n\n", out, flags=re.S):
        assert "task=retrieval" in block, "only the unpacked task trains a run per job"


# ---------------------------------------------------------------------------------------------------------
# The script's safety contracts (no cluster needed)
# ---------------------------------------------------------------------------------------------------------
def test_usage_errors_are_explained():
    proc = subprocess.run([SCRIPT, "restart", "/tmp/x"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "start  STATE_DIR" in proc.stdout


def test_stop_never_kills_a_process_it_did_not_start(tmp_path: Path):
    """A stale pid file whose pid now belongs to another program must not get that program killed."""
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "slurmd.pid").write_text(f"{stranger.pid}\n")
        proc = subprocess.run([SCRIPT, "stop", tmp_path], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert stranger.poll() is None, "stop killed a process that is not its slurmd"
        assert not (tmp_path / "run" / "slurmd.pid").exists(), "the stale pid file should be cleared"
    finally:
        stranger.kill()
        stranger.wait()


# ---------------------------------------------------------------------------------------------------------
# A real cluster
# ---------------------------------------------------------------------------------------------------------
def _cannot_run_cluster() -> str | None:
    if os.geteuid() != 0:
        return "starting Slurm daemons needs root"
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        return "Slurm is not installed and apt-get is not available to install it"
    system_conf = Path("/etc/slurm/slurm.conf")
    if system_conf.exists() and not system_conf.is_symlink():
        return "this machine has its own Slurm configuration"
    return None


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Start a cluster for this module; yield the environment its clients need; stop its daemons after."""
    reason = _cannot_run_cluster()
    if reason:
        pytest.skip(reason)
    state = tmp_path_factory.mktemp("slurm")
    try:
        # First use on a fresh machine installs the packages (apt-get): allow for a slow mirror.
        proc = subprocess.run([SCRIPT, "start", state], capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            pytest.fail(f"local-slurm.sh start failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        yield {
            "SLURM_CONF": str(state / "etc" / "slurm.conf"),
            "USER": "root",
            "LOCAL_SLURM_STATE": str(state),
            # The node's GPU is a fake gres: the jobs that reserve it (--device cuda) train on the CPU.
            "PDELRA_ALLOW_CPU": "1",
        }
    finally:
        subprocess.run([SCRIPT, "stop", state], capture_output=True, text=True, timeout=120)


def _daemon_pids(state: Path) -> dict[str, int]:
    return {pid_file.stem: int(pid_file.read_text()) for pid_file in (state / "run").glob("*.pid")}


@pytest.mark.slurm
@pytest.mark.slow
def test_start_is_idempotent(slurm_cluster: dict[str, str]):
    state = Path(slurm_cluster["LOCAL_SLURM_STATE"])
    before = _daemon_pids(state)
    assert set(before) == {"munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"}
    again = subprocess.run([SCRIPT, "start", state], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert _daemon_pids(state) == before, "a second start must reuse the running daemons"
    status = subprocess.run([SCRIPT, "status", state], capture_output=True, text=True, timeout=60)
    assert status.returncode == 0
    assert re.search(r"^node\s+idle$", status.stdout, flags=re.M), status.stdout


def _sacct(env: dict[str, str], job_ids: list[str]) -> dict[str, dict[str, str]]:
    proc = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "JobID,State,AllocTRES", "-j", ",".join(job_ids)],
        env=tool_env(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("|") for line in proc.stdout.splitlines() if line]
    return {job_id: {"state": state, "tres": tres} for job_id, state, tres in rows}


@pytest.mark.slurm
@pytest.mark.slow
def test_demo_grid_runs_through_the_slurm_profile(slurm_cluster: dict[str, str], tmp_path: Path):
    ws = make_workspace(tmp_path / "ws", slurm_config())
    command = snakemake_command(ws, ("--profile", "profiles/slurm", *TEST_OVERRIDES))
    # A hung snakemake waits for its jobs and ignores SIGTERM: `timeout -k` makes sure the test ends.
    proc = subprocess.run(
        ["timeout", "-k", "10", "240", *command],
        cwd=ws,
        env=tool_env(slurm_cluster),
        capture_output=True,
        text=True,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"snakemake exited {proc.returncode}:\n{log[-6000:]}"
    assert (ws / "results" / "tiny" / "report" / "index.html").is_file()
    assert (ws / "results" / "tiny" / "versioned.json").is_file()

    # Every training job went through Slurm, is in the accounting database, and only the GPU task got a GPU.
    submitted = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: .*?/rule_train/(\w+?)_", log))
    assert len(submitted) == 4, log[-3000:]
    accounted = _sacct(slurm_cluster, list(submitted))
    for job_id, task in submitted.items():
        assert accounted[job_id]["state"] == "COMPLETED"
        assert ("gres/gpu=1" in accounted[job_id]["tres"]) == (task == GPU_TASK), accounted[job_id]
    # Data and report rules stayed on the submit host.
    assert not re.search(
        r"submitted with SLURM jobid \d+ \(log: .*?/rule_(generate|preprocess|aggregate|report)", log
    )


# A user's part (docs/add-a-related-system.md: examples/toy_part.py copied into the project root, its config
# section as the doc writes it) through the generic part rule (workflow/rules/parts.smk) on the real cluster.
TOY_PART = REPO / "examples" / "toy_part.py"
RELATED_DOC = REPO / "docs" / "add-a-related-system.md"
SITE_QOS = "pdelra_site"  # a QOS of the test's own: the cluster's default QOS would pass unset as well


def _part_config() -> dict:
    """The Slurm test experiment cut to one LRA run (aggregate, and so the part's claim, waits for the
    grid), no diagnostics, the doc's toy section with one seed (two jobs: plain and boosted), and a site
    option set once in defaults.resources, where the generic part rule takes it from."""
    config = slurm_config()
    config["grids"]["main"].update(tasks=[GPU_TASK], variants=["none"])
    config["diagnostics"] = {"enabled": False}
    config.update(yaml.safe_load(re.findall(r"```yaml\n(.*?)```", RELATED_DOC.read_text(), re.S)[0]))
    config["toy"]["seeds"] = [0]
    config["defaults"]["resources"]["qos"] = SITE_QOS
    return config


def _add_site_qos(env: dict[str, str]) -> None:
    """Register SITE_QOS and allow it to the test account's association (sacctmgr refuses duplicates)."""
    if not _slurm(env, "sacctmgr", "-n", "-P", "show", "qos", SITE_QOS, "format=name"):
        _slurm(env, "sacctmgr", "-i", "add", "qos", SITE_QOS)
    _slurm(env, "sacctmgr", "-i", "modify", "user", "where", "name=root", f"account={ACCOUNT}",
           "set", f"qos+={SITE_QOS}")  # fmt: skip


@pytest.mark.slurm
@pytest.mark.slow
def test_a_users_part_runs_its_jobs_through_the_slurm_profile(slurm_cluster: dict[str, str], tmp_path: Path):
    """The toy part's jobs are Slurm jobs of the generic part rule: submitted with sbatch, COMPLETED in
    sacct, carrying the site's qos from defaults.resources and no GPU (the toy asks for none); each run was
    recorded while its job ran; its table and its judged claim come out of its tables rule and aggregate,
    and neither it nor the LRA run trained on the submit host."""
    env = slurm_cluster
    _add_site_qos(env)
    config = _part_config()
    ws = make_workspace(tmp_path / "ws", config)
    shutil.copyfile(TOY_PART, ws / "toy_part.py")
    results = ws / "results" / config["experiment"]
    tables = f"{results.relative_to(ws)}/tables"
    targets = (f"{tables}/toy_runs.csv", f"{tables}/claims.csv")
    log_path = tmp_path / "snakemake.log"
    started = time.time()
    smk = _start_run(ws, env, log_path, 300, targets)
    smk.wait(timeout=320)
    wall = time.time() - started
    log = log_path.read_text()
    assert smk.returncode == 0, f"snakemake exited {smk.returncode}:\n{log[-6000:]}"

    # Which rule each submission was: the plugin's log path names the rule and the job's wildcards.
    submitted = re.findall(r"submitted with SLURM jobid (\d+) \(log: .*?/rule_(\w+?)/(\S+?)/\d+\.log\)", log)
    by_rule: dict[str, list[tuple[str, str]]] = {}
    for job_id, rule, wildcards in submitted:
        by_rule.setdefault(rule, []).append((job_id, wildcards))
    assert sorted(by_rule) == ["toy_train", "train"] and len(by_rule["train"]) == 1, submitted
    toy_jobs = dict(by_rule["toy_train"])
    assert len(toy_jobs) == 2, submitted  # plain and boosted at seed 0, one attempt each
    # Nothing trained on the submit host: the local jobs are the data, tables and aggregate rules only
    # (diagnostics_table writes its empty table with the diagnostics off).
    local = set(re.findall(r"^localrule (\w+):", log, flags=re.M))
    assert local == {"generate", "preprocess", "toy_aggregate", "diagnostics_table", "aggregate"}, local

    # Slurm's record of every job of the run (in epoch seconds, to set the run files' times against).
    fields = "JobID,JobName,State,Submit,Start,End,QOS,AllocTRES"
    ids = [job_id for job_id, _, _ in submitted]
    epoch = {**env, "SLURM_TIME_FORMAT": "%s"}
    out = _slurm(epoch, "sacct", "-X", "-n", "-P", "-o", fields, "-j", ",".join(ids))
    rows = {row[0]: row for row in (line.split("|") for line in out.splitlines())}
    since = {job_id: [int(t) - int(started) for t in row[3:6]] for job_id, row in rows.items()}
    timeline = "\n".join(
        f"{job_id:>5} {rule:<9} {rows[job_id][2]:<10} submit +{since[job_id][0]:3d} s"
        f"  start +{since[job_id][1]:3d} s  end +{since[job_id][2]:3d} s"
        f"  qos={rows[job_id][6]}  {rows[job_id][7]}  [{wildcards}]"
        for job_id, rule, wildcards in sorted(submitted, key=lambda s: int(s[0]))
    )
    print(f"toy part through Slurm ({wall:.0f} s; times from snakemake's start, sacct's to 1 s):\n{timeline}")
    for job_id, wildcards in toy_jobs.items():
        _, _, state, _, start, end, qos, tres = rows[job_id]
        assert (state, qos) == ("COMPLETED", SITE_QOS), timeline
        assert "gres/gpu" not in tres, timeline  # the toy's TrainingJob asks for 0 GPUs
        variant = next(v for v in ("plain", "boosted") if v in wildcards)
        run = results / "toy" / "runs" / "toy" / variant / "h1" / "base" / "seed0"
        # `pdelra part run` writes its timing last, inside its job's window: the run ran in that Slurm job,
        # not beside it. (Not the run file's time: Snakemake touches a job's outputs once it has ended.)
        timing = run / "part_timing.json"
        assert int(start) - 1 <= timing.stat().st_mtime <= int(end) + 1, (timing, timeline)
        assert json.loads((run / "metrics.json").read_text())["device"] == "cpu"
    (train_id,) = (job_id for job_id, _ in by_rule["train"])
    assert rows[train_id][2] == "COMPLETED" and "gres/gpu=1" in rows[train_id][7], timeline

    toy_runs = pd.read_csv(results / "tables" / "toy_runs.csv")
    assert sorted(toy_runs["variant"]) == ["boosted", "plain"], toy_runs
    claim = pd.read_csv(results / "tables" / "claims.csv").set_index("claim_id").loc["toy_boost"]
    assert (claim["family"], claim["verdict"]) == ("toy", "reproduced"), claim
    assert claim["effect"] == pytest.approx(config["toy"]["gain"])


# ---------------------------------------------------------------------------------------------------------
# Faults a cluster run meets
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.slurm
@pytest.mark.slow
def test_placeholders_or_an_unreachable_cluster_stop_the_run_before_any_local_work(
    slurm_cluster: dict[str, str], tmp_path: Path
):
    """One message at the start, instead of hours of local downloads followed by pages of sbatch errors."""
    ws = make_workspace(tmp_path / "ws", slurm_config())
    conf = Path(slurm_cluster["SLURM_CONF"]).read_text()
    # The same cluster, as seen from a host whose controller and database ports lead nowhere.
    down = re.sub(r"(?m)^(SlurmctldPort|AccountingStoragePort)=\d+", r"\1=9", conf)
    (tmp_path / "down.conf").write_text(down)
    proc = subprocess.run(
        ["timeout", "-k", "10", "120", *snakemake_command(ws, ("--profile", "profiles/slurm"))],
        cwd=ws,
        env=tool_env({**slurm_cluster, "SLURM_CONF": str(tmp_path / "down.conf")}),
        capture_output=True,
        text=True,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log[-3000:]
    assert "Cannot use Slurm (nothing was started)" in log
    assert "placeholders SET-YOUR-ACCOUNT, SET-YOUR-GPU-PARTITION are still in default-resources" in log
    assert "`sinfo --noheader --format=%P` failed" in log and "`sacct --noheader" in log
    assert not (ws / "data").exists() and not (ws / "results").exists(), "local work started anyway"


# The two faults below each take minutes of waiting on Slurm (a time limit is at least a minute; the plugin's
# status checks back off by 10 s a round). One fixture runs both, one after the other, in the background,
# and each test waits for its own: the requeue first (its packed job takes both of the node's CPUs), then the
# time limit, calibrated just before it runs.
RUN = f"{GPU_TASK}/after_embedding/h1/base/seed0"
TARGET = f"results/tiny/runs/{RUN}/metrics.json"


def _fault_config(**train: Any) -> dict:
    config = slurm_config()
    config["grids"]["main"].update(tasks=[GPU_TASK], variants=["after_embedding"])
    config["defaults"]["train"].update(max_steps=None, batch_size=4, checkpoint_minutes=None, **train)
    return config


def _start_run(
    ws: Path, env: dict[str, str], log_path: Path, limit_s: int, targets: tuple[str, ...] = (TARGET,)
) -> subprocess.Popen[str]:
    """snakemake --profile profiles/slurm for the run(s), in the background (`timeout -k`: a hung snakemake
    waits for its jobs and ignores SIGTERM)."""
    command = snakemake_command(ws, (*targets, "--profile", "profiles/slurm", *TEST_OVERRIDES))
    with open(log_path, "w") as log:
        return subprocess.Popen(["timeout", "-k", "10", str(limit_s), *command], cwd=ws, env=tool_env(env),
                                stdout=log, stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _sacct_history(env: dict[str, str], job_ids: list[str]) -> list[list[str]]:
    """[JobID, State, Timelimit] of each job, every requeue of it included (-D), in order."""
    sacct = ["sacct", "-D", "-X", "-n", "-P", "-o", "JobID,State,Timelimit", "-j", ",".join(job_ids)]
    out = subprocess.run(sacct, env=tool_env(env), capture_output=True, text=True).stdout
    return [line.split("|") for line in out.split()]


def _job_ids(log: str) -> list[str]:
    return sorted(set(re.findall(r"submitted with SLURM jobid (\d+)", log)), key=int)


def _train_by_hand(ws: Path, run_config: str, out: Path) -> dict[str, Any]:
    """The run, uninterrupted, in a plain `pdelra train` process on the workspace's data: its metrics."""
    command = [str(VENV_BIN / "pdelra"), "train", "--run-config", run_config,
               "--data", str(ws / "data" / "processed" / GPU_TASK), "--out", str(out / "run"),
               "--checkpoint-dir", str(out / "ckpt")]  # fmt: skip
    done = subprocess.run(command, env=tool_env({"SLURM_CPUS_PER_TASK": "1"}), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "run" / "metrics.json").read_text())


PACKED_SEEDS = (0, 1)  # the requeue scenario's runs, trained in one packed job (resources.pack: 2)


def _requeue_scenario(env: dict[str, str], root: Path) -> dict[str, Any]:
    """Preemption of a packed job: two runs share the one job and its GPU; requeue it once both have
    checkpointed; then each run uninterrupted and alone, as an unpacked job would train it."""
    config = _fault_config(max_epochs=8, checkpoint_every_steps=1)
    config["grids"]["main"]["seeds"] = list(PACKED_SEEDS)
    config["tasks"][GPU_TASK]["resources"]["pack"] = len(PACKED_SEEDS)
    ws = make_workspace(root / "ws", config)
    runs = [RUN.replace("seed0", f"seed{seed}") for seed in PACKED_SEEDS]
    ckpts = [ws / "results" / "tiny" / "checkpoints" / run / "checkpoint.pt" for run in runs]
    targets = tuple(f"results/tiny/runs/{run}/metrics.json" for run in runs)
    log_path = root / "snakemake.log"
    smk = _start_run(ws, env, log_path, 400, targets)
    deadline = time.monotonic() + 200
    while not (all(ckpt.exists() for ckpt in ckpts) and _job_ids(log_path.read_text())):
        assert smk.poll() is None, log_path.read_text()[-4000:]
        assert time.monotonic() < deadline, "training never checkpointed"
        time.sleep(0.1)
    job_ids = _job_ids(log_path.read_text())
    requeue = subprocess.run(["scontrol", "requeue", job_ids[0]], env=tool_env(env), capture_output=True,
                             text=True)  # fmt: skip
    assert requeue.returncode == 0, requeue.stderr
    smk.wait(timeout=420)
    log = log_path.read_text()
    assert smk.returncode == 0, log[-6000:]
    metrics = [json.loads((ws / target).read_text()) for target in targets]
    return {
        "metrics": metrics,
        "job_ids": _job_ids(log),
        "history": _sacct_history(env, job_ids),
        "tres": _sacct(env, job_ids)[job_ids[0]]["tres"],
        "references": [
            _train_by_hand(ws, json.dumps(m["run_config"]), root / f"reference{seed}")
            for seed, m in zip(PACKED_SEEDS, metrics, strict=True)
        ],
    }


TIME_LIMIT_EPOCHS = 30  # ~30 s of training here: far past the first checkpoint, well inside the retry's 2 min


def _stop_training_at_its_first_checkpoint(ws: Path, log_path: Path, smk: subprocess.Popen[str]) -> None:
    """SIGSTOP the trainer once it has checkpointed, so that the job outlasts its limit whatever the CPU's
    speed: a fixed number of steps could end inside the minute on a fast or idle machine. Slurm sends the
    step SIGCONT, then SIGTERM, at the limit (slurmd's terminate), so the trainer wakes to the same signal an
    overrunning job gets, checkpoints and records it."""
    ckpt_dir = ws / "results" / "tiny" / "checkpoints" / RUN
    deadline = time.monotonic() + 200
    while not (ckpt_dir / "checkpoint.pt").exists():
        assert smk.poll() is None, log_path.read_text()[-4000:]
        assert time.monotonic() < deadline, "training never checkpointed"
        time.sleep(0.05)
    # The rule passes its checkpoint folder relative to the workspace, where the job runs: the trainer is the
    # `pdelra train` process of this run whose working directory is this workspace.
    trainer = f"pdelra train .*checkpoints/{RUN}"
    found = subprocess.run(["pgrep", "-f", trainer], capture_output=True, text=True)
    pids = [int(pid) for pid in found.stdout.split() if _cwd(int(pid)) == ws.resolve()]
    assert pids, f"no trainer process of {ckpt_dir}: {found.stdout!r}"
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)


def _cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")).resolve()
    except OSError:  # gone already
        return None


def _time_limit_scenario(env: dict[str, str], root: Path) -> dict[str, Any]:
    """Time limit: `runtime: 1` (minute) for a run whose trainer is stopped after its first checkpoint."""
    config = _fault_config(max_epochs=TIME_LIMIT_EPOCHS, patience=TIME_LIMIT_EPOCHS)
    config["tasks"][GPU_TASK]["resources"]["runtime"] = 1
    ws = make_workspace(root / "ws", config)
    log_path = root / "snakemake.log"
    smk = _start_run(ws, env, log_path, 600)
    try:
        _stop_training_at_its_first_checkpoint(ws, log_path, smk)
    finally:
        smk.wait(timeout=620)
    log = log_path.read_text()
    assert smk.returncode == 0, log[-6000:]
    lines = [
        line for path in (ws / "results" / "tiny" / "logs" / "train").rglob("*.log") for line in path.open()
    ]
    return {
        "metrics": json.loads((ws / TARGET).read_text()),
        "history": _sacct_history(env, _job_ids(log)),
        "trainer_log": "".join(line for line in lines if any(w in line for w in ("resum", "interrupt"))),
        "steps_per_epoch": config["data"]["generate"][GPU_TASK]["n_train"] // 4,
        "epochs": TIME_LIMIT_EPOCHS,
    }


@pytest.fixture(scope="module")
def cluster_faults(
    slurm_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[dict[str, Any]]]]:
    """Both fault scenarios, one after the other in the background; each test waits for its own."""
    root = tmp_path_factory.mktemp("faults")
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield {
            "requeue": pool.submit(_requeue_scenario, slurm_cluster, root / "requeue"),
            "time_limit": pool.submit(_time_limit_scenario, slurm_cluster, root / "time_limit"),
        }


@pytest.mark.slurm
@pytest.mark.slow
def test_a_requeued_packed_job_resumes_every_run_and_gives_the_unpacked_metrics(
    cluster_faults: dict[str, Future[dict[str, Any]]],
):
    """Preemption: Slurm requeues a running training job (SIGTERM, then the job starts again). The job is a
    pack of two runs: one Slurm job with one GPU, each run its own process that resumes from its own
    checkpoint and ends with the metrics it has trained alone, uninterrupted."""
    result = cluster_faults["requeue"].result(timeout=900)
    history = result["history"]
    assert len(result["job_ids"]) == 1, "both runs are trained by one Slurm job"
    assert "gres/gpu=1" in result["tres"] and f"cpu={len(PACKED_SEEDS)}" in result["tres"], result["tres"]
    states = [state for _, state, _ in history]
    assert "REQUEUED" in states and states[-1] == "COMPLETED", history
    for metrics, reference in zip(result["metrics"], result["references"], strict=True):
        assert metrics["resumed_count"] >= 1
        # Slurm's requeue sends SIGTERM (then SIGKILL): every stop the trainer recorded is one.
        assert {stop["signal"] for stop in metrics["interruptions"]} <= {"SIGTERM"}
        assert _same_run(metrics, reference)


@pytest.mark.slurm
@pytest.mark.slow
def test_a_training_job_past_its_time_limit_is_retried_with_more_time_and_resumes(
    cluster_faults: dict[str, Future[dict[str, Any]]],
):
    """Slurm stops the job at its limit with SIGTERM to every process of the step (the trainer checkpoints and
    records the signal), state TIMEOUT; the profile's retry asks for runtime x attempt, resumes, completes."""
    result = cluster_faults["time_limit"].result(timeout=900)
    metrics, attempts = result["metrics"], result["history"]
    seen = f"{attempts}\n{ {k: metrics[k] for k in ('resumed_count', 'interruptions', 'steps_run')} }\n"
    seen += result["trainer_log"]
    assert attempts[0][1:] == ["TIMEOUT", "00:01:00"], seen
    assert attempts[-1][1] == "COMPLETED", seen
    assert attempts[-1][2] == f"00:0{len(attempts)}:00", f"the retry asks for runtime x attempt:\n{seen}"
    assert metrics["status"] == "completed", seen
    assert metrics["steps_run"] == result["epochs"] * result["steps_per_epoch"], seen
    assert metrics["resumed_count"] == len(attempts) - 1, seen
    # The signal that reached the trainer before the kill: Slurm's SIGTERM at the limit, once per time-out.
    assert [stop["signal"] for stop in metrics["interruptions"]] == ["SIGTERM"] * (len(attempts) - 1), seen


# ---------------------------------------------------------------------------------------------------------
# The submit process dies mid-campaign: the rerun reattaches (pdelra.planning.reattach)
# ---------------------------------------------------------------------------------------------------------
REATTACH_EPOCHS = 15  # seconds of training: it must outlast the moment its job is suspended


def _wait_for(what: str, check: Any, proc: subprocess.Popen[str], log: Path, limit_s: float) -> Any:
    """Poll `check()` every 0.1 s until it is truthy; fail naming `what` when `proc` ends or time runs out."""
    deadline = time.monotonic() + limit_s
    while not (value := check()):
        assert proc.poll() is None, f"snakemake ended before {what}:\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"no {what} within {limit_s} s:\n{log.read_text()[-4000:]}"
        time.sleep(0.1)
    return value


def _slurm(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(list(args), env=tool_env(env), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


# A campaign of six runs, two of the node's CPUs: Snakemake is SIGKILLed with one job training (it holds its
# run's lock), one started but still parsing the workflow (no record anywhere yet), and the rest pending.
CAMPAIGN_VARIANTS = ("none", "after_embedding", "after_mlp")
CAMPAIGN_SEEDS = (0, 1)


def _campaign_config() -> dict:
    config = _fault_config(max_epochs=REATTACH_EPOCHS, patience=REATTACH_EPOCHS)
    config["tasks"][GPU_TASK]["resources"]["gpu"] = 0  # CPU jobs: two run at once on the node's two CPUs
    config["grids"]["main"].update(variants=list(CAMPAIGN_VARIANTS), seeds=list(CAMPAIGN_SEEDS))
    return config


def _states(env: dict[str, str], workdir: Path) -> dict[str, str]:
    """{job id: state} of this workspace's jobs still in the queue."""
    out = _slurm(env, "squeue", "--me", "-h", "-o", "%i|%T|%Z")
    rows = [line.split("|") for line in out.splitlines() if line]
    return {job: state for job, state, folder in rows if Path(folder).resolve() == workdir.resolve()}


@pytest.mark.slurm
@pytest.mark.slow
def test_the_rerun_after_a_killed_snakemake_takes_over_every_live_job_and_trains_each_run_once(
    slurm_cluster: dict[str, str], tmp_path: Path
):
    """The README's recovery (the same command again, no --unlock) after Snakemake is SIGKILLed mid-campaign:
    the rerun removes the dead run's lock itself, finds every job of the killed run (the training one, the
    one still starting, the pending ones) by the plugin's comment, and takes each over instead of submitting
    a twin. Each run is trained once, no job waits on a run lock, no restore-only job is submitted."""
    env = slurm_cluster
    config = _campaign_config()
    ws = make_workspace(tmp_path / "ws", config)
    runs = [f"{GPU_TASK}/{v}/h1/base/seed{s}" for v in CAMPAIGN_VARIANTS for s in CAMPAIGN_SEEDS]
    targets = [f"results/tiny/runs/{run}/metrics.json" for run in runs]
    records = {run: ws / "results" / "tiny" / "checkpoints" / run / "slurm_job" for run in runs}
    log = ws / "snakemake-background.log"
    # The README's command, as a user types it again after the crash (the test's site overrides added).
    checks = ("--max-status-checks-per-second", "10")
    command = (*targets, "--profile", "profiles/slurm", *TEST_OVERRIDES, *checks)
    first = start_snakemake(ws, *command, env=env)
    second = None
    suspended: list[str] = []
    try:
        # Two jobs start together; the later one is frozen while it still parses the workflow ("starting").
        running = _wait_for("two running jobs", lambda: sorted(
            (j for j, st in _states(env, ws).items() if st == "RUNNING"), key=int)[:2] if sum(
            st == "RUNNING" for st in _states(env, ws).values()) >= 2 else None, first, log, 240)  # fmt: skip
        training, starting = running
        _slurm(env, "scontrol", "suspend", starting)
        suspended.append(starting)
        assert not any(r.is_file() and r.read_text().strip() == starting for r in records.values())
        holder = _wait_for("a job holding its run's lock",
                           lambda: next((run for run, r in records.items() if r.is_file()
                                         and r.read_text().strip() == training), None),
                           first, log, 120)  # fmt: skip
        _slurm(env, "scontrol", "suspend", training)  # still training when the rerun comes
        suspended.append(training)
        os.killpg(first.pid, signal.SIGKILL)  # the submit host dies: nothing is cancelled
        killed_at = time.strftime("%H:%M:%S")
        first.wait(timeout=30)
        first_log = log.read_text()
        old_jobs = _job_ids(first_log)
        before = _states(env, ws)
        assert len(old_jobs) == len(runs) and set(before) == set(old_jobs), (before, first_log[-3000:])
        assert list(before.values()).count("PENDING") >= 2, before

        second = start_snakemake(ws, *command, env=env)  # the recovery: the same command, nothing else
        taken = ws / "results" / "tiny" / "cluster" / "twins.log"
        _wait_for("the rerun taking the old jobs over",
                  lambda: taken.is_file() and taken.read_text().count("took over job") == len(runs),
                  second, log, 180)  # fmt: skip
        for job in suspended:
            _slurm(env, "scontrol", "resume", job)
        second.wait(timeout=400)
        second_log = log.read_text()
        assert second.returncode == 0, second_log[-6000:]
    finally:
        for proc in filter(None, (first, second)):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        for job in _states(env, ws):  # nothing left running for the next test
            subprocess.run(["scancel", job], env=tool_env(env), capture_output=True)

    fields = "JobID,JobName%40,State,Submit,Start,End,WorkDir%200"
    rows = [line.split("|") for line in _slurm(env, "sacct", "-X", "-n", "-P", "-o", fields,
                                                 "-S", "now-1hour").splitlines()]  # fmt: skip
    ours = [row[:6] for row in rows if Path(row[6]).resolve() == ws.resolve()]
    timeline = "\n".join(" | ".join(row) for row in ours)
    pending = [j for j, st in before.items() if st == "PENDING"]
    header = "JobID | JobName | State | Submit | Start | End"
    print(f"campaign timeline (SIGKILL at {killed_at}: training {training} [{holder}], starting {starting}; "
          f"pending {pending}):"
          f"\n{header}\n{timeline}\n--- twins.log\n{taken.read_text()}")  # fmt: skip
    # No twin, no restore-only job: the six jobs of the killed run are all there is, each completed, each now
    # named with the rerun's ID (the plugin's status checks followed them).
    assert sorted(row[0] for row in ours) == sorted(old_jobs), timeline
    assert {row[2] for row in ours} == {"COMPLETED"}, timeline
    assert len({row[1] for row in ours}) == 1 and ours[0][1] not in first_log, timeline
    rerun_part = second_log.split("Removed the lock left by Snakemake", 1)[-1]
    assert set(_job_ids(rerun_part)) == set(old_jobs), rerun_part[-3000:]  # the plugin followed the old ids
    assert "Removed the lock left by Snakemake pid" in second_log, second_log[-4000:]
    steps = config["data"]["generate"][GPU_TASK]["n_train"] // 4 * REATTACH_EPOCHS
    for run in runs:
        metrics = json.loads((ws / "results" / "tiny" / "runs" / run / "metrics.json").read_text())
        trained = (metrics["status"], metrics["resumed_count"], metrics["steps_run"])
        assert trained == ("completed", 0, steps), run
        trainer_log = (ws / "results" / "tiny" / "logs" / "train" / f"{run}.log").read_text()
        assert "is locked by" not in trainer_log and "nothing left to train" not in trainer_log, trainer_log
        assert not records[run].exists()
