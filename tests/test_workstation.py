"""One GPU workstation without Slurm: profiles/workstation rations the card, and a job that reserved a GPU
on a machine without CUDA stops before training instead of training on the CPU unnoticed."""

from __future__ import annotations

import json
import logging
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import REPO, run_snakemake
from test_training import make_task, run_config

from pdelra.cli import main
from pdelra.training import device as D

PROFILE = REPO / "profiles" / "workstation"

# Three training jobs that reserve the card, asking for memory as the paper config does (more than the
# profile's pool), and a diagnose job that does not reserve it; each records when it ran. The rule names are
# the workflow's, so the profile's set-resources apply to them as to the real rules.
SNAKEFILE = textwrap.dedent(
    """
    rule all:
        input: expand("times/gpu{i}", i=range(3)), "times/cpu"

    rule train:
        output: "times/gpu{i}"
        resources: gpu=1, mem_mb=64000
        shell: "s=$(date +%s.%N); sleep 1; echo $s $(date +%s.%N) > {output}"

    rule diagnose:
        output: "times/cpu"
        resources: gpu=0, mem_mb=4000
        shell: "s=$(date +%s.%N); sleep 1; echo $s $(date +%s.%N) > {output}"
    """
)


def _intervals(workdir: Path) -> dict[str, tuple[float, float]]:
    """Run the throw-away workflow with the workstation profile; (start, end) of each job."""
    proc = run_snakemake(
        workdir,
        "--profile",
        "profiles/workstation",
        "--workflow-profile",
        "none",
        "--cores",
        "4",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    times = {}
    for path in (workdir / "times").iterdir():
        start, end = map(float, path.read_text().split())
        times[path.name] = (start, end)
    return times


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.slow  # Snakemake runs four jobs on the profile
def test_the_workstation_profile_runs_one_gpu_job_at_a_time_and_cpu_jobs_beside_it(tmp_path: Path) -> None:
    profile = yaml.safe_load((PROFILE / "profile.yaml").read_text())
    assert {"gpu=1", "dvc=1"} <= set(profile["resources"])
    assert any(item.startswith("mem_mb=") for item in profile["resources"])
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    shutil.copytree(PROFILE, tmp_path / "profiles" / "workstation")

    times = _intervals(tmp_path)  # 4 cores, so only the gpu and mem_mb resources can keep jobs apart
    gpu = [times[f"gpu{i}"] for i in range(3)]
    assert not any(_overlap(a, b) for i, a in enumerate(gpu) for b in gpu[i + 1 :]), times
    # The CPU job waited neither for the card nor for memory: a training job's 64 GB request, capped to the
    # whole pool, once held all of it (and the overlap test can see jobs that ran at once).
    assert any(_overlap(times["cpu"], a) for a in gpu), times


def test_the_workstation_profile_sizes_every_training_rule_below_its_pool() -> None:
    from pdelra.planning import experiment

    profile = yaml.safe_load((PROFILE / "profile.yaml").read_text())
    pool = next(int(item.split("=")[1]) for item in profile["resources"] if item.startswith("mem_mb="))
    memory = {item.split(":")[0]: int(item.split("=")[1]) for item in profile["set-resources"]}
    # Every single-run training rule (packs are a cluster's) leaves room for a diagnose job (4 GB).
    assert set(memory) == set(experiment.TRAINING_RULES) - {"train_pack"}
    assert all(mem + 4000 <= pool for mem in memory.values()), memory


# ------------------------------------------------------------------------------------- the no-CUDA refusal


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(D.torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv(D.ALLOW_CPU_ENV, raising=False)


def test_a_run_that_asked_for_a_gpu_stops_before_training_where_there_is_no_cuda(
    no_cuda: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    task_dir = make_task(tmp_path / "processed")
    argv = ["train", "--run-config", json.dumps(run_config()), "--data", str(task_dir),
            "--out", str(tmp_path / "run"), "--checkpoint-dir", str(tmp_path / "ckpt")]  # fmt: skip
    assert main([*argv, "--device", "cuda"]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "\n" not in errors[0]
    assert errors[0].startswith("this run asked for a GPU (--device cuda")
    assert "torch finds no CUDA device" in errors[0]
    assert f"set {D.ALLOW_CPU_ENV}=1 or pass --allow-cpu, or set resources.gpu: 0" in errors[0]
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "run").exists()  # nothing was started


def test_the_cpu_is_allowed_on_purpose_and_cpu_runs_never_need_a_flag(
    no_cuda: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert D.choose_device("cpu") == "cpu"
    assert D.choose_device("auto") == "cpu"
    assert D.choose_device("cuda", allow_cpu=True) == "cpu"
    with pytest.raises(D.DeviceError):
        D.choose_device("cuda")
    monkeypatch.setenv(D.ALLOW_CPU_ENV, "0")  # 0 is not a yes
    with pytest.raises(D.DeviceError):
        D.choose_device("cuda")
    monkeypatch.setenv(D.ALLOW_CPU_ENV, "1")
    assert D.choose_device("cuda") == "cpu"


def test_cuda_is_used_when_asked_for_and_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(D.torch.cuda, "is_available", lambda: True)
    assert D.choose_device("cuda") == "cuda"
    assert D.choose_device("auto") == "cuda"
    assert D.choose_device("cpu") == "cpu"  # a job that reserved no GPU leaves the card alone


def test_jobs_sharing_a_machine_with_two_cards_take_one_card_each(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With --resources gpu=2 Snakemake runs two GPU jobs at once without saying which card is whose."""
    import types

    monkeypatch.setattr(D.torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(
        D.torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(uuid=f"card{i}")
    )
    monkeypatch.setenv(D.GPU_LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(D, "_HELD_CARDS", [])
    assert [D.claim_cuda_device(), D.claim_cuda_device()] == [0, 1]  # each flock is a job's process
    assert D.claim_cuda_device() == 0  # all taken: share the first rather than fail
    D._HELD_CARDS[0].close()  # the first job ended: its card is free again
    assert D.claim_cuda_device() == 0
    for handle in D._HELD_CARDS:
        handle.close()
