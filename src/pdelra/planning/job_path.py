"""The `pdelra` the workflow's jobs run: the one installed beside the Python that runs Snakemake, whatever
the caller's PATH (workflow/rules/common.smk calls `put_first_on_path` while it parses).

`.venv/bin/snakemake` started from a shell that never activated the venv would otherwise run jobs that fail
with "pdelra: command not found" after the config check passed. The scripts folder goes first on PATH, which
the jobs inherit: local jobs as subprocesses of Snakemake, Slurm jobs through sbatch's environment (and their
own Snakemake parses the workflow again). Not a `{PDELRA}` variable in each rule's shell line: that would
change every rule's code, and Snakemake's code trigger would rerun every finished job once. With --use-conda
the rule's environment is activated after this, and its own `pdelra` comes first. The same folder holds the
other tools the rules call (dvc, papermill, jupyter) when they are installed there.

This module imports nothing heavy.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import MutableMapping
from pathlib import Path

COMMAND = "pdelra"


def scripts_dir(executable: str = sys.executable) -> Path | None:
    """The folder holding the `pdelra` command of this Python: the executable's own folder (not resolved,
    so that a venv's symlinked python still means the venv's bin), else the install scheme's scripts folder,
    else the user scheme's; None when none holds it."""
    folders = [Path(executable).parent, Path(sysconfig.get_path("scripts"))]
    folders.append(Path(sysconfig.get_path("scripts", sysconfig.get_preferred_scheme("user"))))
    for folder in folders:
        command = folder / COMMAND
        if command.is_file() and os.access(command, os.X_OK):
            return folder
    return None


def put_first_on_path(
    environ: MutableMapping[str, str] = os.environ, executable: str = sys.executable, conda: bool = False
) -> str | None:
    """Put this Python's scripts folder first on environ's PATH (once); the problem in one line when no
    `pdelra` could run a job (none beside this Python nor on PATH, and no --use-conda), else None."""
    folder = scripts_dir(executable)
    path = environ.get("PATH", "")
    if folder is not None:
        if path.split(os.pathsep)[0] != str(folder):
            environ["PATH"] = os.pathsep.join(filter(None, [str(folder), path]))
        return None
    if conda or shutil.which(COMMAND, path=path) is not None:
        return None
    return (
        f"no `{COMMAND}` command beside the Python that runs Snakemake ({executable}) nor on PATH, so no job "
        "could run: install the project into this environment (pip install -e .), or run with --use-conda"
    )
