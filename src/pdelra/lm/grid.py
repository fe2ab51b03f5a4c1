"""The LM experiment's runs and run configs from the workflow config's `lm` section (used by lm.smk).

Runs: every condition in the setting `base`, and physqk_ad in each of `lm.settings` (the α-allocation
ablation), for every seed; the identity is (lm_{corpus}, condition, d{width}, setting, seed) (pdelra.runs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pdelra.runs import BASE_SETTING, grid_settings

ABLATED_CONDITION = "physqk_ad"


def ablation_settings(lm: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """`lm.settings` as {name: {"model": ..., "train": ...}}; {} when there are none."""
    settings = grid_settings(lm, "lm") if lm.get("settings") else {}
    if BASE_SETTING in settings:
        raise ValueError(f"lm.settings: {BASE_SETTING!r} is the method itself; name the ablation otherwise")
    return settings


def runs(lm: Mapping[str, Any] | None) -> list[tuple[str, str, str, str, int]]:
    """(task, condition, scale, setting, seed) of every LM run; none without an `lm` section."""
    if not lm:
        return []
    ablation = ablation_settings(lm)
    task, scale = f"lm_{lm['corpus']}", f"d{lm['model']['d_model']}"
    out = []
    for condition in lm["conditions"]:
        settings = [BASE_SETTING, *(ablation if condition == ABLATED_CONDITION else ())]
        out += [(task, condition, scale, s, seed) for s in settings for seed in lm["seeds"]]
    return out


def run_config(lm: Mapping[str, Any], task: str, condition: str, scale: str, setting: str, seed: int) -> str:
    """The LM run config (pdelra.lm.trainer) as compact JSON: lm.model/train < the setting's overrides."""
    overrides = {"model": {}, "train": {}} if setting == BASE_SETTING else ablation_settings(lm)[setting]
    resolved = {
        "task": task,
        "variant": condition,
        "scale": scale,
        "setting": setting,
        "seed": int(seed),
        "model": {**lm["model"], **overrides["model"]},
        "train": {**lm["train"], **overrides["train"]},
    }
    return json.dumps(resolved, sort_keys=True, separators=(",", ":"))
