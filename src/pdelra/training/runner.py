"""Train one run (task, variant, scale, setting, seed) with the paper's recipe and write its metrics.json.

The loop, in order:
  seed → build model/optimizer/schedule → resume from the checkpoint if it is this run's →
  for each epoch: seeded shuffle, train from the saved batch position, evaluate on val, keep the best
  weights, early-stop on patience → evaluate test with the best-validation weights → the final files
  (weights, metrics.json) kept in CKPT_DIR/finished → remove the checkpoint → publish them to RUN_DIR.
A retry that finds this run's kept final files restores them instead of training (pdelra.training.finished).

Exactness of resume rests on three facts: the batch order is a pure function of (seed, epoch); the
checkpoint holds every other piece of state (weights, AdamW moments, schedule, RNG states, running sums);
and interruption only happens between optimizer steps. On CPU a resumed run therefore reproduces an
uninterrupted one bit for bit.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from pdelra.atomic import write_json_atomic
from pdelra.data.store import check_values, load_split, manifest_hash, read_manifest
from pdelra.locking import run_lock
from pdelra.nn.model import LRAClassifier, ModelConfig
from pdelra.operator_code import operator_code
from pdelra.runs import COMPLETED, DIVERGED
from pdelra.training import batches as B
from pdelra.training import finished
from pdelra.training.checkpoint import (
    remove_checkpoint,
    resume_trainer,
    save_checkpoint,
    trainer_states,
    write_guard,
)
from pdelra.training.device import DeviceSetup, setup_device
from pdelra.training.interrupts import EXIT_INTERRUPTED, InterruptFlag
from pdelra.training.metrics import (
    METRICS_NAME,
    SCHEMA_VERSION,
    code_version,
    finite_or_none,
    library_versions,
    median_or_none,
    peak_host_memory_bytes,
)
from pdelra.training.progress import Progress
from pdelra.training.runconfig import RunConfig, RunConfigError
from pdelra.training.schedule import make_scheduler, planned_steps
from pdelra.training.seeding import derive_seeds, seed_everything
from pdelra.training.state import TrainState, cpu_copy
from pdelra.training.weights import WEIGHTS_NAME, save_weights

log = logging.getLogger("pdelra.training")

# ModelConfig fields that come from the data (manifest) and the run identifiers, not from the `model:` block.
DERIVED_MODEL_FIELDS = frozenset({"vocab_size", "num_classes", "max_length", "variant", "scale", "two_tower"})


def build_model(cfg: RunConfig, manifest: dict[str, Any], two_tower: bool) -> torch.nn.Module:
    """The LRA classifier for this run; the manifest supplies vocabulary, classes and length."""
    allowed = {f.name for f in dataclasses.fields(ModelConfig)} - DERIVED_MODEL_FIELDS
    unknown = sorted(set(cfg.model) - allowed)
    if unknown:
        raise RunConfigError(
            f"unknown key {', '.join('model.' + k for k in unknown)} (allowed: {sorted(allowed)})"
        )
    try:
        model_cfg = ModelConfig(
            vocab_size=manifest["vocab_size"],
            num_classes=manifest["num_classes"],
            max_length=manifest["max_length"],
            variant=cfg.variant,
            scale=cfg.scale,
            two_tower=two_tower,
            **cfg.model,
        )
    except ValueError as exc:  # ModelConfig's own checks (unknown variant, d_model % n_heads, ...)
        raise RunConfigError(f"run config: {exc}") from exc
    return LRAClassifier(model_cfg)


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """(all trainable parameters, those inside the PDE operators; each parameter counted once)."""
    total = sum(p.numel() for p in model.parameters() if p.requires_grad)
    operators = model.diffusion_layers().values()  # type: ignore[operator]
    # A set of parameters, because operators nest (the across-heads wrapper holds a DiffusionLayer).
    inside = {id(p): p for op in operators for p in op.parameters() if p.requires_grad}
    return total, sum(p.numel() for p in inside.values())


def train_run(cfg: RunConfig, data_dir: Path, out_dir: Path, ckpt_dir: Path, device: str = "auto") -> int:
    """Train one run; returns 0 (completed or diverged, metrics.json written) or EXIT_INTERRUPTED (75).

    `device`: auto, cuda or cpu (pdelra.training.device.choose_device; cuda without CUDA is an error)."""
    identity = run_identity(cfg, manifest_hash(data_dir))
    # The run's lock first: a second process for the same run (a rerun beside a job of a dead Snakemake)
    # waits here instead of training beside it. Then a run finished by an earlier attempt (or by the process
    # we waited for) is restored, not trained again.
    with run_lock(ckpt_dir), InterruptFlag() as interrupted:
        if finished.restore(ckpt_dir, out_dir, identity) is not None:
            return 0
        return _Trainer(cfg, data_dir, out_dir, ckpt_dir, interrupted, device).run()


def run_identity(cfg: RunConfig, data_hash: str) -> dict[str, str]:
    """What a checkpoint or a kept finished run must match to be this run's: the config hash, the data
    manifest hash and, for a variant with a user's operator, the hash of the operator code this process
    runs (pdelra.operator_code): also when the run config does not carry it (`pdelra train` by hand), an
    edited operator does not resume the old code's checkpoint. Built-in variants' identity is unchanged."""
    identity = {"config_hash": cfg.hash, "data_manifest_hash": data_hash}
    try:
        code = operator_code(cfg.model.get("operators"))
    except ValueError as exc:
        raise RunConfigError(f"run config model.operators: {exc}") from exc
    if code is None:
        return identity
    planned = cfg.raw.get("operator_code")
    if planned is not None and planned != code:  # edited between planning and this job: record what ran
        log.warning(
            "the operator code of variant %s changed since the workflow planned this run (%s…, now %s…): "
            "training with the code as it is now and recording its hash in metrics.json",
            cfg.variant,
            planned[:12],
            code[:12],
        )
    return {**identity, "operator_code": code}


class _Trainer:
    def __init__(
        self,
        cfg: RunConfig,
        data_dir: Path,
        out_dir: Path,
        ckpt_dir: Path,
        interrupted: InterruptFlag,
        device: str = "auto",
    ) -> None:
        self.started = time.monotonic()
        self.cfg, self.tc = cfg, cfg.train
        self.out_dir, self.ckpt_dir, self.interrupted = out_dir, ckpt_dir, interrupted

        self.manifest = read_manifest(data_dir)
        if self.manifest["task"] != cfg.task:
            raise RunConfigError(
                f"run config task {cfg.task!r} but {data_dir} holds task {self.manifest['task']!r}"
            )
        self.data_hash = manifest_hash(data_dir)
        self.splits = {name: load_split(data_dir, name) for name in ("train", "val", "test")}
        for name, split in self.splits.items():  # a bad value fails here, naming its file, not in torch
            check_values(data_dir, name, split, self.manifest)
        self.two_tower = B.is_pair_split(self.splits["train"])

        self.seeds = derive_seeds(cfg.seed)
        self.dev: DeviceSetup = setup_device(self.tc.num_threads, device)
        seed_everything(self.seeds)  # before building the model: initial weights depend on the seed
        self.model = build_model(cfg, self.manifest, self.two_tower).to(self.dev.device)
        # torch.compile wraps the module; checkpoints always hold the plain module's weights.
        self.forward = torch.compile(self.model, dynamic=True) if self.tc.compile else self.model
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=self.tc.lr, betas=self.tc.betas, weight_decay=self.tc.weight_decay
        )
        self.steps_per_epoch = B.num_batches(len(self.splits["train"].labels), self.tc.batch_size)
        self.total_steps = planned_steps(self.steps_per_epoch, self.tc.max_epochs, self.tc.max_steps)
        if self.tc.warmup_steps >= self.total_steps:
            log.warning(
                "warmup_steps %d >= planned steps %d: the learning rate never reaches its peak %.1e",
                self.tc.warmup_steps,
                self.total_steps,
                self.tc.lr,
            )
        self.scheduler = make_scheduler(self.optimizer, self.tc.warmup_steps, self.total_steps)
        self.state = TrainState()
        self.best_weights: dict[str, torch.Tensor] | None = None
        self.identity = run_identity(cfg, self.data_hash)
        self.last_checkpoint = time.monotonic()

    # ----------------------------------------------------------------------------------------- driver

    def run(self) -> int:
        self._resume()
        progress = Progress(self.total_steps, self.state.global_step)
        try:
            while self.state.stop_reason is None:
                if not self._train_epoch(progress):
                    return self._stop_interrupted()
                if self.state.stop_reason == "diverged":
                    break
                self._end_epoch(progress)
                if not self.interrupted:
                    self._save_checkpoint()
                if self.interrupted:  # also when the signal came during that save
                    return self._stop_interrupted()
        finally:
            progress.close()
        self._finish()
        return 0

    def _train_epoch(self, progress: Progress) -> bool:
        """Train the rest of the current epoch; False when a signal asks to stop (the caller checkpoints)."""
        st, tc = self.state, self.tc
        train = self.splits["train"]
        order = B.train_order(train, self.seeds.sampler, st.epoch, tc.batch_size, tc.length_buckets)
        self.model.train()
        for batch in B.iterate_batches(train, order, tc.batch_size, self.dev.to_device, st.batch_in_epoch):
            if tc.max_steps is not None and st.global_step >= tc.max_steps:
                break
            t0 = time.perf_counter()
            loss, correct = self._step(batch)
            if loss is None:
                return True  # diverged: stop_reason is set
            self.dev.synchronize()
            st.step_times.append(time.perf_counter() - t0)
            st.global_step += 1
            st.batch_in_epoch += 1
            st.epoch_loss_sum += loss * len(batch)
            st.epoch_correct += correct
            st.epoch_seen += len(batch)
            progress.step(st.global_step, loss, self.scheduler.get_last_lr()[0])
            if self.interrupted:
                return False
            if self._checkpoint_due():
                self._save_checkpoint()
        return True

    def _step(self, batch: B.Batch) -> tuple[float | None, int]:
        """One optimizer step; returns (batch mean loss, correct predictions), or (None, 0) on divergence.

        With `train.micro_batch_size`, the batch runs as micro-batches whose summed losses, each divided by
        the whole batch's size, accumulate the gradient of the batch mean: the same step as one pass.
        """
        step_number = self.state.global_step + 1  # 1-based number of the step being attempted
        self.optimizer.zero_grad(set_to_none=True)
        loss_value, correct = 0.0, 0
        for part in B.split_batch(batch, self.tc.micro_batch_size):
            with self.dev.autocast(), self.dev.attention_kernels():
                logits = self.forward(*part.inputs)
            loss = F.cross_entropy(logits.float(), part.labels, reduction="sum") / len(batch)
            if self.tc.debug_nan_at_step == step_number:
                loss = loss * float("nan")  # documented test hook: exercises the divergence path
            part_loss = loss.item()
            if not math.isfinite(part_loss):
                log.error("loss is %s at step %d: stopping the run as diverged", part_loss, step_number)
                self.state.stop_reason, self.state.diverged_at_step = "diverged", step_number
                self.state.diverged_on = "training loss"
                self.optimizer.zero_grad(set_to_none=True)
                return None, 0
            loss.backward()
            loss_value += part_loss
            correct += int((logits.argmax(dim=-1) == part.labels).sum().item())
        if self.tc.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        return loss_value, correct

    def _end_epoch(self, progress: Progress) -> None:
        st = self.state
        val_loss, val_accuracy = self._evaluate("val")
        if not math.isfinite(val_loss):
            # Not a number only with dropout off (an eval-mode path): the model's validation outputs, and so
            # its accuracy, mean nothing. The run has diverged, and says where, rather than "completed".
            log.error(
                "validation loss is %s after step %d: stopping the run as diverged", val_loss, st.global_step
            )
            st.stop_reason, st.diverged_at_step, st.diverged_on = (
                "diverged",
                st.global_step,
                "validation loss",
            )
            return
        lr = self.scheduler.get_last_lr()[0]
        entry = {
            "epoch": st.epoch + 1,
            "steps": st.global_step,
            "train_loss": st.epoch_loss_sum / max(st.epoch_seen, 1),
            "train_accuracy": st.epoch_correct / max(st.epoch_seen, 1),
            "val_loss": val_loss,
            "val_accuracy": val_accuracy,
            "lr": lr,
            "alpha": _json_safe(self.model.alpha_summary()),
        }
        st.record_epoch(entry, self.tc.patience)
        if st.best_epoch == entry["epoch"]:
            self.best_weights = cpu_copy(self.model.state_dict())
        progress.epoch(entry["epoch"], entry, st.best_val_accuracy)
        if st.stop_reason is None:
            if self.tc.max_steps is not None and st.global_step >= self.tc.max_steps:
                st.stop_reason = "max_steps"
            elif st.epoch >= self.tc.max_epochs:
                st.stop_reason = "max_epochs"

    @torch.inference_mode()
    def _evaluate(self, split_name: str) -> tuple[float, float]:
        """(mean loss, accuracy) over a whole split, dropout off."""
        split = self.splits[split_name]
        self.model.eval()
        loss_sum, correct, seen = 0.0, 0, 0
        for batch in B.iterate_batches(
            split, B.eval_order(split), self.tc.eval_batch_size, self.dev.to_device
        ):
            with self.dev.autocast(), self.dev.attention_kernels():
                logits = self.forward(*batch.inputs).float()
            loss_sum += F.cross_entropy(logits, batch.labels, reduction="sum").item()
            correct += int((logits.argmax(dim=-1) == batch.labels).sum().item())
            seen += len(batch)
        self.model.train()
        return loss_sum / max(seen, 1), correct / max(seen, 1)

    # ------------------------------------------------------------------------------------ checkpoints

    def _checkpoint_due(self) -> bool:
        every = self.tc.checkpoint_every_steps
        if every is not None and self.state.global_step % every == 0:
            return True
        minutes = self.tc.checkpoint_minutes
        return minutes is not None and time.monotonic() - self.last_checkpoint >= 60.0 * minutes

    def _save_checkpoint(self) -> None:
        now = time.monotonic()
        state = self.state.to_dict()
        state["elapsed_s"] = self.state.elapsed_s + (now - self.started)  # wall time up to this save
        save_checkpoint(
            self.ckpt_dir,
            {
                **self.identity,
                **trainer_states(self.model, self.optimizer, self.scheduler),
                "best_weights": self.best_weights,
                "state": state,
            },
        )
        self.last_checkpoint = now
        log.debug("checkpoint at step %d written to %s", self.state.global_step, self.ckpt_dir)

    def _resume(self) -> None:
        saved = resume_trainer(self.ckpt_dir, self.identity, self.model, self.optimizer, self.scheduler)
        if saved is None:
            return
        self.best_weights = saved["best_weights"]
        self.state = TrainState.from_dict(saved["state"])
        self.state.resumed_count += 1
        log.info(
            "resumed from %s at epoch %d, step %d (resume #%d)",
            self.ckpt_dir,
            self.state.epoch + 1,
            self.state.global_step,
            self.state.resumed_count,
        )

    def _stop_interrupted(self) -> int:
        """Record the signal in the state (so in the checkpoint and metrics.json), checkpoint, exit 75."""
        signal_name = self.interrupted.received.name if self.interrupted.received else None
        self.state.interruptions.append({"signal": signal_name, "step": self.state.global_step})
        self._save_checkpoint()
        log.warning(
            "interrupted by %s at step %d; checkpoint in %s; rerun the same command to resume (exit %d)",
            signal_name or "a signal",
            self.state.global_step,
            self.ckpt_dir,
            EXIT_INTERRUPTED,
        )
        return EXIT_INTERRUPTED

    # ------------------------------------------------------------------------------------------ finish

    def _finish(self) -> None:
        st = self.state
        test_loss = test_accuracy = None
        if st.stop_reason != "diverged" and self.best_weights is not None:
            # Our choice, not the paper's (it does not say which checkpoint it tests): report the test
            # accuracy of the best-validation weights, not the last ones (report: Deviations).
            self.model.load_state_dict(self.best_weights)
            test_loss, test_accuracy = self._evaluate("test")
        metrics = self._metrics(test_loss, test_accuracy)
        final = finished.begin(self.ckpt_dir)  # kept until the workflow has stored RUN_DIR's files
        self._save_weights(final)  # before metrics.json, whose presence marks the run (and weights) complete
        with write_guard(final / METRICS_NAME, f"the checkpoint in {self.ckpt_dir} is kept"):
            write_json_atomic(final / METRICS_NAME, metrics)
        remove_checkpoint(self.ckpt_dir)
        with write_guard(self.out_dir / METRICS_NAME, f"the run is kept in {final}; rerun to restore it"):
            finished.publish(self.ckpt_dir, self.out_dir)
        log.info(
            "%s: %s; test accuracy %s at best epoch %s (val %s); %d steps; metrics in %s",
            self.cfg.task,
            metrics["status"],
            test_accuracy,
            st.best_epoch,
            st.best_val_accuracy,
            st.global_step,
            self.out_dir / METRICS_NAME,
        )

    def _save_weights(self, folder: Path) -> None:
        """FOLDER/model.safetensors: the best-validation weights (the last ones if no validation ever ran)."""
        best = self.best_weights is not None
        weights = self.best_weights if best else self.model.state_dict()
        meta = {"weights": "best_validation" if best else "last", "best_epoch": str(self.state.best_epoch)}
        meta.update(self.identity)
        with write_guard(folder / WEIGHTS_NAME, f"the checkpoint in {self.ckpt_dir} is kept"):
            save_weights(folder / WEIGHTS_NAME, weights, meta)

    def _metrics(self, test_loss: float | None, test_accuracy: float | None) -> dict[str, Any]:
        st, cfg = self.state, self.cfg
        params, diffusion_params = count_parameters(self.model)
        peak_bytes, peak_kind = self.dev.peak_memory()
        return {
            "schema_version": SCHEMA_VERSION,
            "task": cfg.task,
            "variant": cfg.variant,
            "scale": cfg.scale,
            "setting": cfg.setting,
            "seed": cfg.seed,
            "status": DIVERGED if st.stop_reason == "diverged" else COMPLETED,
            "diverged_at_step": st.diverged_at_step,
            "diverged_on": st.diverged_on,
            "stop_reason": st.stop_reason,
            "test_accuracy": test_accuracy,
            "test_loss": finite_or_none(test_loss),
            "n_test": len(
                self.splits["test"].labels
            ),  # the accuracy's resolution (the claims' variance floor)
            "best_val_accuracy": st.best_val_accuracy,
            "best_epoch": st.best_epoch,
            "epochs_run": len(st.history),
            "steps_run": st.global_step,
            "steps_per_epoch": self.steps_per_epoch,
            "planned_steps": self.total_steps,
            "stopped_early": st.stop_reason == "early_stopping",
            "history": _json_safe(st.history),
            "parameter_count": params,
            "diffusion_parameter_count": diffusion_params,
            "seeds": dataclasses.asdict(self.seeds),
            "config_hash": cfg.hash,
            "data_manifest_hash": self.data_hash,
            "run_config": dict(cfg.raw),
            "code_version": code_version(),
            # The hash of the variant's own operator code this run ran (None: the project's code only).
            "operator_code": self.identity.get("operator_code"),
            "versions": library_versions(),
            "device": self.dev.name,
            "num_threads": self.dev.threads,
            "wall_time_s": st.elapsed_s + (time.monotonic() - self.started),
            "median_step_time_s": median_or_none(st.step_times),
            "peak_memory_bytes": peak_bytes,
            "peak_memory_kind": peak_kind,
            "peak_host_memory_bytes": peak_host_memory_bytes(),
            "resumed_count": st.resumed_count,
            "interruptions": st.interruptions,
        }


def _json_safe(value: Any) -> Any:
    """Plain JSON types for metrics.json: tensors/NumPy scalars become floats, non-finite floats null."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, torch.Tensor | np.generic):
        value = value.item()
    if isinstance(value, float):
        return finite_or_none(value)
    return value
