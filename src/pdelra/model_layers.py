"""A model config merged from layers of overrides, remembering where each key came from, so a config check
names the key a user set (`tasks.listops.model.n_heads`), not the merged value's. Used by the LRA grid's
check (pdelra.planning.config_check) and the parts' (pdelra.lm.check); imports nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def layered(layers: list[tuple[str, Mapping[str, Any]]]) -> tuple[dict[str, Any], dict[str, str]]:
    """The merged model config of (key path, overrides) layers, lowest first, and where each key came from."""
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for where, overrides in layers:
        for key, value in overrides.items():
            merged[key], origin[key] = value, f"{where}.{key}"
    return merged, origin


def heads_problem(model: Mapping[str, Any], origin: Mapping[str, str], defaults: Any) -> str | None:
    """'tasks.listops.model.n_heads: 3 does not divide d_model 32 (defaults.model.d_model)', or None;
    `defaults` is the model config class whose d_model and n_heads apply when a layer sets none."""
    d_model, n_heads = model.get("d_model", defaults.d_model), model.get("n_heads", defaults.n_heads)
    if d_model % n_heads == 0:
        return None
    d_from = origin.get("d_model", "the default")
    return f"{origin.get('n_heads', 'n_heads')}: {n_heads} does not divide d_model {d_model} ({d_from})"
