"""Seeds of a run and the RNG states a checkpoint carries.

The paper fixed the Python, NumPy and PyTorch seeds to 42, 0 and 1 (App. B.1.2). Run seed n offsets all
three: (42 + n, 0 + n, 1 + n), so seed 0 is exactly the paper's setting. The epoch shuffles use their own
torch.Generator derived from the PyTorch seed (batches.epoch_order), so dropout draws and data order do not
perturb each other.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

PAPER_SEEDS = {"python": 42, "numpy": 0, "torch": 1}


@dataclass(frozen=True)
class Seeds:
    python: int
    numpy: int
    torch: int

    @property
    def sampler(self) -> int:
        return self.torch


def derive_seeds(run_seed: int) -> Seeds:
    return Seeds(**{name: base + run_seed for name, base in PAPER_SEEDS.items()})


def seed_everything(seeds: Seeds) -> None:
    random.seed(seeds.python)
    np.random.seed(seeds.numpy)
    torch.manual_seed(seeds.torch)  # also seeds every CUDA device


def capture_rng_states() -> dict[str, Any]:
    """Every RNG state as tensors and plain Python values: a checkpoint loads with weights_only=True."""
    name, key, pos, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "bit_generator": str(name),
            "key": torch.from_numpy(np.asarray(key, dtype=np.int64)),  # uint32 words, widened
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    numpy_state = states["numpy"]
    np.random.set_state(
        (
            numpy_state["bit_generator"],
            numpy_state["key"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
