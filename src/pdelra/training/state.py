"""Where a run stands: everything besides the torch objects that a checkpoint must carry to resume exactly."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class TrainState:
    epoch: int = 0  # 0-based index of the epoch in progress (== epochs completed)
    batch_in_epoch: int = 0  # batches of the current epoch already trained on: the sampler position
    global_step: int = 0  # optimizer steps taken
    # Running sums of the epoch in progress (float64 Python floats, summed in batch order: deterministic).
    epoch_loss_sum: float = 0.0
    epoch_correct: int = 0
    epoch_seen: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    best_val_accuracy: float | None = None
    best_epoch: int | None = None  # 1-based, as in history[i]["epoch"]
    epochs_without_improvement: int = 0
    # Why training stopped: None while it runs; "max_epochs", "max_steps", "early_stopping", "diverged".
    stop_reason: str | None = None
    diverged_at_step: int | None = None
    diverged_on: str | None = None  # what was not finite: "training loss" or "validation loss"
    step_times: list[float] = field(default_factory=list)
    resumed_count: int = 0
    # Each stop by a signal, in order: {"signal": "SIGTERM" or "SIGUSR1", "step": global_step}. A retry
    # rewrites the job's log; this keeps which signal Slurm (preemption, time limit) or a user sent.
    interruptions: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0  # wall time of earlier attempts

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainState:
        return cls(**data)

    def record_epoch(self, entry: dict[str, Any], patience: int) -> None:
        """Append an epoch's metrics and update best-so-far and the early-stopping counter.

        Only a strictly better validation accuracy counts as improvement, so ties keep the earlier epoch.
        """
        self.history.append(entry)
        if self.best_val_accuracy is None or entry["val_accuracy"] > self.best_val_accuracy:
            self.best_val_accuracy = entry["val_accuracy"]
            self.best_epoch = entry["epoch"]
            self.epochs_without_improvement = 0
        else:
            self.epochs_without_improvement += 1
        if self.epochs_without_improvement >= patience:
            self.stop_reason = "early_stopping"
        self.epoch += 1
        self.batch_in_epoch = 0
        self.epoch_loss_sum, self.epoch_correct, self.epoch_seen = 0.0, 0, 0


def cpu_copy(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A detached CPU copy of a model's weights (the best-validation snapshot)."""
    return {name: tensor.detach().to("cpu", copy=True) for name, tensor in state_dict.items()}
