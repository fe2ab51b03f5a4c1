"""envs/pdelra.yaml (for `snakemake --sdm conda`) pins exactly what pyproject.toml pins."""

from __future__ import annotations

import os
import re
import tomllib

import yaml
from conftest import REPO

ENV_FILE = REPO / "envs" / "pdelra.yaml"


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", requirement.strip())
        assert match, f"not an exact `name==version` pin: {requirement!r}"
        pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def test_conda_env_pins_the_same_versions_as_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load(ENV_FILE.read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "envs/pdelra.yaml needs exactly one pip: section"
    assert _pins(pip_sections[0]) == _pins(project["dependencies"])


def test_conda_env_python_satisfies_requires_python() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    minimum = re.fullmatch(r">=(\d+)\.(\d+)", project["requires-python"])
    assert minimum, project["requires-python"]
    env = yaml.safe_load(ENV_FILE.read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    major, minor = map(int, python.removeprefix("python=").split(".")[:2])
    assert (major, minor) >= (int(minimum[1]), int(minimum[2]))


def test_post_deploy_script_installs_the_project_and_kernel() -> None:
    script = ENV_FILE.with_suffix(".post-deploy.sh")
    assert os.access(script, os.X_OK), f"{script} must be executable for snakemake to run it"
    text = script.read_text()
    assert "pip install --no-deps" in text and "-e ." in text
    assert "ipykernel install --sys-prefix --name pdelra" in text


def test_every_rule_names_the_environment() -> None:
    rules = sorted((REPO / "workflow" / "rules").glob("*.smk"))
    for path in rules:
        text = path.read_text()
        n_rules = len(re.findall(r"^\s*rule(\s+\w+)?:", text, flags=re.M))  # named or loop-made
        n_conda = len(re.findall(r"^\s*conda:\s*$", text, flags=re.M))
        assert n_conda == n_rules, f"{path.name}: {n_rules} rules but {n_conda} conda: directives"
