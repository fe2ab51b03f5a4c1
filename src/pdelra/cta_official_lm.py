"""`pdelra cta-official train-lm`: one run of Continuous-Time Attention's WikiText-103 causal LM (Tables 3-5)
as its authors train it; resumable, writing RUN_DIR/metrics.json.

The model is `pdelra.cta_official.OfficialCTALM`, chosen by the run's variant, a row of OFFICIAL_VARIANTS
(`none`: their StandardTransformerLM). The recipe is the official one (github.com/XueqingZhou/
Continuous-Time-Attention at e6f878d; the file each number comes from is named where it is used):

- data: `pdelra preprocess-cta wikitext103` blocks of block_size tokens; a block is the model's input and
  positions 0..L-2 predict tokens 1..L-1 (src/trainers/lm_trainer.py: outputs[:, :-1] vs input_ids[:, 1:]);
- loss: next-token cross-entropy, the mean over the batch's predicted tokens; gradients clipped to norm 1.0
  (lm_trainer.py);
- optimiser: AdamW over every parameter (α and β too) with the run's lr, betas and weight decay
  (run_language_modeling.py: lr 1e-4, wd 0.01, PyTorch's betas);
- schedule: `OfficialWarmup`, LinearLR from 0.1 × lr over int(warmup_ratio × all steps), then constant
  (run_language_modeling.py, run_ablation_*.py: warmup_ratio 0.1, no decay);
- perplexity: exp(nats summed over the split's predicted tokens / their number), the validation split
  after every epoch; `best_val_perplexity` is the lowest over epochs (the scripts' `min(history['val_ppl'])`);
- the data-size ablation (run_ablation_datasize.py): `train.data_fraction` keeps int(N × fraction) training
  blocks, pdelra.data.cta.subset_rows drawn with the run's seed (so standard and PDE of one seed share them,
  as the script's two models of one ratio share its draw); validation is always the whole split.

What is added: the test perplexity at the best-validation weights (the official scripts evaluate on
validation only), seeds as every pipeline run (pdelra.training.seeding; theirs: 42), a seeded shuffle per
epoch (pdelra.training.batches.epoch_order; theirs: DataLoader(shuffle=True)), and checkpoints. Arithmetic
is float32 (TF32 matrix products on CUDA), as theirs: no autocast. A non-finite training loss stops the run
as `diverged` (Table 4 calls 8 steps "unstable"); the best epoch before it is still reported.

Run config (JSON/YAML; keys checked, unknown ones refused; pdelra.cta_official_grid.lm_run_config):
    task: wikitext103   variant: none | cta_official_*   scale: h1   setting: base | steps{n} | data{p}
    seed: 0   model: {d_model, n_layers, n_heads, d_mlp, dropout, cta_steps}
    train: {batch_size, eval_batch_size, lr, betas, weight_decay, warmup_ratio, max_epochs, max_steps,
            grad_clip, data_fraction, checkpoint_minutes, num_threads}
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
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
from pdelra.training.schedule import planned_steps
from pdelra.training.seeding import capture_rng_states, derive_seeds, restore_rng_states, seed_everything

log = logging.getLogger("pdelra.cta_official_lm")

SCHEMA_VERSION = 1
WARMUP_START = 0.1  # LinearLR(start_factor=0.1): run_language_modeling.py, run_ablation_*.py

_POS_INT = {"type": "integer", "minimum": 1}
_NULL_OR_POS_INT = {"type": ["integer", "null"], "minimum": 1}
_MODEL_KEYS = ("d_model", "n_layers", "n_heads", "d_mlp", "dropout", "cta_steps")
_TRAIN_KEYS = (
    "batch_size",
    "eval_batch_size",
    "lr",
    "betas",
    "weight_decay",
    "warmup_ratio",
    "max_epochs",
    "max_steps",
    "grad_clip",
    "data_fraction",
    "checkpoint_minutes",
    "num_threads",
)
LM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["task", "variant", "scale", "setting", "seed", "model", "train"],
    "properties": {
        "task": {"const": "wikitext103"},
        "variant": {"type": "string", "minLength": 1},  # checked against the table by ModelConfig
        "scale": {"type": "string", "minLength": 1},
        "setting": {"type": "string", "minLength": 1},
        "seed": {"type": "integer", "minimum": 0},
        "model": {
            "type": "object",
            "additionalProperties": False,
            "required": list(_MODEL_KEYS),
            "properties": {
                "d_model": _POS_INT,
                "n_layers": _POS_INT,
                "n_heads": _POS_INT,
                "d_mlp": _POS_INT,
                "dropout": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                "cta_steps": _POS_INT,
            },
        },
        "train": {
            "type": "object",
            "additionalProperties": False,
            "required": list(_TRAIN_KEYS),
            "properties": {
                "batch_size": _POS_INT,
                "eval_batch_size": _POS_INT,
                "lr": {"type": "number", "exclusiveMinimum": 0},
                "betas": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
                "weight_decay": {"type": "number", "minimum": 0},
                "warmup_ratio": {"type": "number", "minimum": 0, "maximum": 1},
                "max_epochs": _POS_INT,
                "max_steps": _NULL_OR_POS_INT,
                "grad_clip": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "data_fraction": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1},
                "checkpoint_minutes": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "num_threads": _NULL_OR_POS_INT,
            },
        },
    },
}


def validate_lm_run_config(config: Any, source: str = "CTA LM run config") -> dict[str, Any]:
    """The validated run config; RunConfigError names the bad key."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(LM_SCHEMA).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = ".".join(map(str, error.absolute_path)) or "(top level)"
        raise RunConfigError(f"{source}: {where}: {error.message}")
    return dict(config)


