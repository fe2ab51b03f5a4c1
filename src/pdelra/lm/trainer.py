"""`pdelra lm train`: one PhysQK-AD language-model run, resumable, writing RUN_DIR/metrics.json.

Built from the training package's pieces (seeds, device set-up, warmup + cosine schedule, epoch shuffles,
checkpoints, interruption, atomic metrics, provenance) with an LM loop: next-token cross-entropy in nats per
token, evaluated on the validation windows every epoch; the test loss uses the best-validation weights.
bits per byte = (nats summed over predicted tokens) / (ln 2 × predicted bytes): end-of-document tokens are
predicted (their loss counts) but are not bytes.

Run config (JSON/YAML; keys checked, unknown ones refused):
    task: lm_text   variant: mha | physqk | physqk_ad   scale: d256   setting: base   seed: 0
    model: {d_model, n_layers, n_heads, d_mlp, dropout, attn_window, [alpha_allocation]}
    train: {batch_size, lr, betas, weight_decay, warmup_steps, max_epochs, max_steps, grad_clip,
            eval_batch_size, checkpoint_minutes, num_threads, [diagnostics_every_steps]}
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

from pdelra.atomic import write_json_atomic
from pdelra.training.batches import epoch_order
from pdelra.training.checkpoint import load_checkpoint, remove_checkpoint, save_checkpoint
from pdelra.training.device import DeviceError, choose_device, setup_device
from pdelra.training.interrupts import EXIT_INTERRUPTED, InterruptFlag
from pdelra.training.metrics import (
    METRICS_NAME,
    code_version,
    finite_or_none,
    library_versions,
    median_or_none,
)
from pdelra.training.runconfig import RunConfigError, config_hash, read_run_config
from pdelra.training.schedule import make_scheduler, planned_steps
from pdelra.training.seeding import capture_rng_states, derive_seeds, restore_rng_states, seed_everything

log = logging.getLogger("pdelra.lm")

SCHEMA_VERSION = 1
DIAGNOSTIC_WINDOWS = 32  # validation windows the α/η/Pe diagnostics are measured on

_POS_INT = {"type": "integer", "minimum": 1}
_NULL_OR_POS_INT = {"type": ["integer", "null"], "minimum": 1}
LM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["task", "variant", "scale", "setting", "seed", "model", "train"],
    "properties": {
        "task": {"type": "string", "pattern": "^lm_"},
        "variant": {"enum": ["mha", "physqk", "physqk_ad"]},
        "scale": {"type": "string", "minLength": 1},
        "setting": {"type": "string", "minLength": 1},
        "seed": {"type": "integer", "minimum": 0},
        "model": {
            "type": "object",
            "additionalProperties": False,
            "required": ["d_model", "n_layers", "n_heads", "d_mlp", "dropout", "attn_window"],
            "properties": {
                "d_model": _POS_INT,
                "n_layers": _POS_INT,
                "n_heads": _POS_INT,
                "d_mlp": _POS_INT,
                "dropout": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                "attn_window": _POS_INT,
                "alpha_allocation": {
                    "oneOf": [
                        {"enum": ["joint", "shared"]},
                        {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}},
                    ]
                },
            },
        },
        "train": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "batch_size",
                "lr",
                "betas",
                "weight_decay",
                "warmup_steps",
                "max_epochs",
                "max_steps",
                "grad_clip",
                "eval_batch_size",
                "checkpoint_minutes",
                "num_threads",
            ],
            "properties": {
                "batch_size": _POS_INT,
                "lr": {"type": "number", "exclusiveMinimum": 0},
                "betas": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
                "weight_decay": {"type": "number", "minimum": 0},
                "warmup_steps": {"type": "integer", "minimum": 0},
                "max_epochs": _POS_INT,
                "max_steps": _NULL_OR_POS_INT,
                "grad_clip": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "eval_batch_size": _POS_INT,
                "checkpoint_minutes": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "num_threads": _NULL_OR_POS_INT,
                "diagnostics_every_steps": _NULL_OR_POS_INT,
            },
        },
    },
}


def validate_lm_run_config(config: Any, source: str = "LM run config") -> dict[str, Any]:
    """The validated, normalised run config (optional keys filled in); RunConfigError names the bad key."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(LM_SCHEMA).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = ".".join(map(str, error.absolute_path)) or "(top level)"
        raise RunConfigError(f"{source}: {where}: {error.message}")
    model = {"alpha_allocation": "joint", **config["model"]}
    train = {"diagnostics_every_steps": None, **config["train"]}
    return {**config, "model": model, "train": train}


