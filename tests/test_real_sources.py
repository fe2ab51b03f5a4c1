"""The real-source path of the DAG: the fetch rule imports each archive through DVC from a loopback
server, the extract and preprocess rules turn them into the trainer's arrays, and a changed upstream file
is refused."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from archives import (
    PATHFINDER_LABELS,
    aclimdb_archive,
    cifar_binary_archive,
    lra_release_archive,
    serve_directory,
)
from conftest import REPO, dry_run_jobs, make_workspace, run_snakemake, tool_env

from pdelra.data.store import read_manifest

TASKS = ("listops", "text", "retrieval", "pathfinder", "image")
ARCHIVES = {"lra_release": lra_release_archive, "imdb": aclimdb_archive, "cifar10": cifar_binary_archive}
DVC = str(Path(sys.executable).parent / "dvc")


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_fetch_rule_imports_real_layouts_through_dvc_then_preprocesses(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    for source, build in ARCHIVES.items():
        build(served / f"{source}.tar.gz")

    with serve_directory(served) as base:
        config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
        for source, download in config["data"]["downloads"].items():
            download["url"] = f"{base}/{source}.tar.gz"
            # IMDb and CIFAR-10 publish a checksum; the LRA release does not (the first fetch records it).
            download["md5"] = None if source == "lra_release" else md5(served / f"{source}.tar.gz")
        workspace = make_workspace(tmp_path / "ws", config)
        subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)  # DVC inside git, like the repo

        manifests = [f"data/processed/{task}/manifest.json" for task in TASKS]
        run_snakemake(workspace, *manifests, timeout=300, check=True)

        for source in ARCHIVES:
            download = workspace / f"data/raw/downloads/{source}.tar.gz"
            record = yaml.safe_load(download.with_name(download.name + ".dvc").read_text())
            assert record["deps"][0]["path"] == f"{base}/{source}.tar.gz"
            assert record["outs"][0]["md5"] == md5(download) == md5(served / f"{source}.tar.gz")
        counts = {task: read_manifest(workspace / f"data/processed/{task}")["counts"] for task in TASKS}
        assert counts["listops"] == {"train": 3, "val": 3, "test": 3}
        assert counts["retrieval"] == {
            "train": 1,
            "val": 1,
            "test": 1,
        }  # the pair with an empty document is skipped
        assert counts["image"] == {"train": 18, "val": 2, "test": 1}
        assert sum(counts["text"].values()) == 22 and sum(counts["pathfinder"].values()) == len(
            PATHFINDER_LABELS
        )
        assert read_manifest(workspace / "data/processed/pathfinder")["skipped"]["count"] == 1
        assert dry_run_jobs(workspace, *manifests) == {}  # nothing left to do

        # Upstream changes under the same URL: the re-import is refused against the md5 the first fetch
        # recorded, and the good download stays in place.
        before = md5(workspace / "data/raw/downloads/lra_release.tar.gz")
        lra_release_archive(served / "lra_release.tar.gz")  # gzip header time differs → different bytes
        (served / "lra_release.tar.gz").write_bytes((served / "lra_release.tar.gz").read_bytes() + b"\0")
        target = "data/processed/listops/manifest.json"  # before --forcerun, which takes several rule names
        proc = run_snakemake(workspace, target, "--forcerun", "fetch", timeout=120)
        assert proc.returncode != 0
        assert "lra_release" in proc.stdout + proc.stderr
        # Snakemake removed the declared output before the job; the import record and DVC's cache still hold
        # the verified download, so `dvc checkout` brings it back unchanged.
        subprocess.run([DVC, "checkout", "-q", "data/raw/downloads/lra_release.tar.gz.dvc"], cwd=workspace,
                       env=tool_env(), check=True)  # fmt: skip
        assert md5(workspace / "data/raw/downloads/lra_release.tar.gz") == before
        status = subprocess.run([DVC, "status", "--json"], cwd=workspace, env=tool_env(), text=True,
                                capture_output=True, check=True)  # fmt: skip
        assert "data/raw/downloads/lra_release.tar.gz.dvc" not in status.stdout  # record unchanged