def model_config(cfg: dict[str, Any], vocab_size: int, block_size: int) -> Any:
    """OfficialCTALM's ModelConfig for a run config (backbone official_cta; the variant picks the row)."""
    from pdelra.model import ModelConfig

    try:
        return ModelConfig(
            vocab_size=vocab_size,
            num_classes=vocab_size,  # unused: the LM's head predicts tokens
            max_length=block_size,
            variant=cfg["variant"],
            backbone="official_cta",
            **cfg["model"],
        )
    except (TypeError, ValueError) as exc:
        raise RunConfigError(f"run config: {exc}") from exc


@dataclass(frozen=True)
class OfficialWarmup:
    """The official schedule's multiplier of lr for the step about to be taken (LambdaLR's convention):
    LinearLR(start_factor=0.1, total_iters=warmup_steps), from 0.1 to 1 over the warm-up, then 1 (no decay).
    A frozen dataclass, so LambdaLR keeps it in state_dict()."""

    warmup_steps: int

    def __call__(self, step: int) -> float:
        if self.warmup_steps <= 0:
            return 1.0
        return WARMUP_START + (1.0 - WARMUP_START) * min(step, self.warmup_steps) / self.warmup_steps


def perplexity(nats_per_token: float | None) -> float | None:
    """exp(mean nats per token); None where that is not a finite number."""
    if nats_per_token is None or not math.isfinite(nats_per_token) or nats_per_token > 700:
        return None
    return math.exp(nats_per_token)


