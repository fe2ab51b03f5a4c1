"""The Snakemake DAG, checked with real snakemake dry runs (fast: no job runs)."""

from __future__ import annotations

import itertools
import re
import resource
from pathlib import Path

import yaml
from conftest import REPO, dry_run_jobs, load_config, make_workspace, run_snakemake


def paper_config() -> dict:
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def test_lint_is_clean_for_paper_and_demo_configs(tmp_path: Path) -> None:
    for name in ("config", "demo"):
        workspace = make_workspace(
            tmp_path / name, yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())
        )
        proc = run_snakemake(workspace, "--lint", timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Congratulations, your workflow is in a good condition" in proc.stdout + proc.stderr


def test_paper_config_has_the_245_distinct_training_jobs_and_plans_fast(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "ws", paper_config())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    jobs = dry_run_jobs(workspace)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert jobs["train"] == 245  # 200 main + 45 multiscale runs not already in main
    assert jobs["preprocess"] == 5
    assert jobs["aggregate"] == jobs["report"] == 1
    # A guard against a pathological DAG (e.g. quadratic input expansion): ~5 s when idle. The dry run's CPU
    # time, not the wall clock, which a loaded machine stretches by its load whatever the DAG (the other
    # sessions' tests, a demo beside it). `pdelra bench workflow-scale` measures the workflow at 10,000 runs.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 45, f"dry run of the paper config took {cpu:.1f} s of CPU"


def test_the_related_grid_adds_its_runs_once(tmp_path: Path) -> None:
    config = paper_config()
    config["run_grids"] = ["main", "multiscale", "related"]
    jobs = dry_run_jobs(make_workspace(tmp_path / "ws", config))
    assert jobs["train"] == 245 + 5 * 5 * 5


def test_real_data_fetches_each_archive_once_and_extracts_it_once(tmp_path: Path) -> None:
    jobs = dry_run_jobs(make_workspace(tmp_path / "ws", paper_config()))
    assert jobs["fetch"] == 3
    assert jobs["extract_lra_release"] == jobs["extract_imdb"] == jobs["extract_cifar10"] == 1
    assert "generate" not in jobs


def test_demo_runs_every_grid_on_generated_data(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    jobs = dry_run_jobs(make_workspace(tmp_path / "ws", config))
    assert jobs["generate"] == jobs["preprocess"] == 5
    # Every distinct (task, variant, scale, setting, seed) of the selected grids, each trained once.
    distinct = {
        run
        for name in config["run_grids"]
        for run in itertools.product(
            *(config["grids"][name][key] for key in ("tasks", "variants", "scales")),
            config["grids"][name].get("settings") or ["base"],
            config["grids"][name]["seeds"],
        )
    }
    assert jobs["train"] == len(distinct) > 5 * 8  # at least the main grid on every task
    assert "fetch" not in jobs


def test_training_jobs_get_their_task_resources_and_longer_runtime_on_retry(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["tasks"]["retrieval"]["resources"] = {"gpu": 1, "cpus_per_task": 3, "mem_mb": 4321, "runtime": 7}
    workspace = make_workspace(tmp_path / "ws", config)
    proc = run_snakemake(workspace, "-n", "-p", "--forceall", timeout=60, check=True)
    output = proc.stdout + proc.stderr
    parts = re.split(r"^rule (\w+):", output, flags=re.M)
    blocks = [body for name, body in zip(parts[1::2], parts[2::2], strict=True) if name == "train"]
    assert len(blocks) == 4
    for block in blocks:
        task = re.search(r"wildcards: task=(\w+)", block)[1]
        resources = re.search(r"resources: (.*)", block)[1]
        if task == "retrieval":
            assert "gpu=1" in resources and "cpus_per_task=3" in resources
            assert "mem_mb=4321" in resources and "runtime=7" in resources
            assert "--device cuda" in block  # a job that reserved the GPU refuses to start without CUDA
        else:
            assert "gpu=0" in resources and "cpus_per_task=1" in resources and "runtime=5" in resources
            assert "--device cpu" in block  # one that reserved none leaves the card alone
    # runtime grows with the attempt up to cluster.max_runtime: tests/test_slurm_submit.py reads every
    # attempt's -t off the submitted sbatch lines


def test_checkpoints_live_outside_the_declared_outputs(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "ws")
    proc = run_snakemake(workspace, "-n", "-p", "--forceall", timeout=60, check=True)
    for line in (proc.stdout + proc.stderr).splitlines():
        if "pdelra train " in line:
            checkpoint = re.search(r"--checkpoint-dir (\S+)", line)[1]
            out = re.search(r"--out (\S+)", line)[1]
            assert checkpoint.startswith("results/tiny/checkpoints/")
            assert not checkpoint.startswith(out) and not out.startswith(checkpoint)


def test_nothing_outside_the_run_slice_is_a_training_param(tmp_path: Path) -> None:
    """Editing data URLs, other grids or the report must not change any training job's params."""
    base = make_workspace(tmp_path / "a")
    config = load_config("tiny")
    config["grids"]["related"] = {
        "tasks": ["listops"],
        "variants": ["physqk"],
        "scales": ["h1"],
        "seeds": [3],
    }
    config["data"]["downloads"] = {"imdb": {"url": "http://127.0.0.1:1/x.tar.gz", "md5": None}}
    edited = make_workspace(tmp_path / "b", config)

    def train_lines(ws: Path) -> list[str]:
        proc = run_snakemake(ws, "-n", "-p", "--forceall", timeout=60, check=True)
        return sorted(line for line in (proc.stdout + proc.stderr).splitlines() if "pdelra train " in line)

    assert train_lines(base) == train_lines(edited)


def test_fetch_checks_published_md5s_and_records_the_unpublished_one(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "ws", paper_config())
    proc = run_snakemake(workspace, "-n", "-p", timeout=60, check=True)
    fetches = {
        re.search(r"--out \S+/downloads/([\w-]+)\.", line)[1]: line
        for line in (proc.stdout + proc.stderr).splitlines()
        if "pdelra fetch " in line
    }
    # The LRA sources, then Continuous-Time Attention's own (its archives, the WordPiece vocabulary, and
    # WikiText-103 with the TinyLlama tokenizer for its LM).
    assert sorted(fetches) == ["agnews", "bert_uncased_vocab", "cifar10", "imdb", "lra_release", "sst2",
                               "tinyllama_tokenizer", "wikitext-103-v1"]  # fmt: skip
    assert "--md5 9ddaacaf6af0710eda8c456decff7832" in fetches["wikitext-103-v1"]
    assert "--md5" not in fetches["tinyllama_tokenizer"]
    assert "--md5 9f81648d4199384278b86e315dac217c" in fetches["sst2"]
    assert "--md5" not in fetches["agnews"]
    assert "--md5 7c2ac02c03563afcf9b574c7e56c153a" in fetches["imdb"]
    assert "--md5 c32a1d4ab5d03f1284b67883e8d87530" in fetches["cifar10"]
    assert "--md5" not in fetches["lra_release"]
    assert "--url https://storage.googleapis.com/long-range-arena/lra_release.gz" in fetches["lra_release"]
