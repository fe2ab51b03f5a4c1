"""Bad raw data a new user meets, refused or recorded by `pdelra preprocess` with file and line, and nothing
half-written left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdelra.data import retrieval
from pdelra.data.errors import DataError
from pdelra.data.generate import generate
from pdelra.data.preprocess import preprocess
from pdelra.data.store import load_split

SMALL = {"n_train": 8, "n_val": 4, "n_test": 4, "min_length": 10, "max_length": 40}


def test_an_empty_raw_folder_is_named_and_leaves_no_output_folder(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    with pytest.raises(DataError, match=r"raw: raw folder for listops is empty"):
        preprocess("listops", tmp_path / "raw", tmp_path / "out", 64)
    assert not (tmp_path / "out").exists()


def test_an_empty_split_is_refused_and_leaves_no_output_folder(tmp_path: Path) -> None:
    """An empty test split would 'complete' every run with test accuracy 0.0."""
    generate("listops", tmp_path / "raw", {**SMALL, "n_test": 0})
    with pytest.raises(DataError, match=r"listops: split\(s\) test have no rows"):
        preprocess("listops", tmp_path / "raw", tmp_path / "out", 64)
    assert not (tmp_path / "out").exists()


def test_an_aan_row_with_an_empty_document_is_skipped_and_recorded_by_file_and_line(tmp_path: Path) -> None:
    generate("retrieval", tmp_path / "raw", SMALL)
    path = tmp_path / "raw" / retrieval.SPLIT_FILES["train"]
    lines = path.read_bytes().split(b"\n")
    fields = lines[2].split(b"\t")
    lines[2] = b"\t".join([*fields[:3], b"", fields[4]])  # line 3: the first document is empty
    path.write_bytes(b"\n".join(lines))
    manifest = preprocess("retrieval", tmp_path / "raw", tmp_path / "out", 64)
    assert manifest["counts"]["train"] == SMALL["n_train"] - 1
    assert manifest["skipped"] == {
        "count": 1,
        "items": [{"file": path.name, "line": "3", "reason": "empty document (text1)"}],
    }
    train = load_split(tmp_path / "out", "train")
    assert (train.lengths > 0).all() and (train.lengths2 > 0).all()


def test_a_corrupt_metrics_file_is_named_with_how_to_rerun_its_run(tmp_path: Path) -> None:
    """Snakemake sees the file and counts the run as done: the message must say how to redo it."""
    from pdelra.steps.aggregate import MetricsError, read_run

    path = tmp_path / "runs" / "listops" / "none" / "h1" / "base" / "seed0" / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"task": "listops", "variant"')  # cut short
    with pytest.raises(MetricsError) as caught:
        read_run(path)
    assert str(caught.value).startswith(f"{path}: line 1 column")
    assert f"rm {path}" in str(caught.value) and "rerun snakemake" in str(caught.value)
