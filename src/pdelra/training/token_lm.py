"""The resumable training loop that both language-model trainers share (`pdelra lm train`, pdelra.lm.trainer;
`pdelra cta-official train-lm`, pdelra.cta_official.lm).

A run trains a causal LM on the rows of a token store (windows or blocks, one row a sequence) and writes
RUN_DIR/metrics.json. `TokenLMRun` holds everything that does not depend on the model: loading and checking
the token splits, seeds and device, the epoch/step loop over seeded shuffles with interruption (exit 75) and
timed checkpoints, checkpoint save and resume, divergence, best-validation weights, and the provenance part
of metrics.json. A trainer subclasses it and gives its model, optimiser and schedule (`_build`), its loss
(`_loss`), its evaluation (`_epoch_scores`, `_results`), its diagnostics (the hooks) and its log lines;
`lm_schema` builds its run-config schema from the keys both trainers share.

Resume is exact on CPU for the same reasons as pdelra.training.runner: the batch order is a pure function of
(seed, epoch), the checkpoint holds every other piece of state, and interruption only happens between steps.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pdelra.atomic import write_json_atomic
from pdelra.data.store import check_values, load_split, manifest_hash, read_manifest
from pdelra.locking import run_lock
from pdelra.runs import COMPLETED, DIVERGED, RUN_KEYS  # a run's identity, first in metrics.json
from pdelra.training import finished
from pdelra.training.batches import epoch_order
from pdelra.training.checkpoint import (
    remove_checkpoint,
    resume_trainer,
    save_checkpoint,
    trainer_states,
)
from pdelra.training.device import DeviceError, choose_device, setup_device
from pdelra.training.interrupts import EXIT_INTERRUPTED, InterruptFlag
from pdelra.training.metrics import (
    METRICS_NAME,
    code_version,
    finite_or_none,
    library_versions,
    median_or_none,
    peak_host_memory_bytes,
)
from pdelra.training.runconfig import RunConfigError, config_hash, read_run_config
from pdelra.training.schedule import planned_steps
from pdelra.training.seeding import derive_seeds, seed_everything

POS_INT = {"type": "integer", "minimum": 1}
NULL_OR_POS_INT = {"type": ["integer", "null"], "minimum": 1}
# The model and train keys that mean the same in both LM trainers' run configs.
MODEL_PROPERTIES: dict[str, Any] = {
    "d_model": POS_INT,
    "n_layers": POS_INT,
    "n_heads": POS_INT,
    "d_mlp": POS_INT,
    "dropout": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
}
TRAIN_PROPERTIES: dict[str, Any] = {
    "batch_size": POS_INT,
    "eval_batch_size": POS_INT,
    "lr": {"type": "number", "exclusiveMinimum": 0},
    "betas": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
    "weight_decay": {"type": "number", "minimum": 0},
    "max_epochs": POS_INT,
    "max_steps": NULL_OR_POS_INT,
    "grad_clip": {"type": ["number", "null"], "exclusiveMinimum": 0},
    "checkpoint_minutes": {"type": ["number", "null"], "exclusiveMinimum": 0},
    "num_threads": NULL_OR_POS_INT,
}


def lm_schema(
    *,
    task: dict[str, Any],
    variant: dict[str, Any],
    model_keys: Sequence[str],
    model: dict[str, Any],
    train_keys: Sequence[str],
    train: dict[str, Any],
) -> dict[str, Any]:
    """A trainer's run-config schema: the run keys (`task` and `variant` as given), and `model` and `train`
    objects holding the shared properties plus the trainer's own (`model`, `train`); `*_keys` are the
    required ones, in the order a config missing several is told of them. Unknown keys are refused."""

    def section(required: Sequence[str], properties: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "additionalProperties": False,
            "required": list(required),
            "properties": properties,
        }

    return {
        "type": "object",
        "additionalProperties": False,
        "required": [*RUN_KEYS, "model", "train"],
        "properties": {
            "task": task,
            "variant": variant,
            "scale": {"type": "string", "minLength": 1},
            "setting": {"type": "string", "minLength": 1},
            "seed": {"type": "integer", "minimum": 0},
            "model": section(model_keys, {**MODEL_PROPERTIES, **model}),
            "train": section(train_keys, {**TRAIN_PROPERTIES, **train}),
        },
    }


def validate_against(schema: dict[str, Any], config: Any, source: str) -> None:
    """RunConfigError naming the first bad key (by path, so the message is the same from run to run)."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = ".".join(map(str, error.absolute_path)) or "(top level)"
        raise RunConfigError(f"{source}: {where}: {error.message}")


