"""The training runner: determinism, exact resume after interruption, divergence, early stopping, metrics.

Runs use a tiny processed task written with the store's writer into tmp_path (no generators), and a tiny
model, so each in-process run takes well under a second. Tests marked slow start real `pdelra train`
processes and kill them.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pdelra.atomic import write_json_atomic
from pdelra.data import store
from pdelra.runs import RUN_KEYS
from pdelra.training import runner
from pdelra.training.batches import epoch_order, iterate_batches
from pdelra.training.checkpoint import checkpoint_path
from pdelra.training.interrupts import EXIT_INTERRUPTED
from pdelra.training.metrics import TIMING_FIELDS
from pdelra.training.runconfig import validate_run_config
from pdelra.training.schedule import WarmupCosine, planned_steps
from pdelra.training.seeding import derive_seeds

RUN_CONFIG: dict[str, Any] = {
    "task": "listops",
    "variant": "after_embedding",
    "scale": "h1",
    "seed": 0,
    "model": {
        "d_model": 16,
        "n_layers": 1,
        "n_heads": 2,
        "d_mlp": 32,
        "dropout": 0.1,  # dropout on: resume must restore the RNG state exactly
        "attn_dropout": 0.0,
        "alpha_init": 0.1,
    },
    "train": {
        "batch_size": 8,
        "lr": 0.003,
        "betas": [0.9, 0.98],
        "weight_decay": 1.0e-5,
        "warmup_steps": 4,
        "max_epochs": 3,
        "max_steps": None,
        "patience": 10,
        "grad_clip": 1.0,
        "eval_batch_size": 16,
        "checkpoint_minutes": None,
        "compile": False,
        "num_threads": 1,
    },
}


def run_config(**train: Any) -> dict[str, Any]:
    config = copy.deepcopy(RUN_CONFIG)
    for key in ("task", "variant", "scale", "setting", "seed"):
        if key in train:
            config[key] = train.pop(key)
    config["train"].update(train)
    return config


def make_task(root: Path, task: str = "listops", n: tuple[int, int, int] = (64, 24, 24)) -> Path:
    """A processed task folder: variable-length sequences, label = parity of the first token (learnable)."""
    rng = np.random.default_rng(123)
    task_dir = store.begin_task(root / task)
    max_length, vocab = 24, 10
    counts = {}
    for split, count in zip(("train", "val", "test"), n, strict=True):

        def documents(count: int = count) -> tuple[np.ndarray, np.ndarray]:
            lengths = rng.integers(4, max_length + 1, size=count)
            tokens = rng.integers(1, vocab, size=(count, max_length)).astype(np.uint8)
            tokens[np.arange(max_length)[None, :] >= lengths[:, None]] = 0
            return tokens, lengths

        tokens, lengths = documents()
        labels = tokens[:, 0] % 2
        pair = documents() if task == "retrieval" else (None, None)
        store.write_split(task_dir, split, tokens, lengths, labels, *pair)
        counts[split] = count
    store.write_manifest(
        task_dir,
        {
            "task": task,
            "vocab_size": vocab,
            "vocab": None,
            "num_classes": 2,
            "max_length": max_length,
            "counts": counts,
            "truncated": 0,
            "skipped": 0,
            "input_hash": "test",
            "notes": "synthetic test task",
        },
    )
    return task_dir


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    return make_task(tmp_path / "processed")


def train_in_process(config: dict[str, Any], data: Path, where: Path) -> tuple[int, dict[str, Any] | None]:
    """Run the trainer in this process; returns (exit status, metrics or None)."""
    status = runner.train_run(validate_run_config(config), data, where / "run", where / "ckpt")
    metrics_file = where / "run" / "metrics.json"
    return status, (json.loads(metrics_file.read_text()) if metrics_file.exists() else None)


def without_timings(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if k not in TIMING_FIELDS}


# ------------------------------------------------------------------------------------------------ units


def test_schedule_warms_up_linearly_then_decays_to_zero_at_the_planned_end() -> None:
    schedule = WarmupCosine(warmup_steps=10, total_steps=110)
    assert schedule(0) == pytest.approx(0.1)
    assert schedule(9) == pytest.approx(1.0)
    assert schedule(10) == pytest.approx(1.0)
    assert schedule(60) == pytest.approx(0.5)
    assert schedule(110) == pytest.approx(0.0, abs=1e-12)
    decay = [schedule(s) for s in range(10, 111)]
    assert all(a >= b for a, b in itertools.pairwise(decay))
    assert planned_steps(steps_per_epoch=8, max_epochs=50, max_steps=None) == 400
    assert planned_steps(steps_per_epoch=8, max_epochs=50, max_steps=30) == 30


def test_seed_zero_is_the_papers_setting_and_seeds_shift_together() -> None:
    assert derive_seeds(0).python == 42 and derive_seeds(0).numpy == 0 and derive_seeds(0).torch == 1
    assert (derive_seeds(3).python, derive_seeds(3).numpy, derive_seeds(3).torch) == (45, 3, 4)


def test_epoch_order_is_a_function_of_seed_and_epoch(task_dir: Path) -> None:
    first = epoch_order(64, 1, 0)
    assert sorted(first.tolist()) == list(range(64))
    assert np.array_equal(first, epoch_order(64, 1, 0))
    assert not np.array_equal(first, epoch_order(64, 1, 1))
    assert not np.array_equal(epoch_order(64, 1, 1), epoch_order(64, 2, 0))  # seeds do not alias epochs


def test_batches_are_trimmed_to_their_longest_sequence_and_resume_at_a_batch(task_dir: Path) -> None:
    split = store.load_split(task_dir, "train")
    order = epoch_order(len(split), 1, 0)
    batches = list(iterate_batches(split, order, 8, lambda t: t))
    assert len(batches) == 8
    for i, batch in enumerate(batches):
        rows = order[i * 8 : (i + 1) * 8]
        assert batch.tokens.dtype == torch.int64
        assert batch.tokens.shape == (8, int(split.lengths[rows].max()))
        assert torch.equal(batch.labels, torch.as_tensor(split.labels[rows]))
    resumed = list(iterate_batches(split, order, 8, lambda t: t, start_batch=5))
    assert [torch.equal(a.tokens, b.tokens) for a, b in zip(resumed, batches[5:], strict=True)] == [True] * 3


def test_json_write_is_atomic_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"status": "completed"})
    with pytest.raises(ValueError):
        write_json_atomic(path, {"status": float("nan")})  # NaN is not JSON: refused mid-write
    assert json.loads(path.read_text()) == {"status": "completed"}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temp file left behind


def test_cpu_threads_follow_config_then_slurm_then_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    from pdelra.training.device import cpu_threads

    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    assert cpu_threads(5) == 5
    assert cpu_threads(None) == 3
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    assert cpu_threads(None) == len(os.sched_getaffinity(0))


# ------------------------------------------------------------------------------------------- whole runs


def test_metrics_record_results_provenance_and_cost(task_dir: Path, tmp_path: Path) -> None:
    status, metrics = train_in_process(run_config(), task_dir, tmp_path)
    assert status == 0 and metrics is not None
    assert tuple(metrics[k] for k in RUN_KEYS) == ("listops", "after_embedding", "h1", "base", 0)
    assert list(metrics)[list(metrics).index("scale") + 1] == "setting"
    assert metrics["status"] == "completed" and metrics["stop_reason"] == "max_epochs"
    assert metrics["epochs_run"] == 3 and metrics["steps_run"] == 24 and metrics["steps_per_epoch"] == 8
    assert len(metrics["history"]) == 3
    for entry in metrics["history"]:
        assert {"train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr", "alpha"} <= set(entry)
        assert entry["alpha"], "after_embedding has a diffusion layer whose α is summarised"
    assert 0.0 <= metrics["test_accuracy"] <= 1.0
    assert metrics["best_val_accuracy"] == max(e["val_accuracy"] for e in metrics["history"])
    assert metrics["history"][-1]["lr"] == pytest.approx(0.0, abs=1e-12)  # cosine ends at 0
    assert metrics["config_hash"] == validate_run_config(run_config()).hash
    assert metrics["data_manifest_hash"] == store.manifest_hash(task_dir)
    assert metrics["parameter_count"] > metrics["diffusion_parameter_count"] > 0
    assert metrics["peak_memory_bytes"] > 0 and metrics["peak_memory_kind"] == "cpu_peak_rss"
    # Host memory is measured on every device (the job's mem_mb): the process's peak RSS.
    assert metrics["peak_host_memory_bytes"] >= metrics["peak_memory_bytes"]
    assert metrics["median_step_time_s"] > 0 and metrics["wall_time_s"] > 0
    assert metrics["versions"]["torch"] == torch.__version__
    assert metrics["versions"]["numpy"] == np.__version__
    assert metrics["code_version"]["package"]
    assert metrics["resumed_count"] == 0
    assert not checkpoint_path(tmp_path / "ckpt").exists(), "the checkpoint is removed after success"


def test_same_seed_gives_identical_metrics_and_another_seed_differs(task_dir: Path, tmp_path: Path) -> None:
    _, first = train_in_process(run_config(), task_dir, tmp_path / "a")
    _, again = train_in_process(run_config(), task_dir, tmp_path / "b")
    _, other = train_in_process(run_config(seed=1), task_dir, tmp_path / "c")
    assert first and again and other
    assert without_timings(first) == without_timings(again)
    assert [e["train_loss"] for e in other["history"]] != [e["train_loss"] for e in first["history"]]


def test_retrieval_pairs_train_the_two_tower_model(tmp_path: Path) -> None:
    data = make_task(tmp_path / "processed", task="retrieval")
    status, metrics = train_in_process(run_config(task="retrieval", max_epochs=1), data, tmp_path)
    assert status == 0 and metrics and metrics["steps_run"] == 8


def test_max_steps_cap_ends_the_epoch_early_and_still_evaluates(task_dir: Path, tmp_path: Path) -> None:
    _, metrics = train_in_process(run_config(max_steps=11), task_dir, tmp_path)
    assert metrics and metrics["steps_run"] == 11 and metrics["planned_steps"] == 11
    assert metrics["epochs_run"] == 2 and metrics["stop_reason"] == "max_steps"
    assert metrics["history"][-1]["steps"] == 11


def test_forced_nan_is_recorded_as_diverged_with_its_step(task_dir: Path, tmp_path: Path) -> None:
    status, metrics = train_in_process(run_config(debug_nan_at_step=11), task_dir, tmp_path)
    assert status == 0, "a divergence is a result, not a crash: the DAG must go on"
    assert metrics is not None
    assert metrics["status"] == "diverged" and metrics["diverged_at_step"] == 11
    assert metrics["steps_run"] == 10 and metrics["epochs_run"] == 1  # epoch 1 finished, epoch 2 did not
    assert metrics["test_accuracy"] is None


def test_a_nan_validation_loss_marks_the_run_diverged_on_it(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finite while training, NaN with dropout off (an eval-mode path): the run is diverged, and says on what,
    not "completed" with an accuracy of NaN outputs."""
    real_evaluate = runner._Trainer._evaluate

    def evaluate(self: runner._Trainer, split: str) -> tuple[float, float]:
        loss, accuracy = real_evaluate(self, split)
        return (float("nan"), accuracy) if split == "val" and self.state.epoch >= 1 else (loss, accuracy)

    monkeypatch.setattr(runner._Trainer, "_evaluate", evaluate)
    status, metrics = train_in_process(run_config(), task_dir, tmp_path)
    assert status == 0 and metrics is not None
    assert (metrics["status"], metrics["diverged_on"]) == ("diverged", "validation loss")
    assert metrics["diverged_at_step"] == metrics["steps_run"] == 2 * metrics["steps_per_epoch"]  # epoch 2
    assert metrics["epochs_run"] == 1  # epoch 1 recorded; epoch 2 diverged at its validation
    assert metrics["test_accuracy"] is None
    forced = train_in_process(run_config(debug_nan_at_step=11), task_dir, tmp_path / "forced")[1]
    assert forced is not None and forced["diverged_on"] == "training loss"


