"""Debian tools a test needs (chromium, pdflatex): found on PATH, else installed with apt-get as root.

`make test` installs the TeX ones up front (its `tools` target); this is the fallback for a bare `pytest`.
Where installing is impossible the test is skipped, with the reason and the command that would fix it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def ensure_debian_tool(executable: str, *packages: str, recommends: bool = True) -> str:
    """The path of `executable`, installing Debian's `packages` (default: one named like it) when missing;
    `recommends=False` leaves out the packages they only recommend."""
    found = shutil.which(executable)
    if found:
        return found
    packages = packages or (executable,)
    quiet = ["-y", "-qq"] if recommends else ["-y", "-qq", "--no-install-recommends"]
    install = ["apt-get", "install", *quiet, *packages]
    if not shutil.which("apt-get") or os.geteuid() != 0:
        pytest.skip(f"{executable} is not installed and cannot be installed here (needs apt-get as root): "
                    f"run `{' '.join(install)}`")  # fmt: skip
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], install):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.skip(f"could not install {executable} ({' '.join(cmd)}: {done.stderr.strip()[-300:]})")
    found = shutil.which(executable)
    if not found:
        pytest.skip(f"apt-get installed {' '.join(packages)} but no `{executable}` executable is on PATH")
    return found