class _LMRun:
    def __init__(
        self, cfg: dict[str, Any], data_dir: Path, out_dir: Path, ckpt_dir: Path, device: str = "auto"
    ) -> None:
        from pdelra.data.store import check_values, load_split, manifest_hash, read_manifest
        from pdelra.lm.model import CausalLM, LMConfig

        self.started = time.monotonic()
        self.cfg, self.tc = cfg, cfg["train"]
        self.out_dir, self.ckpt_dir = out_dir, ckpt_dir
        manifest = read_manifest(data_dir)
        if manifest["task"] != cfg["task"]:
            raise RunConfigError(f"run config task {cfg['task']!r} but {data_dir} holds {manifest['task']!r}")
        self.manifest = manifest
        splits = {s: load_split(data_dir, s) for s in ("train", "val", "test")}
        for name, split in splits.items():  # labels are document indices here, not classes: not checked
            check_values(data_dir, name, split, manifest, labels=False)
        self.splits = {name: np.asarray(split.tokens) for name, split in splits.items()}
        self.seeds = derive_seeds(cfg["seed"])
        self.dev = setup_device(self.tc["num_threads"], device)
        seed_everything(self.seeds)
        m = cfg["model"]
        try:
            lm_cfg = LMConfig(
                vocab_size=manifest["vocab_size"],
                window=manifest["max_length"] - 1,
                condition=cfg["variant"],
                **m,
            )
        except ValueError as exc:
            raise RunConfigError(f"run config: {exc}") from exc
        self.model = CausalLM(lm_cfg).to(self.dev.device)
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=self.tc["lr"],
            betas=tuple(self.tc["betas"]),
            weight_decay=self.tc["weight_decay"],
        )
        self.steps_per_epoch = math.ceil(len(self.splits["train"]) / self.tc["batch_size"])
        self.total_steps = planned_steps(self.steps_per_epoch, self.tc["max_epochs"], self.tc["max_steps"])
        self.scheduler = make_scheduler(self.optimizer, self.tc["warmup_steps"], self.total_steps)
        self.identity = {"config_hash": config_hash(cfg), "data_manifest_hash": manifest_hash(data_dir)}
        self.state: dict[str, Any] = {
            "epoch": 0,
            "batch_in_epoch": 0,
            "global_step": 0,
            "loss_sum": 0.0,
            "seen": 0,
            "history": [],
            "dynamics": [],
            "best_val": None,
            "best_epoch": None,
            "best_weights": None,
            "step_times": [],
            "elapsed_s": 0.0,
            "resumed_count": 0,
            "diverged_at_step": None,
        }
        self.last_checkpoint = time.monotonic()

    # -------------------------------------------------------------------------------------------- loop

    def run(self, interrupted: InterruptFlag) -> int:
        self._resume()
        st, tc = self.state, self.tc
        if not st["dynamics"]:
            self._log_dynamics()  # the trajectories start at the initial values
        train = self.splits["train"]
        while st["epoch"] < tc["max_epochs"] and st["diverged_at_step"] is None:
            order = epoch_order(len(train), self.seeds.sampler, st["epoch"])
            self.model.train()
            bs = tc["batch_size"]
            for start in range(st["batch_in_epoch"] * bs, len(order), bs):
                if tc["max_steps"] is not None and st["global_step"] >= tc["max_steps"]:
                    break
                batch = torch.from_numpy(train[np.sort(order[start : start + bs])].astype(np.int64))
                if not self._step(self.dev.to_device(batch), len(batch)):
                    break
                every = tc["diagnostics_every_steps"]
                if every and st["global_step"] % every == 0:
                    self._log_dynamics()
                if interrupted:
                    self._save_checkpoint()
                    log.warning("interrupted at step %d; checkpoint in %s", st["global_step"], self.ckpt_dir)
                    return EXIT_INTERRUPTED
                minutes = tc["checkpoint_minutes"]
                if minutes is not None and time.monotonic() - self.last_checkpoint >= 60 * minutes:
                    self._save_checkpoint()
            if st["diverged_at_step"] is not None:
                break
            self._end_epoch()
            self._save_checkpoint()
            if tc["max_steps"] is not None and st["global_step"] >= tc["max_steps"]:
                break
        self._finish()
        return 0

    def _step(self, batch: torch.Tensor, size: int) -> bool:
        st = self.state
        t0 = time.perf_counter()
        with self.dev.autocast():
            loss = self.model.loss(batch)
        value = loss.item()
        if not math.isfinite(value):
            st["diverged_at_step"] = st["global_step"] + 1
            log.error("loss is %s at step %d: stopping the run as diverged", value, st["diverged_at_step"])
            return False
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.tc["grad_clip"] is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc["grad_clip"])
        self.optimizer.step()
        self.scheduler.step()
        self.dev.synchronize()
        st["step_times"].append(time.perf_counter() - t0)
        st["global_step"] += 1
        st["batch_in_epoch"] += 1
        st["loss_sum"] += value * size
        st["seen"] += size
        return True

    def _end_epoch(self) -> None:
        st = self.state
        val = self._evaluate("val")
        st["epoch"] += 1
        entry = {
            "epoch": st["epoch"],
            "steps": st["global_step"],
            "train_loss": st["loss_sum"] / max(st["seen"], 1),
            "val_loss": val["nats_per_token"],
            "val_bits_per_byte": val["bits_per_byte"],
            "lr": self.scheduler.get_last_lr()[0],
        }
        st["history"].append(entry)
        st["batch_in_epoch"], st["loss_sum"], st["seen"] = 0, 0.0, 0
        if st["best_val"] is None or val["nats_per_token"] < st["best_val"]:
            st["best_val"], st["best_epoch"] = val["nats_per_token"], st["epoch"]
            st["best_weights"] = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
        if not self.tc["diagnostics_every_steps"]:
            self._log_dynamics()
        log.info(
            "epoch %d: train %.4f, val %.4f nats/token (%.4f bpb)",
            st["epoch"],
            entry["train_loss"],
            entry["val_loss"],
            entry["val_bits_per_byte"],
        )

    @torch.inference_mode()
    def _evaluate(self, split: str) -> dict[str, float]:
        """Mean nats per predicted token and bits per predicted byte over the whole split."""
        from pdelra.lm.data import SEPARATOR

        self.model.eval()
        windows = self.splits[split]
        nats, tokens, n_bytes = 0.0, 0, 0
        for start in range(0, len(windows), self.tc["eval_batch_size"]):
            batch = torch.from_numpy(windows[start : start + self.tc["eval_batch_size"]].astype(np.int64))
            batch = self.dev.to_device(batch)
            with self.dev.autocast():
                logits = self.model(batch[:, :-1]).float()
            targets = batch[:, 1:]
            nats += torch.nn.functional.cross_entropy(
                logits.flatten(0, 1), targets.flatten(), reduction="sum"
            ).item()
            tokens += targets.numel()
            n_bytes += int((targets != SEPARATOR).sum().item())
        self.model.train()
        return {"nats_per_token": nats / tokens, "bits_per_byte": nats / (math.log(2) * max(n_bytes, 1))}

    def _log_dynamics(self) -> None:
        """α, η, eff_Pe per PhysQK-AD layer at this point of training (nothing for mha/physqk)."""
        if not self.model.flows():
            return
        self.model.eval()
        tokens = torch.from_numpy(self.splits["val"][:DIAGNOSTIC_WINDOWS, :-1].astype(np.int64))
        rows = self.model.coordinate_diagnostics(self.dev.to_device(tokens))
        self.model.train()
        st = self.state
        for row in rows:
            st["dynamics"].append({"step": st["global_step"], "epoch": st["epoch"], **row})

    # ------------------------------------------------------------------------------------ checkpoints

    def _save_checkpoint(self) -> None:
        state = dict(self.state)
        state["elapsed_s"] = self.state["elapsed_s"] + (time.monotonic() - self.started)
        save_checkpoint(
            self.ckpt_dir,
            {
                **self.identity,
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "state": state,
                "rng": capture_rng_states(),
            },
        )
        self.last_checkpoint = time.monotonic()

    def _resume(self) -> None:
        saved = load_checkpoint(self.ckpt_dir, self.identity)
        if saved is None:
            return
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        self.state = saved["state"]
        self.state["resumed_count"] += 1
        restore_rng_states(saved["rng"])
        log.info(
            "resumed from %s at epoch %d, step %d",
            self.ckpt_dir,
            self.state["epoch"] + 1,
            self.state["global_step"],
        )

    # ----------------------------------------------------------------------------------------- finish

    def _finish(self) -> None:
        st = self.state
        diverged = st["diverged_at_step"] is not None
        test = {"nats_per_token": None, "bits_per_byte": None}
        if not diverged and st["best_weights"] is not None:
            self.model.load_state_dict(st["best_weights"])
            test = self._evaluate("test")
        peak, peak_kind = self.dev.peak_memory()
        cfg = self.cfg
        lm = self.manifest.get("lm", {})
        metrics = {
            "schema_version": SCHEMA_VERSION,
            **{k: cfg[k] for k in ("task", "variant", "scale", "setting", "seed")},
            "status": "diverged" if diverged else "completed",
            "diverged_at_step": st["diverged_at_step"],
            "test_loss_nats": finite_or_none(test["nats_per_token"]),
            "test_bits_per_byte": finite_or_none(test["bits_per_byte"]),
            "best_val_loss_nats": st["best_val"],
            "final_val_loss_nats": st["history"][-1]["val_loss"] if st["history"] else None,
            "best_epoch": st["best_epoch"],
            "epochs_run": len(st["history"]),
            "steps_run": st["global_step"],
            "steps_per_epoch": self.steps_per_epoch,
            "tokens_per_epoch": int(len(self.splits["train"]) * (self.manifest["max_length"] - 1)),
            "corpus": lm.get("corpus"),
            "history": st["history"],
            "dynamics": st["dynamics"],
            "parameter_count": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
            "seeds": dataclasses.asdict(self.seeds),
            **self.identity,
            "run_config": cfg,
            "code_version": code_version(),
            "versions": library_versions(),
            "device": self.dev.name,
            "num_threads": self.dev.threads,
            "wall_time_s": st["elapsed_s"] + (time.monotonic() - self.started),
            "median_step_time_s": median_or_none(st["step_times"]),
            "peak_memory_bytes": peak,
            "peak_memory_kind": peak_kind,
            "resumed_count": st["resumed_count"],
        }
        write_json_atomic(self.out_dir / METRICS_NAME, _json_safe(metrics))
        remove_checkpoint(self.ckpt_dir)
        log.info(
            "%s %s %s: test %s nats/token, %s bits/byte; metrics in %s",
            cfg["task"],
            cfg["variant"],
            cfg["setting"],
            test["nats_per_token"],
            test["bits_per_byte"],
            self.out_dir,
        )


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float):
        return finite_or_none(value)
    return value


def train_lm(
    config: dict[str, Any], data_dir: Path, out_dir: Path, ckpt_dir: Path, device: str = "auto"
) -> int:
    """Train one LM run; 0 when completed or diverged (metrics.json written), 75 when interrupted.
    `device`: auto, cuda or cpu (pdelra.training.device.choose_device)."""
    cfg = validate_lm_run_config(config)
    with InterruptFlag() as interrupted:
        return _LMRun(cfg, data_dir, out_dir, ckpt_dir, device).run(interrupted)


def train_from_args(
    run_config: str,
    data_dir: Path,
    out_dir: Path,
    ckpt_dir: Path,
    device: str = "auto",
    allow_cpu: bool = False,
) -> int:
    config, source = read_run_config(run_config)
    validate_lm_run_config(config, source)
    try:  # before the data: a job that reserved a GPU on a machine without CUDA fails in seconds
        chosen = choose_device(device, allow_cpu)
    except DeviceError as exc:
        raise RunConfigError(str(exc)) from exc
    return train_lm(config, data_dir, out_dir, ckpt_dir, chosen)