class TokenLMRun:
    """One resumable LM run. `state` is a plain dict (it goes into the checkpoint as it is); its keys are
    the loop's own plus the running sums named by SUM_KEY/COUNT_KEY and whatever `_new_state` is given."""

    log: logging.Logger  # the trainer's logger: its log lines keep their logger's name
    validate: Callable[[Any, str], dict[str, Any]]  # the trainer's run-config check (a staticmethod)
    SCHEMA_VERSION = 1  # of the trainer's metrics.json
    SUM_KEY: str  # this epoch's training loss × weight, summed ...
    COUNT_KEY: str  # ... and the weights (windows or predicted tokens): train_loss is their ratio

    def __init__(
        self, cfg: dict[str, Any], data_dir: Path, out_dir: Path, ckpt_dir: Path, device: str = "auto"
    ) -> None:
        self.started = time.monotonic()  # this attempt's start: wall_time_s adds each attempt's time once
        self.cfg, self.tc = cfg, cfg["train"]
        self.out_dir, self.ckpt_dir = out_dir, ckpt_dir
        manifest = read_manifest(data_dir)
        if manifest["task"] != cfg["task"]:
            raise RunConfigError(f"run config task {cfg['task']!r} but {data_dir} holds {manifest['task']!r}")
        self.manifest = manifest
        splits = {s: load_split(data_dir, s) for s in ("train", "val", "test")}
        for name, split in splits.items():  # an LM store's labels say where a row starts, not a class
            check_values(data_dir, name, split, manifest, labels=False)
        self.splits: dict[str, np.ndarray] = {
            name: np.asarray(split.tokens) for name, split in splits.items()
        }
        self.seeds = derive_seeds(cfg["seed"])
        self.dev = setup_device(self.tc["num_threads"], device)
        seed_everything(self.seeds)  # before the subclass builds its model: its initial weights are seeded
        self.identity = {"config_hash": config_hash(cfg), "data_manifest_hash": manifest_hash(data_dir)}
        self.model: torch.nn.Module
        self.optimizer: torch.optim.Optimizer
        self.scheduler: torch.optim.lr_scheduler.LRScheduler
        self.state: dict[str, Any]
        self._build()
        self.last_checkpoint = time.monotonic()

    def _adamw(self, params: Any) -> torch.optim.AdamW:
        """AdamW over `params` with the run config's lr, betas and weight decay."""
        tc = self.tc
        return torch.optim.AdamW(
            params, lr=tc["lr"], betas=tuple(tc["betas"]), weight_decay=tc["weight_decay"]
        )

    def _plan_steps(self) -> int:
        """Steps per epoch and in all, over the (possibly subset) training split; the schedule needs them."""
        self.steps_per_epoch = math.ceil(len(self.splits["train"]) / self.tc["batch_size"])
        self.total_steps = planned_steps(self.steps_per_epoch, self.tc["max_epochs"], self.tc["max_steps"])
        return self.total_steps

    def _new_state(self, **own: Any) -> dict[str, Any]:
        return {
            "epoch": 0,
            "batch_in_epoch": 0,
            "global_step": 0,
            self.SUM_KEY: 0.0,
            self.COUNT_KEY: 0,
            "history": [],
            **own,
            "best_val": None,
            "best_epoch": None,
            "best_weights": None,
            "step_times": [],
            "elapsed_s": 0.0,  # the earlier attempts' wall time, as of their last checkpoint
            "resumed_count": 0,
            "diverged_at_step": None,
        }

    @classmethod
    def train(cls, cfg: dict[str, Any], data_dir: Path, out_dir: Path, ckpt_dir: Path, device: str) -> int:
        """0 when completed or diverged (metrics.json written), 75 when interrupted (checkpoint kept).

        Like `pdelra train`: one process a run (the run's lock), and a run an earlier attempt finished is
        restored from its kept final state (pdelra.training.finished) instead of trained again."""
        identity = {"config_hash": config_hash(cfg), "data_manifest_hash": manifest_hash(data_dir)}
        with run_lock(ckpt_dir), InterruptFlag() as interrupted:
            if finished.restore(ckpt_dir, out_dir, identity) is not None:
                return 0
            return cls(cfg, data_dir, out_dir, ckpt_dir, device).run(interrupted)

    @classmethod
    def train_from_args(
        cls,
        run_config: str,
        data_dir: Path,
        out_dir: Path,
        ckpt_dir: Path,
        device: str = "auto",
        allow_cpu: bool = False,
    ) -> int:
        """The CLI's entry: the run config (a path or inline JSON/YAML) and the device are checked first."""
        config, source = read_run_config(run_config)
        cfg = cls.validate(config, source)
        try:  # before the data: a job that reserved a GPU on a machine without CUDA fails in seconds
            chosen = choose_device(device, allow_cpu)
        except DeviceError as exc:
            raise RunConfigError(str(exc)) from exc
        return cls.train(cfg, data_dir, out_dir, ckpt_dir, chosen)

    # ---------------------------------------------------------------------------- what a trainer gives

    def _build(self) -> None:
        """Set model, optimizer, scheduler and state (`_new_state`); the global RNGs are freshly seeded."""
        raise NotImplementedError

    def _loss(self, batch: torch.Tensor) -> tuple[torch.Tensor, int]:
        """The batch's training loss (a scalar to backpropagate) and its weight in the epoch's train_loss."""
        raise NotImplementedError

    def _epoch_scores(self, train_loss: float) -> dict[str, Any]:
        """The history row's own columns, `val_loss` (mean nats per token) among them: evaluates val."""
        raise NotImplementedError

    def _results(self, diverged: bool) -> dict[str, Any]:
        """The trainer's own metrics.json keys (test evaluation included), placed after `diverged_at_step`."""
        raise NotImplementedError

    def _report(self, metrics: dict[str, Any]) -> None:
        """Log the finished run's result line."""

    def _on_start(self) -> None:
        """Called once before the loop (after any resume)."""

    def _after_step(self) -> None:
        """Called after each optimiser step, before the interruption check."""

    def _epoch_done(self, entry: dict[str, Any]) -> None:
        """Called after each epoch's history row is kept and the best weights are updated."""

    # -------------------------------------------------------------------------------------------- loop

    def run(self, interrupted: InterruptFlag) -> int:
        self._resume()
        self._on_start()
        st, tc = self.state, self.tc
        train, bs = self.splits["train"], tc["batch_size"]
        while st["epoch"] < tc["max_epochs"] and st["diverged_at_step"] is None:
            order = epoch_order(len(train), self.seeds.sampler, st["epoch"])
            self.model.train()
            for start in range(st["batch_in_epoch"] * bs, len(order), bs):
                if self._steps_done():
                    break
                batch = torch.from_numpy(train[np.sort(order[start : start + bs])].astype(np.int64))
                if not self._step(self.dev.to_device(batch)):
                    break
                self._after_step()
                if interrupted:
                    self._save_checkpoint()
                    self.log.warning(
                        "interrupted at step %d; checkpoint in %s", st["global_step"], self.ckpt_dir
                    )
                    return EXIT_INTERRUPTED
                minutes = tc["checkpoint_minutes"]
                if minutes is not None and time.monotonic() - self.last_checkpoint >= 60 * minutes:
                    self._save_checkpoint()
            if st["diverged_at_step"] is not None:
                break
            self._end_epoch()
            self._save_checkpoint()
            if self._steps_done():
                break
        self._finish()
        return 0

    def _steps_done(self) -> bool:
        max_steps = self.tc["max_steps"]
        return max_steps is not None and self.state["global_step"] >= max_steps

    def _step(self, batch: torch.Tensor) -> bool:
        """One optimiser step; False (and the state marked diverged) when the loss is not finite."""
        st = self.state
        t0 = time.perf_counter()
        loss, weight = self._loss(batch)
        value = loss.item()
        if not math.isfinite(value):
            st["diverged_at_step"] = st["global_step"] + 1
            self.log.error(
                "loss is %s at step %d: stopping the run as diverged", value, st["diverged_at_step"]
            )
            return False
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.tc["grad_clip"] is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc["grad_clip"])
        self.optimizer.step()
        self.scheduler.step()
        self.dev.synchronize()  # so the step time is the step's, not only its launch
        st["step_times"].append(time.perf_counter() - t0)
        st["global_step"] += 1
        st["batch_in_epoch"] += 1
        st[self.SUM_KEY] += value * weight
        st[self.COUNT_KEY] += weight
        return True

    def _end_epoch(self) -> None:
        st = self.state
        scores = self._epoch_scores(st[self.SUM_KEY] / max(st[self.COUNT_KEY], 1))
        st["epoch"] += 1
        entry = {
            "epoch": st["epoch"],
            "steps": st["global_step"],
            **scores,
            "lr": self.scheduler.get_last_lr()[0],
        }
        st["history"].append(entry)
        st["batch_in_epoch"], st[self.SUM_KEY], st[self.COUNT_KEY] = 0, 0.0, 0
        val = entry["val_loss"]
        # A non-finite val loss is never the best: it would compare False with every later one and stick.
        if math.isfinite(val) and (st["best_val"] is None or val < st["best_val"]):
            st["best_val"], st["best_epoch"] = val, st["epoch"]
            st["best_weights"] = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
        self._epoch_done(entry)

    def _eval_batches(self, split: str) -> Iterator[torch.Tensor]:
        """The split's rows in order, eval_batch_size at a time, on the device."""
        rows, size = self.splits[split], self.tc["eval_batch_size"]
        for start in range(0, len(rows), size):
            yield self.dev.to_device(torch.from_numpy(rows[start : start + size].astype(np.int64)))

    # ------------------------------------------------------------------------------------ checkpoints

    def _elapsed(self) -> float:
        return self.state["elapsed_s"] + (time.monotonic() - self.started)

    def _save_checkpoint(self) -> None:
        state = {**self.state, "elapsed_s": self._elapsed()}  # wall time up to this save
        save_checkpoint(
            self.ckpt_dir,
            {
                **self.identity,
                **trainer_states(self.model, self.optimizer, self.scheduler),
                "state": state,
            },
        )
        self.last_checkpoint = time.monotonic()

    def _resume(self) -> None:
        saved = resume_trainer(self.ckpt_dir, self.identity, self.model, self.optimizer, self.scheduler)
        if saved is None:
            return
        st = self.state = saved["state"]
        st["resumed_count"] += 1
        self.log.info(
            "resumed from %s at epoch %d, step %d", self.ckpt_dir, st["epoch"] + 1, st["global_step"]
        )

    # ----------------------------------------------------------------------------------------- finish

    def _load_best(self) -> bool:
        """Put the best-validation weights into the model (the test split is evaluated on them)."""
        if self.state["best_weights"] is None:
            return False
        self.model.load_state_dict(self.state["best_weights"])
        return True

    def _finish(self) -> None:
        st, cfg = self.state, self.cfg
        diverged = st["diverged_at_step"] is not None
        results = self._results(diverged)
        peak, peak_kind = self.dev.peak_memory()
        metrics = {
            "schema_version": self.SCHEMA_VERSION,
            **{k: cfg[k] for k in RUN_KEYS},
            "status": DIVERGED if diverged else COMPLETED,
            "diverged_at_step": st["diverged_at_step"],
            **results,
            "parameter_count": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
            "seeds": dataclasses.asdict(self.seeds),
            **self.identity,
            "run_config": cfg,
            "code_version": code_version(),
            "versions": library_versions(),
            "device": self.dev.name,
            "num_threads": self.dev.threads,
            "wall_time_s": self._elapsed(),
            "median_step_time_s": median_or_none(st["step_times"]),
            "peak_memory_bytes": peak,
            "peak_memory_kind": peak_kind,
            "peak_host_memory_bytes": peak_host_memory_bytes(),
            "resumed_count": st["resumed_count"],
        }
        final = finished.begin(self.ckpt_dir)  # kept until the workflow has stored RUN_DIR/metrics.json
        write_json_atomic(final / METRICS_NAME, json_safe(metrics))
        remove_checkpoint(self.ckpt_dir)
        finished.publish(self.ckpt_dir, self.out_dir)
        self._report(metrics)


def json_safe(value: Any) -> Any:
    """Plain JSON for metrics.json: string keys, tuples as lists, non-finite floats as null."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, float):
        return finite_or_none(value)
    return value