class _LMRun:
    def __init__(
        self, cfg: dict[str, Any], data_dir: Path, out_dir: Path, ckpt_dir: Path, device: str = "auto"
    ) -> None:
        from pdelra.cta_official import OfficialCTALM
        from pdelra.data.cta import subset_rows
        from pdelra.data.store import check_values, load_split, manifest_hash, read_manifest

        self.started = time.monotonic()
        self.cfg, self.tc = cfg, cfg["train"]
        self.out_dir, self.ckpt_dir = out_dir, ckpt_dir
        manifest = read_manifest(data_dir)
        if manifest["task"] != cfg["task"]:
            raise RunConfigError(f"run config task {cfg['task']!r} but {data_dir} holds {manifest['task']!r}")
        self.manifest = manifest
        splits = {s: load_split(data_dir, s) for s in ("train", "val", "test")}
        for name, split in splits.items():  # labels are the lines blocks start in, not classes: not checked
            check_values(data_dir, name, split, manifest, labels=False)
        self.splits = {name: np.asarray(split.tokens) for name, split in splits.items()}
        self.blocks_of = len(self.splits["train"])
        if self.tc["data_fraction"] is not None:
            rows = subset_rows(self.blocks_of, self.tc["data_fraction"], cfg["seed"])
            if len(rows) == 0:
                share, n = self.tc["data_fraction"], self.blocks_of
                raise RunConfigError(f"train.data_fraction {share} of {n} training blocks is no block")
            self.splits["train"] = self.splits["train"][rows]
        self.block_size = int(manifest["max_length"])
        self.seeds = derive_seeds(cfg["seed"])
        self.dev = setup_device(self.tc["num_threads"], device)
        seed_everything(self.seeds)
        self.model = OfficialCTALM(model_config(cfg, int(manifest["vocab_size"]), self.block_size))
        self.model.to(self.dev.device)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),  # every parameter decays, α and β too, as theirs
            lr=self.tc["lr"],
            betas=tuple(self.tc["betas"]),
            weight_decay=self.tc["weight_decay"],
        )
        self.steps_per_epoch = math.ceil(len(self.splits["train"]) / self.tc["batch_size"])
        self.total_steps = planned_steps(self.steps_per_epoch, self.tc["max_epochs"], self.tc["max_steps"])
        self.warmup_steps = int(self.total_steps * self.tc["warmup_ratio"])  # int(), as theirs
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, OfficialWarmup(self.warmup_steps))
        self.identity = {"config_hash": config_hash(cfg), "data_manifest_hash": manifest_hash(data_dir)}
        self.state: dict[str, Any] = {
            "epoch": 0,
            "batch_in_epoch": 0,
            "global_step": 0,
            "nats_sum": 0.0,  # this epoch's training nats and predicted tokens (the epoch's perplexity)
            "tokens": 0,
            "history": [],
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
        train, bs = self.splits["train"], tc["batch_size"]
        while st["epoch"] < tc["max_epochs"] and st["diverged_at_step"] is None:
            order = epoch_order(len(train), self.seeds.sampler, st["epoch"])
            self.model.train()
            for start in range(st["batch_in_epoch"] * bs, len(order), bs):
                if tc["max_steps"] is not None and st["global_step"] >= tc["max_steps"]:
                    break
                batch = torch.from_numpy(train[np.sort(order[start : start + bs])].astype(np.int64))
                if not self._step(self.dev.to_device(batch)):
                    break
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

    def _nats(self, tokens: torch.Tensor, reduction: str) -> torch.Tensor:
        """Cross-entropy of positions 0..L-2's logits against tokens 1..L-1 (lm_trainer.py's alignment)."""
        logits = self.model(tokens)[:, :-1]
        return torch.nn.functional.cross_entropy(
            logits.flatten(0, 1).float(), tokens[:, 1:].flatten(), reduction=reduction
        )

    def _step(self, batch: torch.Tensor) -> bool:
        st = self.state
        t0 = time.perf_counter()
        loss = self._nats(batch, "mean")
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
        predicted = batch.shape[0] * (batch.shape[1] - 1)
        st["global_step"] += 1
        st["batch_in_epoch"] += 1
        st["nats_sum"] += value * predicted
        st["tokens"] += predicted
        return True

    def _end_epoch(self) -> None:
        st = self.state
        val = self._evaluate("val")
        st["epoch"] += 1
        train_loss = st["nats_sum"] / max(st["tokens"], 1)
        entry = {
            "epoch": st["epoch"],
            "steps": st["global_step"],
            "train_loss": train_loss,
            "train_perplexity": perplexity(train_loss),
            "val_loss": val,
            "val_perplexity": perplexity(val),
            "lr": self.scheduler.get_last_lr()[0],
        }
        st["history"].append(entry)
        st["batch_in_epoch"], st["nats_sum"], st["tokens"] = 0, 0.0, 0
        if math.isfinite(val) and (st["best_val"] is None or val < st["best_val"]):
            st["best_val"], st["best_epoch"] = val, st["epoch"]
            st["best_weights"] = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
        log.info(
            "epoch %d: train %.4f nats/token (ppl %s), val %.4f (ppl %s)",
            st["epoch"],
            train_loss,
            entry["train_perplexity"],
            val,
            entry["val_perplexity"],
        )

    @torch.inference_mode()
    def _evaluate(self, split: str) -> float:
        """Mean nats per predicted token over the whole split (lm_trainer.py's total_nll / total_tokens)."""
        self.model.eval()
        blocks, size = self.splits[split], self.tc["eval_batch_size"]
        nats, tokens = 0.0, 0
        for start in range(0, len(blocks), size):
            batch = self.dev.to_device(torch.from_numpy(blocks[start : start + size].astype(np.int64)))
            nats += self._nats(batch, "sum").item()
            tokens += batch.shape[0] * (batch.shape[1] - 1)
        self.model.train()
        return nats / max(tokens, 1)

    def _alphas(self) -> list[dict[str, Any]]:
        """The learned α (and β) of every PDE step of every layer (none for `none`)."""
        rows = []
        for layer, refine in enumerate(self.model.block_output):
            for step, op in enumerate(getattr(refine, "steps", [])):
                beta = None if op.beta is None else float(op.beta.detach())
                rows.append({"layer": layer, "step": step, "alpha": float(op.alpha.detach()), "beta": beta})
        return rows

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
        self.started = time.monotonic()  # elapsed_s already holds the earlier attempts' time
        restore_rng_states(saved["rng"])
        log.info("resumed from %s at epoch %d, step %d", self.ckpt_dir, self.state["epoch"] + 1,
                 self.state["global_step"])  # fmt: skip

    # ----------------------------------------------------------------------------------------- finish

    def _finish(self) -> None:
        st, cfg = self.state, self.cfg
        diverged = st["diverged_at_step"] is not None
        test = None
        if st["best_weights"] is not None:
            self.model.load_state_dict(st["best_weights"])
            test = self._evaluate("test")
        peak, peak_kind = self.dev.peak_memory()
        last = st["history"][-1] if st["history"] else {}
        metrics = {
            "schema_version": SCHEMA_VERSION,
            **{k: cfg[k] for k in ("task", "variant", "scale", "setting", "seed")},
            "status": "diverged" if diverged else "completed",
            "diverged_at_step": st["diverged_at_step"],
            "best_val_perplexity": perplexity(st["best_val"]),
            "best_val_loss_nats": st["best_val"],
            "final_val_perplexity": last.get("val_perplexity"),
            "test_perplexity": perplexity(test),
            "test_loss_nats": finite_or_none(test),
            "best_epoch": st["best_epoch"],
            "epochs_run": len(st["history"]),
            "steps_run": st["global_step"],
            "steps_per_epoch": self.steps_per_epoch,
            "planned_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "block_size": self.block_size,
            "data_fraction": self.tc["data_fraction"],
            "train_blocks": len(self.splits["train"]),
            "train_blocks_of": self.blocks_of,
            "history": st["history"],
            "pde_coefficients": self._alphas(),
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
        log.info("%s %s %s seed %d: best val perplexity %s, test %s; metrics in %s", cfg["task"],
                 cfg["variant"], cfg["setting"], cfg["seed"], metrics["best_val_perplexity"],
                 metrics["test_perplexity"], self.out_dir)  # fmt: skip


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
    """Train one run; 0 when completed or diverged (metrics.json written), 75 when interrupted."""
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
