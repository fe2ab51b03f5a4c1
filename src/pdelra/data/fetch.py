"""`pdelra fetch`: download a source through DVC (`dvc import-url`), so the `.dvc` file beside the download
commits its URL and content hash, and a re-run re-imports with `dvc update`.

Checksum record: the md5 under `outs` in `PATH.dvc` is the record of what was fetched (DVC computes it as it
stores the download; it is not read a second time here). A fetch is checked
against `--md5` when given (a published checksum), otherwise against the md5 recorded by the previous
fetch, so the first fetch of an unpublished source records it and every later one must match it. On any
failure (download error, truncation, mismatch) the new file is removed and the previous file and `.dvc`
record are put back unchanged.

DVC's lock: where run locks are lock files (no flock), DVC is set to lock with hard links first
(pdelra.dvc_lock), or `dvc import-url` could not lock the project.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from pdelra import dvc_lock
from pdelra.data.errors import DataError

log = logging.getLogger("pdelra.data")


def dvc_root(path: Path) -> Path:
    """The DVC project holding `path`: the nearest folder at or above it with a `.dvc/` folder."""
    start = path.resolve().parent
    for folder in (start, *start.parents):
        if (folder / ".dvc").is_dir():
            return folder
    raise DataError(
        path, "not inside a DVC project (no .dvc/ folder above it); run `dvc init` at the repository root"
    )


def dvc_command() -> str:
    """dvc from this interpreter's environment: the pinned version, even without an activated venv."""
    candidate = Path(sys.executable).parent / "dvc"
    return str(candidate) if candidate.is_file() else "dvc"


def recorded_md5(dvc_file: Path) -> tuple[str | None, str | None]:
    """(url, md5) recorded in an import's .dvc file."""
    try:
        data = yaml.safe_load(dvc_file.read_text()) or {}
        return data["deps"][0]["path"], data["outs"][0].get("md5")
    except (yaml.YAMLError, KeyError, IndexError, TypeError) as err:
        raise DataError(dvc_file, f"not a dvc import-url record ({err!r})") from err


def _run_dvc(args: list[str], root: Path, url: str) -> None:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    result = subprocess.run([dvc_command(), *args], cwd=root, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise DataError(None, f"download of {url} failed: `dvc {' '.join(args)}` exited {result.returncode}: "
                              + dvc_lock.explain_lock_failure(root, tail))  # fmt: skip


def fetch(url: str, out: Path, md5: str | None = None) -> str:
    """Fetch `url` to `out` under DVC; return the content md5. See the module docstring for the checks."""
    out = out.absolute()
    root = dvc_root(out)
    dvc_lock.prepare(root)  # hard-link locks where flock fails, and no stale lock left to wait for
    relative = out.relative_to(root)
    dvc_file = out.with_name(out.name + ".dvc")
    previous_text = dvc_file.read_text() if dvc_file.is_file() else None
    previous_url, previous_md5 = recorded_md5(dvc_file) if previous_text else (None, None)
    expected = md5.lower() if md5 else previous_md5
    backup = out.with_name(f".{out.name}.previous")
    if out.exists():
        os.replace(out, backup)  # keep the good earlier file aside until the new one is verified
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        if previous_text and previous_url == url:
            _run_dvc(["update", str(dvc_file.relative_to(root))], root, url)
        else:
            _run_dvc(["import-url", "--force", url, str(relative)], root, url)
        if not out.is_file():
            raise DataError(out, f"dvc reported success for {url} but wrote no file")
        # DVC hashed the download as it stored it and recorded the md5: read it there rather than read
        # gigabytes a second time (on a parallel file system that second pass costs minutes).
        _, actual = recorded_md5(dvc_file)
        if not actual:
            raise DataError(dvc_file, f"dvc recorded no md5 for {url}")
        if expected and actual != expected:
            source = "--md5" if md5 else f"the md5 recorded in {dvc_file.name}"
            raise DataError(out, f"checksum mismatch for {url}: expected {expected} ({source}), got {actual} "
                                 f"(size {out.stat().st_size}); truncated or changed download")  # fmt: skip
    except BaseException:
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink(missing_ok=True)
        if backup.exists():
            os.replace(backup, out)
        if previous_text is None:
            dvc_file.unlink(missing_ok=True)
        else:
            dvc_file.write_text(previous_text)
        raise
    backup.unlink(missing_ok=True)
    log.info("fetched %s → %s (md5 %s)", url, out, actual)
    return actual


def fetch_command(args: argparse.Namespace) -> int:
    """`pdelra fetch --url URL --out PATH [--md5 MD5]` (pdelra.data.cli)."""
    fetch(args.url, Path(args.out), args.md5)
    return 0
