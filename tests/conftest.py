"""Shared helpers for tests that run the real Snakemake workflow on a throw-away copy of it.

Other test files (workflow, Slurm, DVC) import these; keep their signatures stable:

- `make_workspace(dest, config=None) -> Path` copies the workflow (Snakefile, workflow/, config/, envs/,
  profiles/, .dvc/ and .dvcignore when present) into `dest` and writes the experiment config as
  `dest/config/config.yaml` (the Snakefile's default configfile), so a bare `snakemake` there runs it.
- `run_snakemake(workspace, *args, timeout=...) -> CompletedProcess` runs the project's snakemake in
  `workspace` with `.venv/bin` first on PATH (so rules find `pdelra`, `dvc`, `papermill`).
- `start_snakemake(workspace, *args) -> Popen` the same, in the background, in its own process group.
- `load_config(name)` reads `tests/configs/{name}.yaml`; `TINY_CONFIG` is the minimal end-to-end experiment.
- `git_dvc_project(path, remote=None, default=True)` makes `path` a git repository with the project's DVC
  config, and a DVC remote `store` at `remote` when given.
- the session fixture `finished_tiny` is the tiny experiment run to the end once (report and DVC version rule
  included) in such a project; the workflow, DVC and diagnostics tests each work on a copy of it
  (`copy_workspace`), since training it is most of their cost.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

import pdelra.builtin_parts  # noqa: F401  (declares the built-in parts, as every entry does)

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SNAKEMAKE = VENV_BIN / "snakemake"
TEST_CONFIGS = REPO / "tests" / "configs"

# What a workspace needs to run the workflow; the package itself comes from the (editable) venv install.
WORKFLOW_PATHS = ("Snakefile", "workflow", "config", "envs", "profiles", ".dvc", ".dvcignore")
WORKFLOW_PROFILE = "workflow/profiles/default"
_IGNORE = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", ".snakemake", "*.pyc")
# The DVC project's settings travel, not its (possibly large) cache, temp files or machine-local config.
_IGNORE_DVC = shutil.ignore_patterns("cache", "tmp", "config.local")


# The fused diffusion operator (pdelra.nn.fused) runs its functions eagerly in tests unless a test opts in:
# compiling costs ~30 s per configuration on 2 cores; tests/test_fused.py checks the compiled path against
# the eager one. Subprocesses (`pdelra train` in workflow tests) inherit the setting.
os.environ.setdefault("PDELRA_FUSED_COMPILE", "0")
# Every figure a test saves (the report notebook's included: the kernel inherits this) is checked for
# overlapping texts and legends over data (pdelra.reporting.io.save_figure refuses it).
os.environ.setdefault("PDELRA_CHECK_FIGURES", "1")
# `pdelra config check` keeps its probes of users' operators and its answers in $XDG_CACHE_HOME/pdelra (by
# the digests of the code and the config): the tests' go to a folder of this session's own, never to the
# user's home, and start empty. One folder for the whole session: the xdist workers inherit the controller's
# environment (this module runs there first), so a config one worker checked is not checked again by another.
_SESSION_CACHE = "PDELRA_TEST_SESSION_CACHE"
if _SESSION_CACHE not in os.environ:
    os.environ[_SESSION_CACHE] = tempfile.mkdtemp(prefix="pdelra-test-cache-")
os.environ["XDG_CACHE_HOME"] = os.environ[_SESSION_CACHE]


@pytest.fixture(autouse=True)
def _tensor_device() -> Any:
    """PDELRA_TEST_DEVICE=cuda makes new tensors default to that device (benchmarks/gpu_check.sh runs the
    model and operator tests on a GPU this way); unset, nothing changes."""
    device = os.environ.get("PDELRA_TEST_DEVICE")
    if not device:
        yield
        return
    import torch

    torch.set_default_device(device)
    yield
    torch.set_default_device(None)


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The Markdown paragraphs a report section shows (pdelra.reporting.display.say and the figures'
    captions), in order; IPython's display is captured, so nothing is printed."""
    import IPython.display

    lines: list[str] = []

    def capture(*objs: Any, **_: Any) -> None:
        lines.extend(obj.data for obj in objs if isinstance(obj, IPython.display.Markdown))

    monkeypatch.setattr(IPython.display, "display", capture)
    return lines


