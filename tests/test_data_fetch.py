"""`pdelra fetch` through DVC against an HTTP server on 127.0.0.1 serving tmp_path."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from archives import serve_directory

from pdelra.data.errors import DataError
from pdelra.data.fetch import fetch

DVC = str(Path(sys.executable).parent / "dvc")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    served = tmp_path / "served"
    served.mkdir()
    with serve_directory(served) as base:
        yield base, served


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([DVC, "init", "-q"], cwd=root, check=True, env=env)
    subprocess.run([DVC, "config", "core.analytics", "false"], cwd=root, check=True, env=env)
    return root


def test_fetch_records_url_and_md5_and_guards_later_fetches(server: tuple[str, Path], project: Path) -> None:
    base, served = server
    content = b"release archive bytes " * 1000
    (served / "lra_release.gz").write_bytes(content)
    out = project / "data/raw/downloads/lra_release.gz"
    url = f"{base}/lra_release.gz"

    md5 = fetch(url, out)
    assert md5 == hashlib.md5(content).hexdigest() and out.read_bytes() == content
    record = yaml.safe_load(out.with_name("lra_release.gz.dvc").read_text())
    assert record["deps"][0]["path"] == url and record["outs"][0]["md5"] == md5
    assert fetch(url, out) == md5  # dvc update with unchanged content

    (served / "lra_release.gz").write_bytes(content[:5000])  # truncated upstream
    dvc_text = out.with_name("lra_release.gz.dvc").read_text()
    with pytest.raises(DataError, match=f"checksum mismatch for {url}: expected {md5}"):
        fetch(url, out)
    assert out.read_bytes() == content and out.with_name("lra_release.gz.dvc").read_text() == dvc_text
    # no partial download or backup left beside it (DVC's own .gitignore aside)
    assert sorted(p.name for p in out.parent.iterdir()) == [
        ".gitignore",
        "lra_release.gz",
        "lra_release.gz.dvc",
    ]


def test_fetch_with_wrong_published_md5_leaves_nothing(server: tuple[str, Path], project: Path) -> None:
    base, served = server
    (served / "cifar.tar.gz").write_bytes(b"abc")
    out = project / "data/raw/downloads/cifar.tar.gz"
    with pytest.raises(DataError, match=r"expected 0{32} \(--md5\), got 900150983cd24fb0d6963f7d28e17f72"):
        fetch(f"{base}/cifar.tar.gz", out, md5="0" * 32)
    assert not out.exists() and not out.with_name("cifar.tar.gz.dvc").exists()
    assert [p.name for p in out.parent.iterdir()] in ([], [".gitignore"])


def test_fetch_of_missing_url_names_it(server: tuple[str, Path], project: Path) -> None:
    base, _ = server
    with pytest.raises(DataError, match=f"download of {base}/nothing.gz failed"):
        fetch(f"{base}/nothing.gz", project / "data/raw/nothing.gz")
    assert not (project / "data/raw/nothing.gz").exists()
