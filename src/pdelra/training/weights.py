"""A run's trained weights as `model.safetensors` beside its metrics.json.

safetensors, not pickle: loading a downloaded artifact reads tensors and a string table, it never runs code.
The file holds the model's state_dict (the best-validation weights) and string metadata saying which
weights they are (`weights`: `best_validation`, or `last` when the run diverged before any validation).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from pdelra.atomic import atomic_path
from pdelra.errors import UserError

WEIGHTS_NAME = "model.safetensors"


class WeightsError(UserError):
    """A weights file that is missing or unreadable; the message names it."""


def save_weights(path: Path, state_dict: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Write `state_dict` (CPU copies, contiguous) and string `metadata` to `path` atomically."""
    tensors = {name: t.detach().to("cpu").contiguous() for name, t in state_dict.items()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={k: str(v) for k, v in metadata.items()})


def load_weights(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(state_dict on CPU, metadata) from a file written by `save_weights`."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = dict(handle.metadata() or {})
        return load_file(str(path)), metadata
    except FileNotFoundError as exc:
        raise WeightsError(f"{path}: no weights file (train the run first: `pdelra train`)") from exc
    except (SafetensorError, OSError) as exc:
        raise WeightsError(f"{path}: not a readable safetensors file: {exc}") from exc
