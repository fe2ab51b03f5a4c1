"""Bad input a user meets answered by one line that names the file, key or flag and the value, never by a
traceback from deep inside torch, statistics or the generator."""

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


# ------------------------------------------------------------------------------------------ generate listops


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"min_length": 10, "max_length": 11}, "min_length=10 and max_length=11 leave no length strictly"),
        ({"min_length": 500, "max_length": 2000, "max_depth": 4, "max_args": 5},
         "max_depth=4 and max_args=5 has a length strictly between min_length=500 and max_length=2000: the "
         "longest has 187 tokens: raise max_depth or max_args, or lower min_length"),
        ({"min_length": 1, "max_length": 4}, "raise max_length or lower min_length (lengths 2 and 3 never"),
        ({"max_args": 1}, "need max_depth >= 1 and max_args >= 2"),
        ({"n_val": -1}, "n_val must be >= 0, got -1"),
    ],
)  # fmt: skip
def test_generate_listops_refuses_bounds_it_cannot_meet_up_front_naming_the_setting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, params: dict[str, int], expected: str
) -> None:
    out = tmp_path / "raw" / "listops"
    assert main(["generate", "listops", "--out", str(out), "--params", json.dumps(params)]) == 1
    line = one_error_line(caplog)
    assert line.startswith(
        "generation setting for listops (--params, or data.generate.listops in the config)"
    )
    assert expected in line
    assert not out.exists()


def test_rare_listops_bounds_end_with_the_bound_to_relax() -> None:
    """Bounds that a few trees meet, but fewer distinct ones than asked for: say so, not a traceback."""
    from pdelra.data.errors import DataError
    from pdelra.data.listops import generate_rows

    # Length 4 exactly: an operator over two values, 4 × 10 × 10 = 400 distinct trees, far fewer than 500.
    with pytest.raises(
        DataError, match=r"only 400 of 500 distinct .* fewer distinct trees: widen min_length"
    ):
        generate_rows(500, seed=0, min_length=3, max_length=5, max_depth=2, max_args=2)


# -------------------------------------------------------------------------------------------- config check


def _check(tmp_path: Path, config: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`pdelra config check` on `config` written to a file: its exit status 1 and its problem lines."""
    import yaml

    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    assert main(["config", "check", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Invalid config ({path}):"
    return [line.removeprefix(f"  - {path}: ") for line in out[1:]]


@pytest.fixture
def demo() -> dict[str, Any]:
    import yaml

    return yaml.safe_load((Path(__file__).parents[1] / "config" / "demo.yaml").read_text())


def test_config_check_refuses_what_the_workflow_would_refuse_or_fail_on_later(
    tmp_path: Path, demo: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """Each of these passed as "valid" once: the schema alone allows them."""
    heads = json.loads(json.dumps(demo))
    heads["tasks"]["listops"]["model"] = {"n_heads": 3}
    assert _check(tmp_path, heads, capsys) == [
        "tasks.listops.model.n_heads: 3 does not divide d_model 32 (defaults.model.d_model)"
    ]
    grid = json.loads(json.dumps(demo))
    grid["run_grids"] = ["main", "mian"]
    assert _check(tmp_path, grid, capsys) == [
        "run_grids[1]: 'mian' is not a grid; the config's grids are: main, multiscale, related, cta, cta_lra"
    ]
    empty = json.loads(json.dumps(demo))
    empty["data"]["generate"]["listops"]["n_val"] = 0
    assert _check(tmp_path, empty, capsys) == [
        "'data.generate.listops.n_val': 0 is less than the minimum of 1"
    ]


def test_config_check_refuses_lm_heads_and_generation_bounds_no_job_could_meet(
    tmp_path: Path, demo: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    demo["lm"]["model"]["n_heads"] = 5
    listops = demo["data"]["generate"]["listops"]
    low = listops["min_length"]
    listops["max_length"] = low + 1  # no length strictly between
    problems = _check(tmp_path, demo, capsys)
    assert "lm.model.n_heads: 5 does not divide d_model 32 (lm.model.d_model)" in problems
    (generation,) = [p for p in problems if p.startswith("generation setting for listops (--params, or")]
    assert f"min_length={low} and max_length={low + 1} leave no length strictly between them" in generation


def test_bounds_almost_no_draw_meets_stop_early_saying_which_bound_to_relax(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Depth 4 can exceed 500 tokens (1222 at most), but about one draw in 10,000 does: a minute of drawing
    before the limit would end in the same message."""
    params = {"min_length": 500, "max_length": 2000, "max_depth": 4}
    assert main(["generate", "listops", "--out", str(tmp_path / "x"), "--params", json.dumps(params)]) == 1
    line = one_error_line(caplog)
    assert "only 0 of 1200 distinct expressions with 500 < length < 2000 in 10000 draws" in line
    assert line.endswith("most were too short: lower min_length, or raise max_depth or max_args")
