"""What a new user meets off the happy path: jobs that run whatever the caller's PATH, a README snippet that
runs as written, and a variant name refused with its rule in words."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, make_workspace, snakemake_command, tool_env


@pytest.mark.slow
def test_jobs_find_pdelra_without_the_venv_on_the_callers_path(tmp_path: Path) -> None:
    """`.venv/bin/snakemake` from a shell that never activated the venv: the job's `pdelra` is the venv's."""
    workspace = make_workspace(tmp_path / "ws")
    env = {k: v for k, v in os.environ.items() if k not in ("PATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if Path(p).is_dir())
    assert not any((Path(p) / "pdelra").exists() for p in env["PATH"].split(os.pathsep)), "a clean PATH"
    target = "data/raw/listops"
    proc = subprocess.run(
        snakemake_command(workspace, ("--cores", "1", target)), cwd=workspace, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (workspace / target).is_dir()


def test_the_pythons_own_scripts_folder_goes_first_once_and_a_missing_pdelra_is_said_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pdelra.planning import job_path
    from pdelra.planning.job_path import put_first_on_path

    # This Python's install schemes are the fallback: here, folders without pdelra.
    monkeypatch.setattr(job_path.sysconfig, "get_path", lambda *_: str(tmp_path / "nowhere"))

    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").touch()
    (venv / "pdelra").write_text("#!/bin/sh\n")
    (venv / "pdelra").chmod(0o755)
    environ = {"PATH": "/usr/bin:/bin"}
    assert put_first_on_path(environ, str(venv / "python")) is None
    assert environ["PATH"] == f"{venv}:/usr/bin:/bin"
    assert put_first_on_path(environ, str(venv / "python")) is None
    assert environ["PATH"] == f"{venv}:/usr/bin:/bin", "put first once, not again at each parse"

    bare = tmp_path / "bare" / "bin"
    bare.mkdir(parents=True)
    environ = {"PATH": "/usr/bin:/bin"}
    problem = put_first_on_path(environ, str(bare / "python"))
    assert problem is not None and "no `pdelra` command beside the Python that runs Snakemake" in problem
    assert "\n" not in problem and environ == {"PATH": "/usr/bin:/bin"}
    assert put_first_on_path(environ, str(bare / "python"), conda=True) is None, "conda's env brings its own"
    assert put_first_on_path({"PATH": str(venv)}, str(bare / "python")) is None, "one on PATH serves"


# The own-operator snippets of the docs: (file, the heading or paragraph the snippet follows).
OWN_OPERATOR_SNIPPETS = [
    ("README.md", "## Your own operator at the seven positions"),
    ("config/README.md", "## `variants`"),
    ("docs/interfaces.md", "**2. The variant**"),
]


def _snippet(path: str, after: str) -> dict:
    """The first ```yaml block after `after` in `path`, parsed."""
    text = (REPO / path).read_text()
    block = re.search(r"```yaml\n(.*?)```", text[text.index(after) :], re.S)
    assert block, f"no yaml snippet after {after!r} in {path}"
    return yaml.safe_load(block.group(1))


@pytest.mark.parametrize(("path", "after"), OWN_OPERATOR_SNIPPETS)
def test_the_docs_own_operator_snippets_pass_the_config_check_as_written_from_the_project_root(
    tmp_path: Path, path: str, after: str
) -> None:
    """Each snippet, put into the demo config as written (its grids run; a snippet without grids adds its
    variants to the main grid), passes `pdelra config check` run from the project root, as a user would:
    the operator imports and runs there."""
    snippet = _snippet(path, after)
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    config["variants"] = snippet["variants"]
    if "grids" in snippet:
        config["grids"], config["run_grids"] = snippet["grids"], list(snippet["grids"])
    else:
        config["grids"]["main"]["variants"] += list(snippet["variants"])
        config["run_grids"] = ["main"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    check = subprocess.run(
        ["pdelra", "config", "check", str(tmp_path / "config.yaml")], cwd=REPO, env=tool_env(),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert "valid (the workflow accepts it" in check.stdout


def test_a_variant_name_with_a_digit_is_refused_with_the_rule_in_words() -> None:
    from conftest import load_config

    from pdelra.planning.config_check import config_problems

    config = load_config("tiny")
    config["variants"] = {"conv2": {"after_embedding": {"operator": "diffusion"}}}
    config["grids"]["main"]["variants"].append("conv2")
    (problem,) = config_problems(config)
    assert problem.startswith(
        "'variants': the name 'conv2' is not allowed: a variant's name must be lower-case "
    )
    assert "letters and _ only, starting with a letter (no digits, capitals, - or spaces)" in problem
    assert "^[a-z]" not in problem, "the rule in words, not the regex"


def test_every_pattern_of_the_schema_has_its_rule_in_words() -> None:
    from pdelra.planning.config_check import PATTERN_RULES, load_schema

    def patterns(node: object) -> set[str]:
        if isinstance(node, dict):
            found = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
            return found.union(*(patterns(value) for value in node.values()))
        if isinstance(node, list):
            return set().union(*(patterns(value) for value in node))
        return set()

    assert patterns(load_schema()) <= set(PATTERN_RULES)
