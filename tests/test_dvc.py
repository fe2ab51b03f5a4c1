"""DVC versioning of finished artifacts (`pdelra version`, workflow/rules/version.smk) and the restore path.

The bar: after the workflow has pushed its artifacts, wiping them and the DVC cache and pulling them back
leaves Snakemake with nothing to do, although DVC does not keep modification times.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, copy_workspace, dry_run_jobs, git_dvc_project, tool_env

from pdelra.steps.versioning import VersioningError, version_experiment

PDELRA = [sys.executable, "-m", "pdelra.cli"]
EXPERIMENT = Path("results/tiny")
ARTIFACTS = ("runs", "tables", "report")


@pytest.fixture(autouse=True)
def _no_analytics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def pdelra(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PDELRA, *args], cwd=cwd, env=tool_env(), capture_output=True, text=True, timeout=300
    )


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def fake_experiment(root: Path) -> Path:
    """results/tiny with small runs/, tables/ and report/ folders (no training needed)."""
    exp = root / EXPERIMENT
    for name in ARTIFACTS:
        (exp / name).mkdir(parents=True)
    (exp / "runs" / "a.json").write_text('{"x": 1}')
    (exp / "tables" / "runs.csv").write_text("a,b\n1,2\n")
    (exp / "report" / "index.html").write_text("<html></html>")
    return exp


# ---------------------------------------------------------------------------------------------------------
# pdelra version add (fast: no workflow)
# ---------------------------------------------------------------------------------------------------------
def test_add_records_one_dvc_file_per_folder_and_pushes(tmp_path: Path):
    root = git_dvc_project(tmp_path / "proj", remote=tmp_path / "remote")
    exp = fake_experiment(root)
    record = version_experiment(exp, exp / "versioned.json")

    assert json.loads((exp / "versioned.json").read_text()) == record
    assert record["pushed"] is True and record["remote"] == "store"
    assert [a["path"] for a in record["artifacts"]] == [f"results/tiny/{n}" for n in ARTIFACTS]
    for artifact in record["artifacts"]:
        dvc_text = (root / artifact["dvc_file"]).read_text()
        assert artifact["md5"] in dvc_text and artifact["md5"].endswith(".dir")
    assert sorted(p.name for p in exp.glob("*.dvc")) == ["report.dvc", "runs.dvc", "tables.dvc"]
    assert any((tmp_path / "remote").rglob("*")), "nothing was pushed to the remote"
    # git carries the .dvc files and the record; the artifact folders themselves stay out of git.
    tracked = [f"{EXPERIMENT}/{n}.dvc" for n in ARTIFACTS] + [f"{EXPERIMENT}/versioned.json"]
    assert git(root, "check-ignore", *tracked).stdout == ""
    assert git(root, "check-ignore", f"{EXPERIMENT}/runs", f"{EXPERIMENT}/logs").returncode == 0


def test_add_without_remote_only_fills_the_cache(tmp_path: Path):
    root = git_dvc_project(tmp_path / "proj")
    exp = fake_experiment(root)
    record = version_experiment(exp, exp / "versioned.json")
    assert record["pushed"] is False and record["remote"] is None
    assert any((root / ".dvc" / "cache").rglob("*.dir"))


def test_add_works_outside_git(tmp_path: Path):
    """Test workspaces and unpacked tarballs are DVC projects without git: versioning still records."""
    root = tmp_path / "proj"
    root.mkdir()
    shutil.copytree(REPO / ".dvc", root / ".dvc", ignore=shutil.ignore_patterns("cache", "tmp"))
    exp = fake_experiment(root)
    record = version_experiment(exp, exp / "versioned.json")
    assert len(record["artifacts"]) == 3


def test_add_names_what_is_wrong(tmp_path: Path):
    root = git_dvc_project(tmp_path / "proj")
    exp = fake_experiment(root)
    shutil.rmtree(exp / "report")
    proc = pdelra(root, "version", "add", str(EXPERIMENT), "--out", f"{EXPERIMENT}/versioned.json")
    assert proc.returncode == 1
    assert "results/tiny/report" in proc.stderr and "Traceback" not in proc.stderr
    assert not (exp / "versioned.json").exists()

    (exp / "report").mkdir()
    with pytest.raises(VersioningError, match=r"remote 'nowhere' is not configured"):
        version_experiment(exp, exp / "versioned.json", remote="nowhere")
    with pytest.raises(VersioningError, match="not inside a DVC project"):
        version_experiment(fake_experiment(tmp_path / "plain"), tmp_path / "v.json")


def test_artifact_mtimes_survive_add(tmp_path: Path):
    """`dvc add` must not touch the artifacts' mtimes, or Snakemake would rerun what follows them."""
    root = git_dvc_project(tmp_path / "proj")
    exp = fake_experiment(root)
    files = [p for p in exp.rglob("*") if p.is_file()]
    for p in files:
        os.utime(p, (1_000_000_000, 1_000_000_000))
    version_experiment(exp, exp / "versioned.json")
    assert {p.stat().st_mtime for p in files} == {1_000_000_000}


