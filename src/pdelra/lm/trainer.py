"""`pdelra lm train`: one PhysQK-AD language-model run, resumable, writing RUN_DIR/metrics.json.

The loop, checkpoints, resume and provenance are pdelra.training.token_lm.TokenLMRun's (shared with
`pdelra cta-official train-lm`); this module gives the model (pdelra.lm.model.CausalLM), AdamW with the
warmup + cosine schedule, the loss: next-token cross-entropy in nats per token, evaluated on the validation
windows every epoch (the test loss uses the best-validation weights), and the α/η/Pe dynamics.
bits per byte = (nats summed over predicted tokens) / (ln 2 × predicted bytes): end-of-document tokens are
predicted (their loss counts) but are not bytes.

Run config (JSON/YAML; keys checked, unknown ones refused):
    task: lm_text   variant: mha | physqk | physqk_ad   scale: d256   setting: base   seed: 0
    model: {d_model, n_layers, n_heads, d_mlp, dropout, attn_window, [alpha_allocation]}
    train: {batch_size, lr, betas, weight_decay, warmup_steps, max_epochs, max_steps, grad_clip,
            eval_batch_size, checkpoint_minutes, num_threads, [diagnostics_every_steps]}
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pdelra.lm.data import SEPARATOR
from pdelra.lm.model import CausalLM, LMConfig
from pdelra.training.runconfig import RunConfigError
from pdelra.training.schedule import make_scheduler
from pdelra.training.token_lm import NULL_OR_POS_INT, POS_INT, TokenLMRun, lm_schema, validate_against

DIAGNOSTIC_WINDOWS = 32  # validation windows the α/η/Pe diagnostics are measured on

_MODEL_KEYS = ("d_model", "n_layers", "n_heads", "d_mlp", "dropout", "attn_window")  # + alpha_allocation
_TRAIN_KEYS = (  # + diagnostics_every_steps
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
)
LM_SCHEMA: dict[str, Any] = lm_schema(
    task={"type": "string", "pattern": "^lm_"},
    variant={"enum": ["mha", "physqk", "physqk_ad"]},
    model_keys=_MODEL_KEYS,
    model={
        "attn_window": POS_INT,
        "alpha_allocation": {
            "oneOf": [
                {"enum": ["joint", "shared"]},
                {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}},
            ]
        },
    },
    train_keys=_TRAIN_KEYS,
    train={"warmup_steps": {"type": "integer", "minimum": 0}, "diagnostics_every_steps": NULL_OR_POS_INT},
)


def validate_lm_run_config(config: Any, source: str = "LM run config") -> dict[str, Any]:
    """The validated, normalised run config (optional keys filled in); RunConfigError names the bad key."""
    validate_against(LM_SCHEMA, config, source)
    model = {"alpha_allocation": "joint", **config["model"]}
    train = {"diagnostics_every_steps": None, **config["train"]}
    return {**config, "model": model, "train": train}


class _LMRun(TokenLMRun):
    log = logging.getLogger("pdelra.lm")
    SUM_KEY, COUNT_KEY = "loss_sum", "seen"  # the epoch's train_loss: mean over windows

    validate = staticmethod(validate_lm_run_config)

    def _build(self) -> None:
        try:
            lm_cfg = LMConfig(
                vocab_size=self.manifest["vocab_size"],
                window=self.manifest["max_length"] - 1,
                condition=self.cfg["variant"],
                **self.cfg["model"],
            )
        except ValueError as exc:
            raise RunConfigError(f"run config: {exc}") from exc
        self.model = CausalLM(lm_cfg).to(self.dev.device)
        self.optimizer = self._adamw([p for p in self.model.parameters() if p.requires_grad])
        self.scheduler = make_scheduler(self.optimizer, self.tc["warmup_steps"], self._plan_steps())
        self.state = self._new_state(dynamics=[])

    # -------------------------------------------------------------------------------- loss, evaluation

    def _loss(self, batch: torch.Tensor) -> tuple[torch.Tensor, int]:
        with self.dev.autocast():
            return self.model.loss(batch), len(batch)

    def _epoch_scores(self, train_loss: float) -> dict[str, Any]:
        val = self._evaluate("val")
        return {
            "train_loss": train_loss,
            "val_loss": val["nats_per_token"],
            "val_bits_per_byte": val["bits_per_byte"],
        }

    @torch.inference_mode()
    def _evaluate(self, split: str) -> dict[str, float]:
        """Mean nats per predicted token and bits per predicted byte over the whole split."""
        self.model.eval()
        nats, tokens, n_bytes = 0.0, 0, 0
        for batch in self._eval_batches(split):
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

    # ------------------------------------------------------------------------------------ diagnostics

    def _on_start(self) -> None:
        if not self.state["dynamics"]:
            self._log_dynamics()  # the trajectories start at the initial values

    def _after_step(self) -> None:
        every = self.tc["diagnostics_every_steps"]
        if every and self.state["global_step"] % every == 0:
            self._log_dynamics()

    def _epoch_done(self, entry: dict[str, Any]) -> None:
        if not self.tc["diagnostics_every_steps"]:
            self._log_dynamics()
        self.log.info(
            "epoch %d: train %.4f, val %.4f nats/token (%.4f bpb)",
            entry["epoch"],
            entry["train_loss"],
            entry["val_loss"],
            entry["val_bits_per_byte"],
        )

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

    # ----------------------------------------------------------------------------------------- finish

    def _results(self, diverged: bool) -> dict[str, Any]:
        st = self.state
        test = {"nats_per_token": None, "bits_per_byte": None}
        if not diverged and self._load_best():  # a diverged run reports no test loss
            test = self._evaluate("test")
        return {
            "test_loss_nats": test["nats_per_token"],
            "test_bits_per_byte": test["bits_per_byte"],
            "best_val_loss_nats": st["best_val"],
            "final_val_loss_nats": st["history"][-1]["val_loss"] if st["history"] else None,
            "best_epoch": st["best_epoch"],
            "epochs_run": len(st["history"]),
            "steps_run": st["global_step"],
            "steps_per_epoch": self.steps_per_epoch,
            "tokens_per_epoch": int(len(self.splits["train"]) * (self.manifest["max_length"] - 1)),
            "corpus": self.manifest.get("lm", {}).get("corpus"),
            "history": st["history"],
            "dynamics": st["dynamics"],
        }

    def _report(self, metrics: dict[str, Any]) -> None:
        cfg = self.cfg
        self.log.info(
            "%s %s %s: test %s nats/token, %s bits/byte; metrics in %s",
            cfg["task"],
            cfg["variant"],
            cfg["setting"],
            metrics["test_loss_nats"],
            metrics["test_bits_per_byte"],
            self.out_dir,
        )


def train_lm(
    config: dict[str, Any], data_dir: Path, out_dir: Path, ckpt_dir: Path, device: str = "auto"
) -> int:
    """Train one LM run; 0 when completed or diverged (metrics.json written), 75 when interrupted.
    `device`: auto, cuda or cpu (pdelra.training.device.choose_device)."""
    return _LMRun.train(validate_lm_run_config(config), data_dir, out_dir, ckpt_dir, device)


# `pdelra lm train`: reads and checks the run config and the device before any data (TokenLMRun).
train_from_args = _LMRun.train_from_args
