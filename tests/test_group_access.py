"""Outputs follow the umask (pdelra.atomic): files written under a temporary name get the mode an ordinary
open gives them, 0666 less the umask, so a group member can read the results and resume a checkpoint where
the umask lets the group in; mkstemp's private 0600 is never what is left."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from test_training import make_task, run_config, train_in_process

from pdelra.atomic import atomic_dir, current_umask, write_json_atomic, write_text_atomic
from pdelra.data.store import ArrayWriter


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_umask_is_read_without_changing_it(umask: int) -> None:
    assert current_umask() == umask
    assert current_umask() == umask, "reading it left it as it was"


def test_atomic_files_folders_and_arrays_get_the_mode_an_ordinary_open_gives(
    tmp_path: Path, umask: int
) -> None:
    write_text_atomic(tmp_path / "table.csv", "a,b\n")
    write_json_atomic(tmp_path / "record.json", {"a": 1})
    with atomic_dir(tmp_path / "folder") as tmp:
        (tmp / "inside.txt").write_text("x")
    with ArrayWriter(tmp_path / "rows.npy", 2, (3,), np.float32) as writer:
        writer.append(np.zeros((2, 3), np.float32))
    with open(tmp_path / "plain", "w"):  # what the umask gives any file
        pass
    for name in ("table.csv", "record.json", "rows.npy"):
        assert _mode(tmp_path / name) == 0o666 & ~umask == _mode(tmp_path / "plain"), name
    assert _mode(tmp_path / "folder") == 0o777 & ~umask
    assert not list(tmp_path.glob(".*")), "no temporary name is left"


@pytest.mark.parametrize("mask", [0o002])
def test_a_trained_run_and_its_kept_state_are_readable_by_the_group(tmp_path: Path, mask: int) -> None:
    task_dir = make_task(tmp_path / "processed")
    previous = os.umask(mask)
    try:
        status, metrics = train_in_process(run_config(), task_dir, tmp_path)
    finally:
        os.umask(previous)
    assert status == 0 and metrics is not None
    written = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    written += [p for p in (tmp_path / "ckpt").rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"metrics.json", "model.safetensors"}
    for path in written:
        assert _mode(path) & 0o060 == 0o060, f"{path} is {oct(_mode(path))} under umask 002"