# ---------------------------------------------------------------------------------------------------------
# The workflow: version rule, push, wipe, pull, nothing to do
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_version_rule_records_and_pushes_the_experiment(finished_tiny: Path, tmp_path: Path):
    """finished_tiny (conftest) ran the tiny experiment to the end in a git+DVC project with a local remote
    that the config's `dvc.remote` names."""
    project = copy_workspace(finished_tiny, tmp_path / "proj")
    record = json.loads((project / EXPERIMENT / "versioned.json").read_text())
    assert record["pushed"] is True and record["remote"] == "store"
    assert [a["path"] for a in record["artifacts"]] == [f"results/tiny/{n}" for n in ARTIFACTS]
    runs = next(a for a in record["artifacts"] if a["path"].endswith("runs"))
    # Per run: metrics.json, model.safetensors (weights), diagnostics.csv and its stamp diagnostics.json, all
    # under one .dvc file.
    assert runs["nfiles"] == 4 * 4, "four files per run, all under one .dvc file"
    # Versioning changed no timestamps: the finished workflow is up to date.
    assert dry_run_jobs(project) == {}


@pytest.mark.slow
def test_push_wipe_pull_leaves_nothing_to_rerun(finished_tiny: Path, tmp_path: Path):
    project = copy_workspace(finished_tiny, tmp_path / "proj")
    before = {name: tree_digest(project / EXPERIMENT / name) for name in ARTIFACTS}

    # As on another machine: no artifacts, no DVC cache, and no Snakemake metadata (whose recorded checksums
    # would otherwise excuse small files that only look newer).
    for name in ARTIFACTS:
        shutil.rmtree(project / EXPERIMENT / name)
    shutil.rmtree(project / ".dvc" / "cache")
    shutil.rmtree(project / ".snakemake")
    assert dry_run_jobs(project).get("train") == 4

    # Pull alone restores the content ...
    proc = pdelra(project, "version", "restore", "--remote", "store", "--no-touch")
    assert proc.returncode == 0, proc.stderr
    assert {name: tree_digest(project / EXPERIMENT / name) for name in ARTIFACTS} == before
    # ... but not the order of timestamps: pulled files may come back newer than what was made from them
    # (here: every table and the report older than the runs, as when DVC checks them out first).
    earlier = min(p.stat().st_mtime for p in (project / EXPERIMENT / "runs").rglob("metrics.json")) - 100
    for name in ("tables", "report"):
        for path in (project / EXPERIMENT / name).rglob("*"):
            os.utime(path, (earlier, earlier))
    assert "aggregate" in dry_run_jobs(project)

    # The restore path: pull (nothing left to fetch) + snakemake --touch.
    proc = pdelra(project, "version", "restore", "--remote", "store")
    assert proc.returncode == 0, proc.stderr
    assert dry_run_jobs(project) == {}


def test_add_never_records_a_temporary_file(tmp_path: Path):
    """A job killed before its rename leaves .NAME.XXXX.tmp; the project's .dvcignore keeps it out."""
    root = git_dvc_project(tmp_path / "proj")
    (root / ".dvcignore").write_text("# an older project's, without the pattern\n")
    exp = fake_experiment(root)
    (exp / "runs" / ".metrics.json.1234.tmp").write_text("half")
    record = version_experiment(exp, exp / "versioned.json")
    runs = next(a for a in record["artifacts"] if a["path"].endswith("/runs"))
    assert runs["nfiles"] == 1, "only a.json"
    assert ".*.tmp" in (root / ".dvcignore").read_text().splitlines()
