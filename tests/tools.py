"""Debian tools a test needs (chromium, pdflatex): found on PATH, else installed with apt-get as root.

`make test` installs the TeX ones up front (its `test-tools` target); this is the fallback for a bare
`pytest`. Where installing is impossible the test is skipped, with the reason and the command that would fix
it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

import pytest


def ensure_debian_tool(
    executable: str,
    *packages: str,
    recommends: bool = True,
    ready: Callable[[], bool] | None = None,
) -> str:
    """The path of `executable`, installing Debian's `packages` (default: one named like it) when it is
    missing or `ready()` (e.g. "are the LaTeX packages there") is false; `recommends=False` leaves out the
    packages they only recommend."""
    found = shutil.which(executable)
    if found and (ready is None or ready()):
        return found
    packages = packages or (executable,)
    quiet = ["-y", "-qq"] if recommends else ["-y", "-qq", "--no-install-recommends"]
    install = ["apt-get", "install", *quiet, *packages]
    if not shutil.which("apt-get") or os.geteuid() != 0:
        pytest.skip(f"{' '.join(packages)} not installed and cannot be installed here (needs apt-get as "
                    f"root): run `{' '.join(install)}`")  # fmt: skip
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], install):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            why = done.stderr.strip()[-300:]
            pytest.skip(f"could not install {' '.join(packages)} ({' '.join(cmd)}: {why})")
    found = shutil.which(executable)
    if not found or (ready is not None and not ready()):
        pytest.skip(f"apt-get installed {' '.join(packages)} but `{executable}` is still not usable")
    return found
