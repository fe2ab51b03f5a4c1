"""`pdelra cta-official train-lm`: one run of Continuous-Time Attention's WikiText-103 causal LM (Tables 3-5)
as its authors train it; resumable, writing RUN_DIR/metrics.json.

The model is `pdelra.nn.cta_official.OfficialCTALM`, chosen by the run's variant, a row of OFFICIAL_VARIANTS
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
The loop, checkpoints, resume and provenance are pdelra.training.token_lm.TokenLMRun's (shared with
`pdelra lm train`); this module gives the model, optimiser, schedule, loss, perplexities and α/β.

Run config (JSON/YAML; keys checked, unknown ones refused; pdelra.cta_official.grid.lm_run_config):
    task: wikitext103   variant: none | cta_official_*   scale: h1   setting: base | steps{n} | data{p}
    seed: 0   model: {d_model, n_layers, n_heads, d_mlp, dropout, cta_steps}
    train: {batch_size, eval_batch_size, lr, betas, weight_decay, warmup_ratio, max_epochs, max_steps,
            grad_clip, data_fraction, checkpoint_minutes, num_threads}
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pdelra.data.cta import subset_rows
from pdelra.nn.cta_official import OfficialCTALM
from pdelra.nn.model import ModelConfig
from pdelra.training.runconfig import RunConfigError
from pdelra.training.token_lm import POS_INT, TokenLMRun, lm_schema, validate_against

WARMUP_START = 0.1  # LinearLR(start_factor=0.1): run_language_modeling.py, run_ablation_*.py

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
LM_SCHEMA: dict[str, Any] = lm_schema(
    task={"const": "wikitext103"},
    variant={"type": "string", "minLength": 1},  # checked against the table by ModelConfig
    model_keys=_MODEL_KEYS,
    model={"cta_steps": POS_INT},
    train_keys=_TRAIN_KEYS,
    train={
        "warmup_ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "data_fraction": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1},
    },
)


def validate_lm_run_config(config: Any, source: str = "CTA LM run config") -> dict[str, Any]:
    """The validated run config; RunConfigError names the bad key."""
    validate_against(LM_SCHEMA, config, source)
    return dict(config)


def model_config(cfg: dict[str, Any], vocab_size: int, block_size: int) -> Any:
    """OfficialCTALM's ModelConfig for a run config (backbone official_cta; the variant picks the row)."""
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


class _LMRun(TokenLMRun):
    log = logging.getLogger("pdelra.cta_official.lm")
    SUM_KEY, COUNT_KEY = "nats_sum", "tokens"  # the epoch's train_loss: mean over predicted tokens

    validate = staticmethod(validate_lm_run_config)

    def _build(self) -> None:
        self.blocks_of = len(self.splits["train"])
        if self.tc["data_fraction"] is not None:  # subset_rows has its own generator: seeding is unaffected
            rows = subset_rows(self.blocks_of, self.tc["data_fraction"], self.cfg["seed"])
            if len(rows) == 0:
                share, n = self.tc["data_fraction"], self.blocks_of
                raise RunConfigError(f"train.data_fraction {share} of {n} training blocks is no block")
            self.splits["train"] = self.splits["train"][rows]
        self.block_size = int(self.manifest["max_length"])
        self.model = OfficialCTALM(model_config(self.cfg, int(self.manifest["vocab_size"]), self.block_size))
        self.model.to(self.dev.device)
        self.optimizer = self._adamw(
            self.model.parameters()
        )  # every parameter decays, α and β too, as theirs
        self.warmup_steps = int(self._plan_steps() * self.tc["warmup_ratio"])  # int(), as theirs
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, OfficialWarmup(self.warmup_steps))
        self.state = self._new_state()

    # -------------------------------------------------------------------------------- loss, evaluation

    def _nats(self, tokens: torch.Tensor, reduction: str) -> torch.Tensor:
        """Cross-entropy of positions 0..L-2's logits against tokens 1..L-1 (lm_trainer.py's alignment)."""
        logits = self.model(tokens)[:, :-1]
        return torch.nn.functional.cross_entropy(
            logits.flatten(0, 1).float(), tokens[:, 1:].flatten(), reduction=reduction
        )

    def _loss(self, batch: torch.Tensor) -> tuple[torch.Tensor, int]:
        return self._nats(batch, "mean"), batch.shape[0] * (batch.shape[1] - 1)

    def _epoch_scores(self, train_loss: float) -> dict[str, Any]:
        val = self._evaluate("val")
        return {
            "train_loss": train_loss,
            "train_perplexity": perplexity(train_loss),
            "val_loss": val,
            "val_perplexity": perplexity(val),
        }

    def _epoch_done(self, entry: dict[str, Any]) -> None:
        self.log.info("epoch %d: train %.4f nats/token (ppl %s), val %.4f (ppl %s)", entry["epoch"],
                      entry["train_loss"], entry["train_perplexity"], entry["val_loss"],
                      entry["val_perplexity"])  # fmt: skip

    @torch.inference_mode()
    def _evaluate(self, split: str) -> float:
        """Mean nats per predicted token over the whole split (lm_trainer.py's total_nll / total_tokens)."""
        self.model.eval()
        nats, tokens = 0.0, 0
        for batch in self._eval_batches(split):
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

    # ----------------------------------------------------------------------------------------- finish

    def _results(self, diverged: bool) -> dict[str, Any]:
        st = self.state
        # Tested even after a divergence: the best epoch before it is still a result (Table 4's "unstable").
        test = self._evaluate("test") if self._load_best() else None
        last = st["history"][-1] if st["history"] else {}
        return {
            "best_val_perplexity": perplexity(st["best_val"]),
            "best_val_loss_nats": st["best_val"],
            "final_val_perplexity": last.get("val_perplexity"),
            "test_perplexity": perplexity(test),
            "test_loss_nats": test,
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
        }

    def _report(self, metrics: dict[str, Any]) -> None:
        cfg = self.cfg
        self.log.info("%s %s %s seed %d: best val perplexity %s, test %s; metrics in %s", cfg["task"],
                      cfg["variant"], cfg["setting"], cfg["seed"], metrics["best_val_perplexity"],
                      metrics["test_perplexity"], self.out_dir)  # fmt: skip


def train_lm(
    config: dict[str, Any], data_dir: Path, out_dir: Path, ckpt_dir: Path, device: str = "auto"
) -> int:
    """Train one run; 0 when completed or diverged (metrics.json written), 75 when interrupted."""
    return _LMRun.train(validate_lm_run_config(config), data_dir, out_dir, ckpt_dir, device)


# `pdelra cta-official train-lm`: reads and checks the run config and the device before any data.
train_from_args = _LMRun.train_from_args
