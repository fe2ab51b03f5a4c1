"""The one-job smoke test before a campaign (`pdelra smoke`, rule smoke), and the nodes whose GPU torch
cannot see: a job there records its node once, and the workflow's next submissions exclude it
(pdelra.training.bad_nodes)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
import yaml
from conftest import TEST_CONFIGS, load_config, make_workspace, run_snakemake

from pdelra.cli import main
from pdelra.planning import smoke
from pdelra.training import bad_nodes
from pdelra.training import device as D

TINY = str(TEST_CONFIGS / "tiny.yaml")


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(D.torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv(D.ALLOW_CPU_ENV, raising=False)


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.strip().splitlines()


def test_smoke_on_the_cpu_steps_each_task_once_and_says_the_gpu_checks_were_skipped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["smoke", TINY, "--device", "cpu"]) == 0
    lines = _lines(capsys)
    assert lines[0] == "skip  cuda, bf16: the GPU checks were skipped (--device cpu)"
    assert [line.split(":")[0] for line in lines[1:3]] == ["ok    listops", "ok    retrieval"]
    assert all("one step at batch 16 × 64 tokens" in line for line in lines[1:3])
    assert lines[3] == "smoke test passed: 2 check(s) on cpu"


def test_a_model_that_breaks_at_the_real_length_fails_naming_its_task(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = smoke._baseline_model

    def breaking(task, data, model_cfg, fused, device):  # type: ignore[no-untyped-def]
        model, opt, cfg = real(task, data, model_cfg, fused, device)
        forward = model.forward

        def guarded(tokens, *rest):  # type: ignore[no-untyped-def]
            if tokens.shape[1] > 32:  # fine on short tests, not at the task's max_length (64)
                raise RuntimeError("CUDA out of memory. Tried to allocate 80.00 GiB\nmore detail")
            return forward(tokens, *rest)

        model.forward = guarded
        return model, opt, cfg

    monkeypatch.setattr(smoke, "_baseline_model", breaking)
    assert main(["smoke", TINY, "--device", "cpu"]) == 1
    lines = _lines(capsys)
    assert lines[1] == "FAIL  listops: RuntimeError: CUDA out of memory. Tried to allocate 80.00 GiB"
    assert lines[2] == "smoke test failed at listops"
    assert len(lines) == 3  # stops at the first failure


def test_smoke_fails_at_cuda_where_the_jobs_ask_for_a_gpu_and_torch_sees_none(
    no_cuda: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config("tiny")
    config["defaults"]["resources"]["gpu"] = 1
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["smoke", str(path)]) == 1
    lines = _lines(capsys)
    assert lines[0].startswith("FAIL  cuda: SmokeFailure: no CUDA device visible to torch")
    assert "recorded" not in lines[0]  # outside the workflow ($PDELRA_BAD_NODES unset): no record
    assert lines[1] == "smoke test failed at cuda"


def test_a_smoke_job_on_a_node_without_cuda_records_the_node_as_a_training_job_does(
    no_cuda: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config("tiny")
    config["defaults"]["resources"]["gpu"] = 1
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(config))
    record = tmp_path / "cluster" / "bad_nodes.txt"
    monkeypatch.setenv(bad_nodes.BAD_NODES_ENV, str(record))
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    assert main(["smoke", str(path)]) == 1
    assert _lines(capsys)[0].endswith(f"; node gpu07 recorded in {record}")
    assert bad_nodes.read_bad_nodes(record) == ["gpu07"]
    monkeypatch.setenv(D.ALLOW_CPU_ENV, "1")  # the CPU allowed on purpose: the steps run, nothing failed
    assert main(["smoke", str(path)]) == 0
    lines = _lines(capsys)
    why = f"no CUDA, and the CPU is allowed by {D.ALLOW_CPU_ENV}"
    assert lines[0] == f"skip  cuda, bf16: the GPU checks were skipped ({why})"
    assert lines[-1] == "smoke test passed: 2 check(s) on cpu"


# ---------------------------------------------------------------------------------------------------------
# Bad nodes
# ---------------------------------------------------------------------------------------------------------
def test_a_node_is_recorded_once_however_many_jobs_fail_on_it(tmp_path: Path) -> None:
    path = tmp_path / "cluster" / "bad_nodes.txt"
    assert bad_nodes.read_bad_nodes(path) == []
    added = []
    threads = [threading.Thread(target=lambda: added.append(bad_nodes.record_bad_node(path, "gpu07")))
               for _ in range(8)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(added) == [False] * 7 + [True]
    assert bad_nodes.record_bad_node(path, "gpu12")
    assert path.read_text() == "gpu07\ngpu12\n"
    assert bad_nodes.read_bad_nodes(path) == ["gpu07", "gpu12"]


def test_a_job_that_finds_no_gpu_records_its_node_and_says_so(
    no_cuda: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bad_nodes.txt"
    monkeypatch.setenv(bad_nodes.BAD_NODES_ENV, str(path))
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    for _ in range(2):
        with pytest.raises(D.DeviceError, match=f"node gpu07 recorded in {path}$"):
            D.choose_device("cuda")
    assert path.read_text() == "gpu07\n"
    assert D.choose_device("cpu") == "cpu" and D.choose_device("auto") == "cpu"  # no GPU asked: no record
    monkeypatch.delenv(bad_nodes.BAD_NODES_ENV)  # outside the workflow: nothing recorded, nothing said
    with pytest.raises(D.DeviceError) as err:
        D.choose_device("cuda")
    assert "recorded" not in str(err.value)


def test_the_exclusion_flag_is_merged_with_the_configured_slurm_extra(tmp_path: Path) -> None:
    path = tmp_path / "bad_nodes.txt"
    assert bad_nodes.slurm_extra(path) is None
    assert bad_nodes.slurm_extra(path, "--mail-type=FAIL") == "--mail-type=FAIL"
    path.write_text("gpu07\ngpu12\n")
    assert bad_nodes.slurm_extra(path) == "--exclude=gpu07,gpu12"
    assert bad_nodes.slurm_extra(path, "--mail-type=FAIL") == "--mail-type=FAIL --exclude=gpu07,gpu12"
    assert (  # one --exclude: sbatch keeps only the last of several
        bad_nodes.slurm_extra(path, "--exclude=gpu01 --mail-type=FAIL")
        == "--mail-type=FAIL --exclude=gpu01,gpu07,gpu12"
    )
    assert bad_nodes.slurm_extra(path, "-x gpu07,gpu02") == "--exclude=gpu07,gpu02,gpu12"


def test_the_workflow_submits_its_jobs_with_the_recorded_nodes_excluded(tmp_path: Path) -> None:
    """The resource function of resources.smk, in a dry run: no flag until a node is recorded, then the
    exclusion merged with the task's configured slurm_extra (read again at each submission)."""
    config = load_config("tiny")
    config["tasks"]["listops"]["resources"] = {"slurm_extra": "--mail-type=FAIL"}
    ws = make_workspace(tmp_path, config)

    def extras() -> set[str]:
        out = run_snakemake(ws, "-n", "--cores", "1", check=True).stdout
        return {
            line.split("slurm_extra=")[1].split(", mem")[0]
            for line in out.splitlines()
            if "slurm_extra=" in line
        }

    assert extras() == {"--mail-type=FAIL"}
    record = ws / "results" / "tiny" / "cluster" / "bad_nodes.txt"
    bad_nodes.record_bad_node(record, "gpu07")
    assert extras() == {"--mail-type=FAIL --exclude=gpu07", "--exclude=gpu07"}


