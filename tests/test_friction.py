"""What a new user meets off the happy path: jobs that run whatever the caller's PATH, docs whose snippets and
commands run as written (the README's own-operator study end to end), and a variant name refused with its rule
in words."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, git_dvc_project, make_workspace, snakemake_command, tool_env


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


def test_a_variant_name_may_have_digits_as_a_task_name_may_and_a_bad_one_is_refused_in_words() -> None:
    from conftest import load_config

    from pdelra.planning.config_check import config_problems

    config = load_config("tiny")
    config["variants"] = {"conv2": {"after_embedding": {"operator": "diffusion"}}}
    config["grids"]["main"]["variants"].append("conv2")
    assert config_problems(config) == []  # digits are allowed (they were refused before)
    config["variants"] = {"Conv-2": {"after_embedding": {"operator": "diffusion"}}}
    config["grids"]["main"]["variants"][-1] = "Conv-2"
    problem = config_problems(config)[0]
    assert problem.startswith(
        "'variants': the name 'Conv-2' is not allowed: a variant's name must be lower-case "
    )
    assert "letters, digits and _ only, starting with a letter (no capitals, - or spaces)" in problem
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


README_STUDY = "## Your own operator at the seven positions"


@pytest.mark.slow
def test_the_readme_own_operator_study_runs_as_written(tmp_path: Path) -> None:
    """The README's own-operator study, copied out of it: its config as config/mine.yaml and its commands,
    run one by one from the project root with the venv on PATH. The landing page leads with the variant
    (against the baseline and the paper's After Embedding), and `plan --power` takes the pilot's own spread
    of each of its comparisons and prices seeds from the plan (the study's own seconds, not 0)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(README_STUDY) :]
    section = section[: section.index("\n## ")]
    config = re.search(r"```yaml\n(.*?)```", section, re.S)
    commands = re.search(r"```bash\n(.*?)```", section, re.S)
    assert config and commands, "the README's own-operator study has its config and its commands"
    project = git_dvc_project(make_workspace(tmp_path / "ws"))
    shutil.copytree(REPO / "examples", project / "examples")
    (project / "config" / "mine.yaml").write_text(config.group(1))
    outputs = []
    for line in commands.group(1).strip().splitlines():
        command = line.split("#")[0].strip()
        proc = subprocess.run(
            ["bash", "-c", command], cwd=project, env=tool_env(), capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, f"{command}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        outputs.append(proc.stdout)

    index = (project / "results" / "mine" / "report" / "index.html").read_text()
    assert index.index("<h2>Your variants</h2>") < index.index("<h2>Verdicts</h2>")
    assert "own_smooth_embed_vs_after_embedding_listops" in index
    assert "of the paper's headline claims did not run" in index
    planned = outputs[-1]
    assert "table11_sign_smooth_embed_listops" in planned and "pilot (this comparison, 3 seeds)" in planned
    assert "43 of the paper's claims compare cells this config does not run" in planned
    priced = re.search(r"what seed counts buy \(device-hours: this plan's ([0-9.]+) h", planned)
    assert priced and float(priced.group(1)) > 0


DOCS = (
    "README.md",
    "config/README.md",
    "docs/interfaces.md",
    "docs/measurements.md",
    "docs/related-systems.md",
    "docs/troubleshooting.md",
)


def _doc_commands(path: str) -> list[tuple[str, bool]]:
    """Every `pdelra ...` command of a doc: (command, whether it is a full command line: one in a ```bash
    block) — the others are inline code spans, often fragments."""
    text = (REPO / path).read_text()
    blocks = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]
    spans = re.findall(r"`([^`\n]*pdelra [^`\n]*)`", text)
    commands = []
    for line, full in [*((b, True) for b in blocks), *((s, False) for s in spans)]:
        found = re.search(r"(?:^|\s|/)(pdelra [^#|;]*)", line.split(" #")[0])
        if found and not re.match(r"pdelra (…|\.\.\.)", found.group(1)):  # `pdelra … @FILE`: any command
            command = found.group(1).replace("…", "").replace("...", "").strip()
            commands.append((command, full and "..." not in found.group(1)))
    return commands


def _subcommand(
    parser: argparse.ArgumentParser, words: list[str]
) -> tuple[argparse.ArgumentParser, list[str]]:
    """The (sub)parser the leading words name, and the rest of the words."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and words and words[0] in action.choices:
            return _subcommand(action.choices[words[0]], words[1:])
    return parser, words


@pytest.mark.parametrize("path", DOCS)
def test_every_pdelra_command_in_the_docs_names_real_commands_and_flags(path: str) -> None:
    """Each `pdelra` command a doc shows (a command line, or a fragment in prose such as `pdelra train
    --device cuda`) names a real subcommand, and each of its --flags is one that subcommand takes: a renamed
    flag or command fails here, not in a reader's shell. A full command line (one in a bash block) must
    also parse as the CLI parses it."""
    from pdelra.cli import build_parser

    commands = _doc_commands(path)
    assert commands, f"{path}: no pdelra command found"
    for command, full in commands:
        parser, rest = _subcommand(build_parser(), shlex.split(command)[1:])
        assert parser.prog != "pdelra" or rest[:1] in ([], ["--help"]), (
            f"{path}: `{command}`: no such command"
        )
        own = rest[: rest.index("--")] if "--" in rest else rest  # after `--`: another program's words
        flags = {word.split("=")[0].strip("[]") for word in own if word.lstrip("[").startswith("--")}
        unknown = flags - set(parser._option_string_actions)
        assert not unknown, f"{path}: `{command}`: {parser.prog} has no {', '.join(sorted(unknown))}"
        if full:
            try:
                build_parser().parse_args(shlex.split(command)[1:])
            except SystemExit as exit_:
                assert exit_.code == 0, f"{path}: `{command}` does not parse"
