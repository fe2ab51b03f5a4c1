"""Bad input a user meets answered by one line that names the file, key or flag and the value, never by a
traceback from deep inside torch, statistics or the generator (issue 19)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_training import make_task, run_config

from pdelra.cli import main
from pdelra.data import store


def one_error_line(caplog: pytest.LogCaptureFixture) -> str:
    """The single ERROR record the CLI logged (a traceback would be an exception, not a record)."""
    errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert "\n" not in errors[0] and "Traceback" not in errors[0]
    return errors[0]


def train(task_dir: Path, tmp_path: Path, config: dict[str, Any] | None = None) -> int:
    return main(
        ["train", "--run-config", json.dumps(config or run_config()), "--data", str(task_dir),
         "--out", str(tmp_path / "run"), "--checkpoint-dir", str(tmp_path / "ckpt")]
    )  # fmt: skip


def rewrite(task_dir: Path, name: str, change: Any) -> None:
    """Change one processed array in place, as a bug or a bit flip would (the manifest stays)."""
    path = task_dir / name
    array = np.load(path)
    change(array)
    np.save(path, array)


# ------------------------------------------------------------------------------- processed data for training


@pytest.mark.parametrize(
    ("name", "change", "expected"),
    [
        ("train_labels.npy", (17, 57), "row 17 holds label 57, outside [0, num_classes) = [0, 2)"),
        ("val_tokens.npy", ((3, 0), 10), "row 3 holds token 10, outside [0, vocab_size) = [0, 10)"),
        ("test_lengths.npy", (5, 0), "row 5 holds length 0, outside [1, max_length] = [1, 24]"),
        ("train_lengths.npy", (2, 25), "row 2 holds length 25, outside [1, max_length] = [1, 24]"),
    ],
)
def test_a_value_outside_the_manifest_is_refused_before_training_naming_file_row_and_manifest_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, change: tuple[Any, int], expected: str
) -> None:
    task_dir = make_task(tmp_path / "processed")
    rewrite(task_dir, name, lambda array: array.__setitem__(*change))
    assert train(task_dir, tmp_path) == 2
    line = one_error_line(caplog)
    assert line.startswith(f"{task_dir / name}: {expected} of {task_dir / 'manifest.json'}")
    assert f"rm -r {task_dir}" in line
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_lm_training_checks_tokens_and_lengths_of_its_windows(tmp_path: Path) -> None:
    """The LM's labels are document indices (not classes), so only tokens and lengths are bounded."""
    task_dir = make_task(tmp_path / "processed")
    split = store.load_split(task_dir, "train")
    manifest = store.read_manifest(task_dir)
    store.check_values(task_dir, "train", split, manifest, labels=False)  # valid data passes
    rewrite(task_dir, "train_labels.npy", lambda a: a.__setitem__(0, 1000))
    store.check_values(task_dir, "train", store.load_split(task_dir, "train"), manifest, labels=False)
    rewrite(task_dir, "train_tokens.npy", lambda a: a.__setitem__((9, 4), 200))
    with pytest.raises(store.DataError, match=r"train_tokens\.npy: row 9 holds token 200"):
        store.check_values(task_dir, "train", store.load_split(task_dir, "train"), manifest, labels=False)


def test_a_corrupt_processed_array_says_to_remove_its_folder_and_rerun(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    task_dir = make_task(tmp_path / "processed")
    (task_dir / "val_labels.npy").write_bytes(b"\x93NUMPY garbage")
    assert train(task_dir, tmp_path) == 2
    line = one_error_line(caplog)
    assert line.startswith(f"{task_dir / 'val_labels.npy'}: not a readable .npy array")
    assert f"remove the folder (rm -r {task_dir}) and rerun" in line


# ---------------------------------------------------------------------------------------------- bench flags


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["layer", "--rounds", "-3"], "--rounds"),
        (["layer", "--rounds", "0"], "--rounds"),
        (["layer", "--threads", "0"], "--threads"),
        (["layer", "--warmup", "-1"], "--warmup"),
        (["layer", "--shapes", "0x1024x128"], "--shapes"),
        (["train-step", "--rounds", "-3"], "--rounds"),
        (["train-step", "--batch-size", "0"], "--batch-size"),
        (["train-step", "--lengths", "1024", "-5"], "--lengths"),
        (["preprocess", "--listops-rows", "0"], "--listops-rows"),
        (["workflow-scale", "--runs", "-1"], "--runs"),
    ],
)
def test_bench_refuses_a_number_it_cannot_use_naming_the_flag_and_value(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", *argv])
    assert exited.value.code == 2  # argparse's usage error, before any work
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"error: argument {flag}: " in message
    assert argv[-1] in message
