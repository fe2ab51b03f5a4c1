"""The house a maintainer reads: files small enough to read in one sitting, and comments that point only at
files the project has."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

from pdelra.parts import builtin

MAX_MODULE_LINES = 700
MAX_COMMON_SMK_LINES = 300
# Project paths as comments and docstrings name them (a user's own file, such as config/mine.yaml in the
# README's own-operator study, is not the project's).
FOLDERS = "tests|docs|benchmarks|config|scripts|workflow|examples|profiles|src/pdelra"
PATH = re.compile(rf"\b((?:{FOLDERS})/[\w./-]+\.(?:py|md|yaml|sh|smk|ipynb))")
USERS_OWN = {"config/mine.yaml"}


def test_no_module_is_too_long_to_read_and_common_smk_holds_only_validation_and_inputs() -> None:
    long = {
        str(path.relative_to(REPO)): n
        for path in sorted((REPO / "src" / "pdelra").rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
    common = REPO / "workflow" / "rules" / "common.smk"
    assert len(common.read_text().splitlines()) <= MAX_COMMON_SMK_LINES


def test_every_project_path_a_comment_or_doc_names_exists() -> None:
    sources = [*(REPO / "src" / "pdelra").rglob("*.py"), *(REPO / "workflow").rglob("*.smk"),
               *(REPO / "tests").glob("*.py"), *(REPO / "benchmarks").glob("*"), REPO / "Snakefile",
               REPO / "Makefile", REPO / "README.md", *(REPO / "docs").glob("*.md"),
               REPO / "config" / "README.md"]  # fmt: skip
    dangling = {
        (str(source.relative_to(REPO)), name)
        for source in sources
        if source.is_file()
        for name in PATH.findall(source.read_text(errors="replace"))
        if name not in USERS_OWN and not (REPO / name).exists()
    }
    assert not dangling, f"names of files the project lacks: {sorted(dangling)}"


def test_the_planner_imports_no_related_system_by_name() -> None:
    """pdelra.planning loops over the registry of parts (pdelra.parts): a new system is a part, with no edit
    of the planner, so no planning module imports a system's package (lm, cta_official) by name, and the
    registry itself, the ground floor, imports none either."""
    systems = {f"pdelra.{part.name}" for part in builtin() if part.section}  # pdelra.lm, pdelra.cta_official
    assert systems == {"pdelra.lm", "pdelra.cta_official"}
    modules = [*(REPO / "src" / "pdelra" / "planning").glob("*.py"), REPO / "src" / "pdelra" / "parts.py"]
    named = {
        (path.name, name)
        for path in modules
        for name in _imported(path)
        if any(name == system or name.startswith(f"{system}.") for system in systems)
    }
    assert not named, f"planning modules importing a system by name: {sorted(named)}"


def _imported(path: Path) -> set[str]:
    """Every module an `import` or `from ... import` of the file names (a name imported from a package too:
    `from pdelra import lm` is pdelra.lm)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


BUILTIN_PART_MODULES = ("pdelra.lm.part", "pdelra.diagnostics.part", "pdelra.cta_official.part")


def test_the_built_in_parts_are_reached_by_plain_imports_with_no_string_look_up(monkeypatch) -> None:
    """The built-in parts are listed once, as plain imports, in pdelra.builtin_parts (above the systems),
    which hands them to the registry; each entry imports it, and no module below it does (imports run
    downward). No source names a built-in part's module as a string to import, and the planner's walk from
    `experiment.workflow_jobs` reaches lm/ and cta_official/ with every by-name import refused."""
    import importlib

    import pdelra.builtin_parts
    import pdelra.importing
    from pdelra import parts
    from pdelra.planning import experiment
    from pdelra.planning.plan import load_config

    src = REPO / "src" / "pdelra"
    assert set(BUILTIN_PART_MODULES) <= _imported(src / "builtin_parts.py")
    assert [part.module for part in parts.builtin()] == list(BUILTIN_PART_MODULES)
    assert [part.build for part in parts.builtin()] == [m.build for m in pdelra.builtin_parts.MODULES]
    importers = {
        str(path.relative_to(src)) for path in src.rglob("*.py") if "pdelra.builtin_parts" in _imported(path)
    }
    assert importers == {"cli.py", "forkserver.py"}, "only the entries import pdelra.builtin_parts"
    for entry in ("workflow/rules/common.smk", "workflow/notebooks/report.ipynb"):
        assert re.search(r"(from pdelra )?import (pdelra\.)?builtin_parts", (REPO / entry).read_text()), entry
    strings = {
        (str(path.relative_to(src)), node.value)
        for path in src.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in BUILTIN_PART_MODULES
    }
    assert not strings, f"a built-in part named by a string: {sorted(strings)}"

    config = load_config(REPO / "config" / "config.yaml")

    def refused(name: str, *args: object) -> None:
        raise AssertionError(f"imported by name on the planner's path: {name}")

    monkeypatch.setattr(importlib, "import_module", refused)
    monkeypatch.setattr(pdelra.importing, "import_module", refused)
    monkeypatch.setattr(parts, "import_module", refused)
    jobs = experiment.workflow_jobs(config)
    assert {"lm_train", "cta_official_train", "cta_lm_train"} <= set(jobs)


def test_the_registry_alone_loads_no_built_in_part_by_name() -> None:
    """Without pdelra.builtin_parts imported, the registry has no built-in parts to give and says so: it never
    falls back to importing them by name."""
    code = (
        "import sys, pdelra.parts\n"
        "try:\n    pdelra.parts.builtin()\nexcept RuntimeError as e:\n    print(e)\n"
        "print(sorted(m for m in sys.modules if m.endswith('.part')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "import pdelra.builtin_parts first" in out
    assert out.strip().endswith("[]")
