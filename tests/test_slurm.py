"""The Slurm profile against a real Slurm cluster (scripts/local-slurm.sh), and the script's own contracts.

The end-to-end tests start a single-node cluster on 127.0.0.1 in a temporary state folder (installing the
Debian packages on a fresh machine), run the tiny demo grid through `snakemake --profile profiles/slurm` with
one task asking for a GPU (the node's fake gres), and stop exactly the daemons they started.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import (
    REPO,
    VENV_BIN,
    load_config,
    make_workspace,
    parse_job_counts,
    run_snakemake,
    snakemake_command,
    tool_env,
)
from test_faults import _same_run

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


def test_dry_run_requests_come_from_the_config(tmp_path: Path):
    """A dry run through the profile shows each training job with its task's gpu, memory and runtime."""
    config = slurm_config()
    config["tasks"]["retrieval"]["resources"] = {"mem_mb": 700, "runtime": 9}
    ws = make_workspace(tmp_path / "ws", config)
    proc = subprocess.run(
        snakemake_command(ws, ("--profile", "profiles/slurm", *TEST_OVERRIDES, "-n")),
        cwd=ws,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
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
    started = time.monotonic()
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
    assert time.monotonic() - started < 200

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


def _squeue_running(env: dict[str, str]) -> list[str]:
    proc = subprocess.run(
        ["squeue", "-h", "-t", "RUNNING", "-o", "%i"], env=tool_env(env), capture_output=True, text=True
    )
    return proc.stdout.split()


@pytest.mark.slurm
@pytest.mark.slow
def test_a_requeued_training_job_resumes_and_gives_the_uninterrupted_metrics(
    slurm_cluster: dict[str, str], tmp_path: Path
):
    """Preemption: Slurm requeues a running training job (SIGTERM, then the job starts again)."""
    config = slurm_config()
    config["grids"]["main"].update(tasks=[GPU_TASK], variants=["after_embedding"])
    config["defaults"]["train"].update(
        max_steps=None, max_epochs=8, batch_size=4, checkpoint_every_steps=1, checkpoint_minutes=None
    )
    ws = make_workspace(tmp_path / "ws", config)
    run = ("listops", "after_embedding", "h1", "base", 0)
    ckpt = ws / "results" / "tiny" / "checkpoints" / "/".join(map(str, run[:-1])) / "seed0" / "checkpoint.pt"
    metrics_file = ws / "results" / "tiny" / "runs" / "/".join(map(str, run[:-1])) / "seed0" / "metrics.json"
    command = [
        "timeout",
        "-k",
        "10",
        "300",
        # Only the run itself is the target: aggregation and the report are tested elsewhere.
        *snakemake_command(
            ws, ("--profile", "profiles/slurm", *TEST_OVERRIDES, str(metrics_file.relative_to(ws)))
        ),
    ]
    log_path = tmp_path / "snakemake.log"
    with open(log_path, "w") as log:
        smk = subprocess.Popen(command, cwd=ws, env=tool_env(slurm_cluster), stdout=log,
                               stderr=subprocess.STDOUT, text=True)  # fmt: skip
    deadline = time.monotonic() + 200
    while not ckpt.exists():
        assert smk.poll() is None, log_path.read_text()[-4000:]
        assert time.monotonic() < deadline, "training never checkpointed"
        time.sleep(0.1)
    running = _squeue_running(slurm_cluster)
    assert len(running) == 1, running
    requeue = subprocess.run(["scontrol", "requeue", running[0]], env=tool_env(slurm_cluster),
                             capture_output=True, text=True)  # fmt: skip
    assert requeue.returncode == 0, requeue.stderr
    smk.wait(timeout=320)
    assert smk.returncode == 0, log_path.read_text()[-6000:]

    metrics = json.loads(metrics_file.read_text())
    assert metrics["resumed_count"] >= 1
    history = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "-o", "JobID,State", "-j", running[0]],
                             env=tool_env(slurm_cluster), capture_output=True, text=True).stdout  # fmt: skip
    assert "REQUEUED" in history and "COMPLETED" in history, history

    # The same run, uninterrupted, in a plain process on the same data.
    reference = tmp_path / "reference"
    train = [str(VENV_BIN / "pdelra"), "train", "--run-config", json.dumps(metrics["run_config"]),
             "--data", str(ws / "data" / "processed" / "listops"), "--out", str(reference / "run"),
             "--checkpoint-dir", str(reference / "ckpt")]  # fmt: skip
    done = subprocess.run(train, env=tool_env({"SLURM_CPUS_PER_TASK": "1"}), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = json.loads((reference / "run" / "metrics.json").read_text())
    assert _same_run(metrics, expected)


def _seconds_per_epoch(root: Path, config: dict, target: str) -> float:
    """Wall seconds per epoch of the run `target` (its metrics.json) of `config`, measured by training it for
    40 epochs here with the run config the workflow gives it."""
    config = copy.deepcopy(config)
    config["defaults"]["train"].update(max_epochs=40, patience=40)
    ws = make_workspace(root, config)
    data = Path(config["data"]["processed_dir"]) / GPU_TASK
    run_snakemake(ws, "-c1", str(data / "manifest.json"), check=True)
    dry_run = run_snakemake(ws, "-n", "-p", target, check=True).stdout
    run_config = re.search(r"--run-config '(\{.*?\})'", dry_run).group(1)
    command = [str(VENV_BIN / "pdelra"), "train", "--run-config", run_config, "--data", str(ws / data),
               "--out", str(root / "run"), "--checkpoint-dir", str(root / "ckpt")]  # fmt: skip
    done = subprocess.run(command, env=tool_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((root / "run" / "metrics.json").read_text())["wall_time_s"] / 40


@pytest.mark.slurm
@pytest.mark.slow
def test_a_training_job_past_its_time_limit_is_retried_with_more_time_and_resumes(
    slurm_cluster: dict[str, str], tmp_path: Path
):
    """Time limit: a run that trains ~110 s under `runtime: 1` (minute). Slurm stops it at the limit with
    SIGTERM to every process of the step (the trainer checkpoints and records the signal), state TIMEOUT;
    the profile's retry asks for runtime x attempt, resumes from the checkpoint and completes."""
    config = slurm_config()
    config["grids"]["main"].update(tasks=[GPU_TASK], variants=["after_embedding"])
    config["defaults"]["train"].update(max_steps=None, batch_size=4, checkpoint_minutes=None)
    config["tasks"][GPU_TASK]["resources"]["runtime"] = 1
    steps_per_epoch = config["data"]["generate"][GPU_TASK]["n_train"] // 4
    target = f"results/tiny/runs/{GPU_TASK}/after_embedding/h1/base/seed0/metrics.json"
    # Slurm enforces limits every 30 s, so the kill comes 60-90 s into the job: train ~110 s on this machine
    # (a run that ends just before the kill would time out in Snakemake's own epilogue instead).
    epochs = math.ceil(110 / _seconds_per_epoch(tmp_path / "calibrate", config, target))
    config["defaults"]["train"].update(max_epochs=epochs, patience=epochs)
    ws = make_workspace(tmp_path / "ws", config)
    metrics_file = ws / target
    command = snakemake_command(ws, (target, "--profile", "profiles/slurm", *TEST_OVERRIDES))
    proc = subprocess.run(["timeout", "-k", "10", "480", *command], cwd=ws, env=tool_env(slurm_cluster),
                          capture_output=True, text=True)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]

    job_ids = sorted(set(re.findall(r"submitted with SLURM jobid (\d+)", log)), key=int)
    sacct = ["sacct", "-X", "-n", "-P", "-o", "JobID,State,Timelimit", "-j", ",".join(job_ids)]
    history = subprocess.run(sacct, env=tool_env(slurm_cluster), capture_output=True, text=True).stdout
    attempts = [line.split("|") for line in history.split()]
    assert attempts[0][1:] == ["TIMEOUT", "00:01:00"], history
    assert attempts[-1][1] == "COMPLETED", history
    assert attempts[-1][2] == f"00:0{len(attempts)}:00", f"the retry asks for runtime x attempt:\n{history}"

    metrics = json.loads(metrics_file.read_text())
    logs = (ws / "results" / "tiny" / "logs" / "train").rglob("*.log")
    lines = [line for path in logs for line in path.open()]
    seen = f"{history}\n{ {k: metrics[k] for k in ('resumed_count', 'interruptions', 'steps_run')} }\n"
    seen += "".join(line for line in lines if "resum" in line or "interrupt" in line)
    assert metrics["status"] == "completed" and metrics["steps_run"] == epochs * steps_per_epoch, seen
    assert metrics["resumed_count"] == len(attempts) - 1, seen
    # The signal that reached the trainer before the kill: Slurm's SIGTERM at the limit, once per time-out.
    assert [stop["signal"] for stop in metrics["interruptions"]] == ["SIGTERM"] * (len(attempts) - 1), seen