@pytest.mark.slow  # Snakemake runs the smoke job: a real `pdelra smoke` process
def test_the_smoke_rule_runs_pdelra_smoke_on_the_workflows_config_before_any_training(tmp_path: Path) -> None:
    """cluster.smoke: rule smoke runs `pdelra smoke` on the resolved config (a YAML file it accepts) and
    writes smoke/any.ok; until then every training job waits on it, after it none reruns it."""
    config = load_config("tiny")
    config["cluster"] = {"smoke": True}
    ws = make_workspace(tmp_path, config)
    planned = run_snakemake(ws, "-n", "--cores", "1", check=True).stdout
    assert re.search(r"^smoke\s+1$", planned, re.M) and re.search(r"^train\s+4$", planned, re.M)
    train_blocks = [block for block in planned.split("\nrule ")[1:] if block.startswith("train:")]
    assert train_blocks and all("results/tiny/cluster/smoke/any.ok" in block for block in train_blocks)
    run_snakemake(ws, "results/tiny/cluster/smoke/any.ok", "--cores", "1", check=True)
    log = (ws / "results" / "tiny" / "logs" / "smoke" / "any.log").read_text().splitlines()
    assert log[-1] == "smoke test passed: 2 check(s) on cpu"
    after = run_snakemake(ws, "-n", "--cores", "1", check=True).stdout
    assert not re.search(r"^smoke\s", after, re.M) and re.search(r"^train\s+4$", after, re.M)
