"""Version an experiment's finished artifacts with DVC, and restore them so Snakemake has nothing to redo.

`pdelra version add results/EXP --out results/EXP/versioned.json [--remote NAME]`
    `dvc add` the experiment's `runs/`, `tables/` and `report/` folders (one `.dvc` file per folder, never
    one per run: DVC handles a folder of hundreds of files as one `.dir` manifest), push them when a remote
    is given or the DVC project has a default remote, and write a JSON record of what was added (md5s).
`pdelra version restore [TARGET ...] [--remote NAME] [--snakemake-args "ARGS"]`
    `dvc pull`, then `snakemake --touch`. DVC does not keep modification times: pulled files all carry the
    time of the pull, in no particular order, so Snakemake would see some inputs newer than their outputs
    and rerun training. `--touch` walks the DAG in order and only updates timestamps.

Only folders are added, on purpose: `dvc add` of a single file rewrites its mtime (a folder's files keep
theirs), which would make Snakemake rerun the jobs downstream of it.

Before DVC opens the project, DVC's lock is made to work where flock does not (pdelra.dvc_lock), and the
project's .dvcignore is made to hold `.*.tmp`, so that a temporary file left in an artifact folder is never
recorded.

The DVC Python API (`dvc.repo.Repo`) is used instead of the `dvc` command so that a copy of the project
that is not a git checkout (a test workspace, an unpacked tarball) can still be versioned (`core.no_scm`).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra import dvc_lock
from pdelra.atomic import write_json_atomic, write_text_atomic
from pdelra.errors import UserError
from pdelra.steps.cli import ARTIFACTS

if TYPE_CHECKING:
    from dvc.repo import Repo

log = logging.getLogger(__name__)

RECORD_VERSION = 1
TEMPORARY_PATTERNS = (".*.tmp",)  # .NAME.XXXX.tmp (pdelra.atomic), .NAME.PID.tmp (restores)


class VersioningError(UserError, RuntimeError):
    """A problem the user can fix (no DVC project, missing artifact, unknown remote); the message says."""


# ---------------------------------------------------------------------------------------------------------
# DVC project access
# ---------------------------------------------------------------------------------------------------------
def _inside_git(path: Path) -> bool:
    from scmrepo.exceptions import SCMError
    from scmrepo.git import Git

    try:
        Git(str(path), search_parent_directories=True).close()
    except SCMError:
        return False
    return True


def open_repo(path: Path) -> Repo:
    """The DVC project that contains `path`; without a git checkout around it, DVC runs with `core.no_scm`."""
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo

    try:
        root = Path(Repo.find_root(str(path)))
    except NotDvcRepoError as err:
        raise VersioningError(
            f"{path} is not inside a DVC project (no .dvc folder above it); "
            "run `dvc init` at the repository root"
        ) from err
    dvc_lock.prepare(root)  # hard-link locks where flock fails, and no stale lock left to wait for
    for name in dvc_lock.LOCK_FILES:  # DVC waits for a lock it finds (below) and says nothing: say why
        if (root / ".dvc" / "tmp" / name).exists():
            log.warning("DVC waits for its lock: %s", dvc_lock.lock_message(root / ".dvc" / "tmp" / name))
    ignore_temporary_files(root)
    overrides: dict[str, Any] = {}
    if not _inside_git(root):
        log.warning("%s is not a git checkout: DVC runs without git; commit the .dvc files elsewhere", root)
        overrides = {"core": {"no_scm": True}}
    return Repo(str(root), config=overrides or None, _wait_for_lock=True)


def ignore_temporary_files(root: Path) -> None:
    """Make sure the project's .dvcignore keeps DVC from recording temporary files: the names the atomic
    writes (pdelra.atomic) and the restore of a finished run (pdelra.training.finished) write under before a
    rename, which a job killed at that moment leaves behind."""
    path = root / ".dvcignore"
    lines = path.read_text().splitlines() if path.is_file() else []
    missing = [pattern for pattern in TEMPORARY_PATTERNS if pattern not in lines]
    if not missing:
        return
    write_text_atomic(path, "\n".join([*lines, *missing]) + "\n")
    log.warning("added %s to %s: DVC must not record temporary files", ", ".join(missing), path)


def default_remote(repo: Repo) -> str | None:
    return repo.config["core"].get("remote")


def check_remote(repo: Repo, remote: str) -> None:
    known = sorted(repo.config.get("remote", {}))
    if remote not in known:
        raise VersioningError(
            f"DVC remote {remote!r} is not configured in {repo.root_dir}/.dvc/config "
            f"(configured: {', '.join(known) or 'none'}); add it with `dvc remote add {remote} URL`"
        )


# ---------------------------------------------------------------------------------------------------------
# add
# ---------------------------------------------------------------------------------------------------------
def _read_dvc_file(path: Path) -> dict[str, Any]:
    import yaml

    with open(path) as f:
        data = yaml.safe_load(f)
    try:
        (out,) = data["outs"]
        return {"md5": out["md5"], "size": out.get("size"), "nfiles": out.get("nfiles")}
    except (KeyError, TypeError, ValueError) as err:
        raise VersioningError(f"{path}: expected one entry under 'outs' with an 'md5'") from err


def version_experiment(
    experiment_dir: Path,
    out: Path,
    remote: str | None = None,
    push: bool = True,
    artifacts: Sequence[str] = ARTIFACTS,
) -> dict[str, Any]:
    """`dvc add` each artifact folder of `experiment_dir`, push when a remote is set, write the record.

    The remote is `remote` when given, else the DVC project's default remote; with neither, nothing is pushed.
    Returns the record written to `out`.
    """
    experiment_dir = Path(experiment_dir)
    folders = [experiment_dir / name for name in artifacts]
    missing = [str(folder) for folder in folders if not folder.is_dir()]
    if missing:
        raise VersioningError(f"artifact folder(s) missing: {', '.join(missing)}; run the workflow first")

    repo = open_repo(experiment_dir)
    root = Path(repo.root_dir)
    with repo:
        if remote is not None:
            check_remote(repo, remote)
        log.info("dvc add %s", " ".join(map(str, folders)))
        repo.add([str(folder) for folder in folders])

        entries = []
        for folder in folders:
            dvc_file = folder.with_name(folder.name + ".dvc")
            entries.append(
                {
                    "path": folder.resolve().relative_to(root.resolve()).as_posix(),
                    "dvc_file": dvc_file.resolve().relative_to(root.resolve()).as_posix(),
                    **_read_dvc_file(dvc_file),
                }
            )

        target_remote = remote if remote is not None else default_remote(repo)
        pushed = False
        if push and target_remote:
            log.info("dvc push -r %s (%d artifacts)", target_remote, len(folders))
            # Target the .dvc files: the repo's index of tracked paths was read before the add.
            dvc_files = [str(folder.with_name(folder.name + ".dvc")) for folder in folders]
            count = _push(repo, dvc_files, target_remote, Path(out))
            log.info("pushed %s file(s) to %s", count, target_remote)
            pushed = True
        elif push:
            log.info("no DVC remote set: recorded in the local cache only (set one with `dvc remote add -d`)")

    record = {
        "record_version": RECORD_VERSION,
        "experiment_dir": experiment_dir.resolve().relative_to(root.resolve()).as_posix(),
        "artifacts": entries,
        "remote": target_remote,
        "pushed": pushed,
    }
    write_json_atomic(Path(out), record, sort_keys=True)
    return record


def _push(repo: Repo, dvc_files: list[str], remote: str, out: Path) -> int:
    """`dvc push`; an unreachable or unwritable remote becomes one clear error saying nothing is lost."""
    from dvc.exceptions import DvcException

    try:
        return int(repo.push(dvc_files, remote=remote) or 0)
    except (DvcException, OSError) as err:
        url = repo.config.get("remote", {}).get(remote, {}).get("url", "?")
        raise VersioningError(
            f"could not push to DVC remote {remote!r} ({url}): {err}. Nothing is lost: the artifacts are "
            f"in the local DVC cache ({Path(repo.root_dir) / '.dvc' / 'cache'}) and their .dvc files; "
            f"{out} is not written, so the next `snakemake` run (or `pdelra version add`) pushes them once "
            "the remote answers (check it with `dvc push -r " + remote + "`)"
        ) from err


# ---------------------------------------------------------------------------------------------------------
# restore
# ---------------------------------------------------------------------------------------------------------
def restore(
    targets: Sequence[str] = (),
    remote: str | None = None,
    snakemake_args: Sequence[str] = (),
    touch: bool = True,
    workdir: Path | None = None,
) -> None:
    """`dvc pull` the targets (every .dvc file when none), then `snakemake --touch` so nothing looks outdated.

    `snakemake_args` are passed to snakemake (e.g. `--configfile config/demo.yaml`); it runs in `workdir`
    (default: the current directory, which must hold the Snakefile).
    """
    workdir = Path(workdir or Path.cwd())
    repo = open_repo(workdir)
    with repo:
        if remote is not None:
            check_remote(repo, remote)
        log.info("dvc pull %s", " ".join(targets) or "(all .dvc files)")
        result = repo.pull(list(targets) or None, remote=remote)
        log.info(
            "dvc pull: %d added, %d modified", len(result.get("added", [])), len(result.get("modified", []))
        )
    if not touch:
        return
    # The same interpreter's snakemake, so the project's environment is used even when not activated.
    command = [sys.executable, "-m", "snakemake", "--touch", "--cores", "1", "--quiet", *snakemake_args]
    log.info("restoring timestamps: %s", " ".join(command[2:]))
    proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if proc.returncode != 0:
        raise VersioningError(
            f"`snakemake --touch` failed (exit {proc.returncode}) in {workdir}:\n{proc.stderr[-4000:]}"
        )


# ---------------------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------------------
def _cmd_add(args: argparse.Namespace) -> int:
    record = version_experiment(
        Path(args.experiment_dir),
        Path(args.out),
        remote=args.remote,
        push=not args.no_push,
        artifacts=args.artifact or ARTIFACTS,
    )
    for entry in record["artifacts"]:
        log.info("%s  %s (%s files)", entry["md5"], entry["path"], entry["nfiles"])
    return 0


def _cmd_restore(args: argparse.Namespace) -> int:
    import shlex

    restore(
        args.targets,
        remote=args.remote,
        snakemake_args=shlex.split(args.snakemake_args),
        touch=not args.no_touch,
    )
    return 0


def _dvc_errors_are_user_errors(func):  # type: ignore[no-untyped-def]
    """DVC's own failures (no remote access, missing cache) are the user's to fix: report them like ours."""

    def run(args: argparse.Namespace) -> int:
        from dvc.exceptions import DvcException

        try:
            return func(args)
        except DvcException as err:
            raise VersioningError(f"dvc: {err}") from err

    return run


# The handlers of `pdelra version add` and `pdelra version restore` (declared in pdelra.steps.cli).
add_command = _dvc_errors_are_user_errors(_cmd_add)
restore_command = _dvc_errors_are_user_errors(_cmd_restore)
