"""Learning-rate schedule of paper Table 9: linear warmup, then cosine decay to 0 at the planned last step."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class WarmupCosine:
    """Multiplier of the peak learning rate for the optimizer step about to be taken.

    `step` counts completed optimizer steps (LambdaLR's convention), so the first update uses step 0.
    Warmup rises linearly to 1 at `warmup_steps`; cosine then falls to 0 at `total_steps`. When the plan
    is shorter than the warmup (possible with the paper's 10k warmup on small tasks) the rate simply never
    reaches its peak; the runner logs a warning.
    """

    warmup_steps: int
    total_steps: int

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        decay_steps = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / decay_steps)
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def planned_steps(steps_per_epoch: int, max_epochs: int, max_steps: int | None) -> int:
    """The step budget the cosine decays over: all epochs, or the max_steps cap when it is smaller.

    Early stopping does not shorten the plan: it cannot be known in advance.
    """
    total = steps_per_epoch * max_epochs
    return total if max_steps is None else min(total, max_steps)


def make_scheduler(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    # A frozen dataclass rather than a closure: LambdaLR then stores its fields in state_dict().
    import torch  # here: the plan and the workflow's runtime estimate read planned_steps without torch

    return torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupCosine(warmup_steps, total_steps))