def test_early_stopping_reports_test_accuracy_of_the_best_validation_weights(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validation peaks at epoch 2, then stalls for `patience` epochs: stop, test the epoch-2 weights."""
    scripted_val = iter([0.5, 0.8, 0.6, 0.7, 0.9, 0.9])
    weights_seen: dict[str, list[dict[str, torch.Tensor]]] = {"val": [], "test": []}
    real_evaluate = runner._Trainer._evaluate

    def evaluate(self: runner._Trainer, split_name: str) -> tuple[float, float]:
        weights_seen[split_name].append({k: v.clone() for k, v in self.model.state_dict().items()})
        loss, accuracy = real_evaluate(self, split_name)
        return (loss, next(scripted_val)) if split_name == "val" else (loss, accuracy)

    monkeypatch.setattr(runner._Trainer, "_evaluate", evaluate)
    _, metrics = train_in_process(run_config(max_epochs=10, patience=2), task_dir, tmp_path)
    assert metrics is not None
    assert metrics["stopped_early"] and metrics["stop_reason"] == "early_stopping"
    assert metrics["epochs_run"] == 4 and metrics["best_epoch"] == 2 and metrics["best_val_accuracy"] == 0.8

    def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
        return all(torch.equal(a[k], b[k]) for k in a)

    (tested,) = weights_seen["test"]
    assert same(tested, weights_seen["val"][1]), "test must use the best-validation (epoch 2) weights"
    assert not same(tested, weights_seen["val"][-1])


def interrupt_at_step(monkeypatch: pytest.MonkeyPatch, step: int, signum: int) -> None:
    """Deliver a real signal to this process right after optimizer step `step`."""
    real_step = runner._Trainer._step

    def step_then_signal(self: runner._Trainer, batch: Any) -> Any:
        result = real_step(self, batch)
        if self.state.global_step + 1 == step:
            os.kill(os.getpid(), signum)
        return result

    monkeypatch.setattr(runner._Trainer, "_step", step_then_signal)


def test_signal_checkpoints_exits_75_and_the_rerun_resumes_exactly(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, reference = train_in_process(run_config(), task_dir, tmp_path / "reference")
    with monkeypatch.context() as patch:
        interrupt_at_step(patch, 13, signal.SIGUSR1)  # mid-epoch 2
        status, metrics = train_in_process(run_config(), task_dir, tmp_path / "resumed")
    assert status == EXIT_INTERRUPTED and metrics is None
    assert checkpoint_path(tmp_path / "resumed" / "ckpt").exists()
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL, "handlers are restored after the run"

    status, resumed = train_in_process(run_config(), task_dir, tmp_path / "resumed")
    assert status == 0 and resumed and reference
    assert resumed["resumed_count"] == 1
    assert resumed["interruptions"] == [{"signal": "SIGUSR1", "step": 13}]
    assert reference["interruptions"] == []
    assert without_timings(resumed) == without_timings(reference)


def test_a_checkpoint_of_another_config_is_moved_aside_not_resumed(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        interrupt_at_step(patch, 5, signal.SIGTERM)
        status, _ = train_in_process(run_config(), task_dir, tmp_path)
    assert status == EXIT_INTERRUPTED
    status, metrics = train_in_process(run_config(lr=0.002), task_dir, tmp_path)
    assert status == 0 and metrics and metrics["resumed_count"] == 0 and metrics["steps_run"] == 24
    assert len(list((tmp_path / "ckpt").glob("checkpoint.stale-*.pt"))) == 1


def test_bad_run_config_or_model_key_exits_2_naming_it(
    task_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from pdelra.training.commands import train_command

    def cli(config: dict[str, Any]) -> int:
        args = type("Args", (), {})()
        args.run_config, args.data = json.dumps(config), task_dir
        args.out, args.checkpoint_dir = tmp_path / "run", tmp_path / "ckpt"
        args.device, args.allow_cpu = "auto", False
        return train_command(args)

    bad_model = run_config()
    bad_model["model"]["d_modle"] = 8
    assert cli(bad_model) == 2
    assert "model.d_modle" in caplog.text
    assert cli(run_config(task="text")) == 2
    assert "holds task 'listops'" in caplog.text
    assert cli(run_config(variant="after_everything")) == 2
    assert "unknown variant 'after_everything'" in caplog.text
    assert not (tmp_path / "run" / "metrics.json").exists()


# ------------------------------------------------------------------------------------ real processes

SLOW_CONFIG = run_config(max_epochs=6, checkpoint_every_steps=1, batch_size=4)  # 96 steps, a checkpoint each


def start_train(config: dict[str, Any], data: Path, where: Path) -> subprocess.Popen[bytes]:
    where.mkdir(parents=True, exist_ok=True)
    (where / "run.json").write_text(json.dumps(config))
    command = [sys.executable, "-m", "pdelra.cli", "train", "--run-config", str(where / "run.json")]
    command += ["--data", str(data), "--out", str(where / "run"), "--checkpoint-dir", str(where / "ckpt")]
    log = open(where / "train.log", "ab")  # noqa: SIM115 - handed to the child process
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


def finish(process: subprocess.Popen[bytes], where: Path) -> int:
    status = process.wait(timeout=120)
    assert status in (0, EXIT_INTERRUPTED), (where / "train.log").read_text()
    return status


def wait_for_checkpoint(process: subprocess.Popen[bytes], ckpt: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not checkpoint_path(ckpt).exists():
        assert process.poll() is None, "training ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A processed task and the metrics of an uninterrupted `pdelra train` process on it."""
    root = tmp_path_factory.mktemp("uninterrupted")
    data = make_task(root / "processed")
    finish(start_train(SLOW_CONFIG, data, root), root)
    return data, json.loads((root / "run" / "metrics.json").read_text())


@pytest.mark.slow
def test_sigkill_at_an_arbitrary_step_then_rerun_gives_the_uninterrupted_metrics(
    uninterrupted: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    data, reference = uninterrupted
    process = start_train(SLOW_CONFIG, data, tmp_path)
    wait_for_checkpoint(process, tmp_path / "ckpt")
    # Killed at once, wherever its next step has got to (not at a checkpoint boundary we chose): a fixed
    # sleep first would race the CPU, as a fast one could finish all 96 steps inside it.
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (tmp_path / "run" / "metrics.json").exists()

    assert finish(start_train(SLOW_CONFIG, data, tmp_path), tmp_path) == 0
    resumed = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert resumed["resumed_count"] == 1
    assert without_timings(resumed) == without_timings(reference)


@pytest.mark.slow
def test_sigterm_exits_75_with_a_checkpoint_and_the_rerun_resumes(
    uninterrupted: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    data, reference = uninterrupted
    process = start_train(SLOW_CONFIG, data, tmp_path)
    wait_for_checkpoint(process, tmp_path / "ckpt")
    process.send_signal(signal.SIGTERM)
    assert finish(process, tmp_path) == EXIT_INTERRUPTED
    assert checkpoint_path(tmp_path / "ckpt").exists()
    assert not (tmp_path / "run" / "metrics.json").exists()

    assert finish(start_train(SLOW_CONFIG, data, tmp_path), tmp_path) == 0
    resumed = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert resumed["resumed_count"] == 1 and math.isfinite(resumed["test_accuracy"])
    assert without_timings(resumed) == without_timings(reference)


def test_train_help_names_every_run_config_key(capsys: pytest.CaptureFixture[str]) -> None:
    from pdelra.cli import main
    from pdelra.training.runconfig import SCHEMA

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for section in ("model", "train"):
        for key in SCHEMA["properties"][section]["properties"]:
            assert key in shown, f"`pdelra train --help` does not name {section}.{key}"
    assert "micro_batch_size" in shown and "length_buckets" in shown
