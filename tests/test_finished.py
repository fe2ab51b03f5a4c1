"""No finished run is lost (pdelra.training.finished): a run whose job dies after metrics.json, and whose
outputs Snakemake then deletes, is restored by the retry from the final state kept beside its checkpoint,
under the same config, data and code only; the kept copy goes once the outputs are stored."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from test_training import make_task, run_config, train_in_process

from pdelra.locking import LOCK_NAME
from pdelra.training import finished, metrics, runner
from pdelra.training.checkpoint import checkpoint_path


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    return make_task(tmp_path / "processed")


def _lose_outputs(run: Path) -> None:
    """What Snakemake does to a job that fails (a time limit after metrics.json): delete its outputs."""
    for name in ("metrics.json", "model.safetensors"):
        (run / name).unlink()


def test_a_run_whose_outputs_were_deleted_after_it_finished_is_restored_not_retrained(
    task_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    status, first = train_in_process(run_config(), task_dir, tmp_path)
    assert status == 0 and first is not None
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    kept = finished.finished_dir(ckpt)
    assert sorted(p.name for p in kept.iterdir()) == ["metrics.json", "model.safetensors"]
    assert not checkpoint_path(ckpt).exists() and not (ckpt / LOCK_NAME).exists()
    weights = (run / "model.safetensors").read_bytes()

    _lose_outputs(run)
    with caplog.at_level(logging.INFO, logger="pdelra.training.finished"):
        status, again = train_in_process(run_config(), task_dir, tmp_path)
    assert status == 0 and "nothing left to train" in caplog.text
    assert again == first, "the very same metrics (its wall time too): restored, not trained again"
    assert (run / "model.safetensors").read_bytes() == weights

    assert finished.clear(ckpt) and not ckpt.exists(), "once the outputs are stored, the kept copy goes"
    assert not finished.clear(ckpt), "nothing left to clear"
    assert json.loads((run / "metrics.json").read_text()) == first, "the outputs stay"


def test_a_kept_run_of_another_config_or_code_version_is_trained_again(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, first = train_in_process(run_config(), task_dir, tmp_path)
    assert first is not None
    _lose_outputs(tmp_path / "run")
    _, other = train_in_process(run_config(lr=0.002), task_dir, tmp_path)
    assert other is not None and other["config_hash"] != first["config_hash"]
    assert other["history"] != first["history"], "trained with its own config"

    _lose_outputs(tmp_path / "run")
    changed = {"package": "9.9.9", "git": "elsewhere"}
    monkeypatch.setattr(metrics, "code_version", lambda: changed)  # what the restore compares with
    monkeypatch.setattr(runner, "code_version", lambda: changed)  # what the trainer records
    _, newer = train_in_process(run_config(lr=0.002), task_dir, tmp_path)
    assert newer is not None and newer["code_version"] == changed, "trained again by the new code"


def test_clearing_a_stored_run_removes_its_emptied_folders_up_to_the_checkpoints_tree(tmp_path: Path) -> None:
    root = tmp_path / "results" / "paper" / "checkpoints"
    done, other = root / "listops/none/h1/base/seed0", root / "listops/none/h1/base/seed1"
    for ckpt in (done, other):
        finished.begin(ckpt)
    assert finished.clear(done) and not done.exists() and other.exists(), "a neighbour's folder stays"
    assert finished.clear(other) and root.is_dir() and not list(root.iterdir())

    legacy = root / "listops/none/h1/base/seed2"  # a lock file an older version left in a finished run
    legacy.mkdir(parents=True)
    (legacy / "lock").write_text("pid 1 on somewhere since 2026-01-01T00:00:00\n")
    assert not finished.clear(legacy) and not list(root.iterdir()), "an unheld stale lock goes too"


def test_checkpoint_folder_of_a_run_folder_swaps_runs_for_checkpoints() -> None:
    run = Path("results/paper/runs/listops/none/h1/base/seed0")
    assert finished.checkpoint_dir_of(run) == Path("results/paper/checkpoints/listops/none/h1/base/seed0")
    assert finished.checkpoint_root(Path("results/cta_official/checkpoints/{cta_task}/x")) == Path(
        "results/cta_official/checkpoints"
    )


def test_a_restore_onto_its_own_hard_links_or_one_that_fails_leaves_no_temporary_file(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renaming a link onto another link of the same file does nothing (POSIX): the temporary name stayed."""
    _, first = train_in_process(run_config(), task_dir, tmp_path)
    assert first is not None
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    finished.publish(ckpt, run)  # the outputs are still the kept files' links
    assert sorted(p.name for p in run.iterdir()) == ["metrics.json", "model.safetensors"]

    _lose_outputs(run)

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(finished.os, "utime", full_disk)
    with pytest.raises(OSError, match="No space left"):
        finished.publish(ckpt, run)
    assert list(run.iterdir()) == [], "nothing half-published, no temporary name"


def test_a_readme_or_profile_edit_keeps_a_finished_run_and_a_model_edit_discards_it(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    from pdelra import operator_code

    # The digest on a copy of the source tree: edits outside the training code leave it, a model edit not.
    source = Path(operator_code.__file__).resolve().parents[1]
    copy = tmp_path / "checkout"
    shutil.copytree(source, copy / "src", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "README.md").write_text("# the README\n")
    (copy / "profiles" / "slurm").mkdir(parents=True)
    (copy / "profiles" / "slurm" / "config.yaml").write_text("jobs: 10\n")
    monkeypatch.setattr(operator_code, "_PACKAGE_DIR", copy / "src" / "pdelra")
    digest = operator_code.training_code.__wrapped__
    before = digest()
    (copy / "README.md").write_text("# the README, edited\n")
    (copy / "profiles" / "slurm" / "config.yaml").write_text("jobs: 20\n")
    with open(copy / "src" / "pdelra" / "reporting" / "__init__.py", "a") as reporting:
        reporting.write("# a reporting edit\n")
    assert digest() == before, "README, profile and reporting edits are not training code"
    with open(copy / "src" / "pdelra" / "nn" / "model.py", "a") as model:
        model.write("# a model edit\n")
    edited = digest()
    assert edited != before
    monkeypatch.undo()

    _, first = train_in_process(run_config(), task_dir, tmp_path)
    assert first is not None and first["code_version"]["training"] == operator_code.training_code()
    run = tmp_path / "run"
    _lose_outputs(run)
    real = metrics.code_version()
    dirty = {**real, "git": f"{real['git']}-dirty"}  # what a README edit makes of `git describe --dirty`
    monkeypatch.setattr(metrics, "code_version", lambda: dirty)
    with caplog.at_level(logging.INFO, logger="pdelra.training.finished"):
        _, again = train_in_process(run_config(), task_dir, tmp_path)
    assert again == first and "nothing left to train" in caplog.text, "restored despite the dirty checkout"

    _lose_outputs(run)
    monkeypatch.setattr(metrics, "code_version", lambda: {**real, "training": edited})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pdelra.training.finished"):
        _, retrained = train_in_process(run_config(), task_dir, tmp_path)
    assert "trained by other training code" in caplog.text
    assert retrained is not None and retrained["wall_time_s"] != first["wall_time_s"], "trained again"
