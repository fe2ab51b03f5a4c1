"""Project text speaks of the project: no tracker references or missing documents; names as in the DAG."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO

import pdelra
from pdelra.tasks import tasks_of_source

TEXT_SUFFIXES = {".py", ".md", ".smk", ".yaml", ".yml", ".sh", ".ipynb", ".toml", ".cfg", ".txt"}
TEXT_NAMES = {"Snakefile", "Makefile"}
SKIP_DIRS = {".git", ".venv", ".snakemake", "results", "data", "node_modules", "__pycache__", ".dvc"}


def _project_text_files() -> list:
    files = []
    for path in REPO.rglob("*"):
        parts = set(path.relative_to(REPO).parts)
        if parts & SKIP_DIRS or any(p.endswith(".egg-info") for p in parts) or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES:
            files.append(path)
    return files


def test_no_text_refers_to_the_issue_tracker() -> None:
    pattern = re.compile(r"\b[Ii]ssues? #?\d+")
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()[:80]}"
        for path in _project_text_files()
        if path != REPO / "tests" / "test_workflow_docs.py"
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if pattern.search(line)
    ]
    assert not found, "say what the code does, not which ticket asked for it:\n" + "\n".join(found)


def test_docs_name_only_documents_and_download_files_that_exist() -> None:
    interfaces = (REPO / "docs" / "interfaces.md").read_text()
    for name in set(re.findall(r"\b([A-Za-z_./-]+\.md)\b", interfaces)):
        assert (REPO / name).exists() or list(REPO.glob(f"**/{name}")), f"docs/interfaces.md names {name}"
    common = (REPO / "workflow" / "rules" / "common.smk").read_text()
    assert 'f"{RAW}/downloads/{source}.tar.gz"' in common
    names = list(tasks_of_source())  # the workflow archives (common.smk: pdelra.tasks)
    assert f"data/raw/downloads/{{{','.join(names)}}}.tar.gz" in interfaces


def test_pdelra_reports_its_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pdelra.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == f"pdelra {pdelra.__version__}"