def load_config(name: str) -> dict[str, Any]:
    """The test config `tests/configs/{name}.yaml` as a dict (a fresh copy each call, safe to edit)."""
    with open(TEST_CONFIGS / f"{name}.yaml") as f:
        return yaml.safe_load(f)


TINY_CONFIG = "tiny"


def tool_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the workflow's tools run in: the project's venv first on PATH, no DVC analytics."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["DVC_NO_ANALYTICS"] = "1"
    env.setdefault("PYTHONHASHSEED", "0")
    # Keep tool chatter (tqdm bars) out of captured logs and stop torch from oversubscribing the 2 cores.
    env.setdefault("OMP_NUM_THREADS", "1")
    if extra:
        env.update(extra)
    return env


def make_workspace(dest: Path, config: dict[str, Any] | None = None) -> Path:
    """Copy the workflow into `dest`; write `config` (default tests/configs/tiny.yaml) as config/config.yaml.

    Returns `dest`. Existing files in `dest` are overwritten; `dest` is created if needed.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_PATHS:
        src = REPO / name
        if src.is_dir():
            ignore = _IGNORE_DVC if name == ".dvc" else _IGNORE
            shutil.copytree(src, dest / name, ignore=ignore, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy2(src, dest / name)
    cfg = load_config(TINY_CONFIG) if config is None else config
    (dest / "config").mkdir(exist_ok=True)
    (dest / "config" / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return dest


def snakemake_command(workspace: Path, args: tuple[str, ...]) -> list[str]:
    """The snakemake command line, with the local workflow profile unless `args` name a workflow profile.

    Snakemake looks for a workflow profile in `profiles/default` beside the Snakefile; ours lives in
    `workflow/profiles/default` (the snakemake-workflows layout), so it is named explicitly, as `make` does.
    """
    command = [str(SNAKEMAKE), *args]
    if "--workflow-profile" not in args and (Path(workspace) / WORKFLOW_PROFILE).is_dir():
        command += ["--workflow-profile", WORKFLOW_PROFILE]
    return command


def run_snakemake(
    workspace: Path,
    *args: str,
    timeout: float = 300,
    check: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `snakemake *args` in `workspace` (stdout+stderr captured as text).

    With `check=True` a non-zero exit fails the calling test and shows snakemake's output.
    """
    proc = subprocess.run(
        snakemake_command(workspace, args),
        cwd=workspace,
        env=tool_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        pytest.fail(
            f"snakemake {' '.join(args)} exited {proc.returncode} in {workspace}\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


def start_snakemake(workspace: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `snakemake *args` in the background in its own process group (kill it with os.killpg)."""
    log = open(Path(workspace) / "snakemake-background.log", "w")  # noqa: SIM115 - owned by the process
    return subprocess.Popen(
        snakemake_command(workspace, args),
        cwd=workspace,
        env=tool_env(env),
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def dry_run_jobs(workspace: Path, *args: str, timeout: float = 120) -> dict[str, int]:
    """Job counts per rule that a dry run (`snakemake -n`) would run: {"train": 12, "aggregate": 1, ...}."""
    proc = run_snakemake(workspace, "-n", *args, "--quiet", "rules", timeout=timeout, check=True)
    return parse_job_counts(proc.stdout + proc.stderr)


def parse_job_counts(text: str) -> dict[str, int]:
    """Parse snakemake's "Job stats" table into {rule: count}; empty when there is nothing to do."""
    counts: dict[str, int] = {}
    in_table = False
    for line in text.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            in_table = True
            continue
        if not in_table or not parts or set(line.strip()) <= {"-", " "}:
            continue
        if len(parts) == 2 and parts[1].isdigit():
            if parts[0] == "total":
                break
            counts[parts[0]] = int(parts[1])
        else:
            break
    return counts


def git_dvc_project(path: Path, remote: Path | None = None, default: bool = True) -> Path:
    """A git repository with the project's DVC config and .gitignore, and a remote `store` when given."""
    path.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / ".dvc", path / ".dvc", dirs_exist_ok=True, ignore=_IGNORE_DVC)
    shutil.copy2(REPO / ".dvcignore", path / ".dvcignore")
    shutil.copy2(REPO / ".gitignore", path / ".gitignore")
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    if remote is not None:
        add = ["remote", "add", *(["-d"] if default else []), "store", str(remote)]
        dvc = [sys.executable, "-m", "dvc", *add]
        proc = subprocess.run(dvc, cwd=path, env=tool_env(), capture_output=True, text=True)
        assert proc.returncode == 0, f"dvc {' '.join(add)}: {proc.stderr}"
    return path


@pytest.fixture(scope="session")
def finished_tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny experiment run to the end (training, diagnostics, report, DVC version rule and push) in a
    git+DVC project whose remote `store` is named by the config's `dvc.remote`, as a user would set it
    (not DVC's default remote). Made once per session: tests change only copies of it (`copy_workspace`)."""
    base = tmp_path_factory.mktemp("finished-tiny")
    config = load_config(TINY_CONFIG)
    config["dvc"] = {"remote": "store"}
    # The workspace first: make_workspace copies the repository's .dvc/config, which has no remote.
    project = git_dvc_project(make_workspace(base / "ws", config), remote=base / "remote", default=False)
    run_snakemake(project, "--cores", "2", timeout=600, check=True)
    return project


def copy_workspace(workspace: Path, dest: Path) -> Path:
    """A copy with the same mtimes and Snakemake's metadata, so it is exactly as up to date as the original;
    a DVC remote is an absolute path, so the copy pushes to and pulls from the same store."""
    return Path(shutil.copytree(workspace, dest, symlinks=True))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh copy of the workflow running the tiny config."""
    return make_workspace(tmp_path / "ws")


# ---------------------------------------------------------------------------------------------------------
# Workers (`make test`: pytest -n 3; `make test-fast`: -n 2)
# ---------------------------------------------------------------------------------------------------------
# Each worker takes whole groups: a group is a test module, so its module fixtures are built once, except that
# the modules whose slow tests work on `finished_tiny` form one group, so it is trained once. The longest
# groups go first, so that no worker is left alone with one of them at the end (measured on the 2-core
# machine: the Slurm module ~6 min, the finished_tiny group ~3 min, the claims' noise and reach simulations
# ~3 min each on one core).
SHARED_WORKSPACE_GROUP = "finished_tiny"
SHARED_WORKSPACE_MODULES = (
    "test_workflow_run",
    "test_dvc",
    "test_diagnostics_run",
    "test_template",
    "test_new_part",
)
FIRST_GROUPS = (
    "test_slurm",
    SHARED_WORKSPACE_GROUP,
    "test_slurm_submit",
    "test_claims_noise",
    "test_claims_reach",
    "test_new_task",  # its own tiny workspace (a task of its own): ~1 min
)


def worker_group(nodeid: str) -> str:
    """The worker group of a test, from its id ("tests/test_dvc.py::test_x[1]" → "finished_tiny")."""
    module = Path(nodeid.split("::", 1)[0]).stem
    return SHARED_WORKSPACE_GROUP if module in SHARED_WORKSPACE_MODULES else module


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {group: i for i, group in enumerate(FIRST_GROUPS)}
    # A stable sort: within a group, and among the other groups, collection order is kept.
    items.sort(key=lambda item: rank.get(worker_group(item.nodeid), len(rank)))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Whole groups per worker, in collection order.

    Why a subclass overriding xdist's private `_split_scope`, not the public `--dist loadgroup` with
    `xdist_group` marks added in `pytest_collection_modifyitems`: loadgroup tells the controller a test's
    group by appending "@group" to `item._nodeid` on the worker, and pytest 9 reads a node's id from
    `item._id`, so the suffix never arrives and every test is scheduled alone: with pytest-xdist 3.8.0 and
    pytest 9.2.0, two modules of one `xdist_group` split over both workers (tried 2026-12-07;
    pytest-dev/pytest-xdist#1386, open; a fix is proposed in #1388). Replace this with
    `--dist loadgroup` (marks from `worker_group`) once a release fixes #1386."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    config.option.loadscopereorder = False  # keep FIRST_GROUPS first
    return GroupScheduling(config, log)
