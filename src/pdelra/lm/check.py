"""The config check of PhysQK-AD's LM (the `check` of the part `lm`, pdelra.parts): what the workflow and
`pdelra config check` refuse in the `lm` section before any job runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pdelra.lm import grid
from pdelra.lm.model import LMConfig
from pdelra.model_layers import heads_problem, layered


def problems(config: Mapping[str, Any]) -> list[str]:
    """The `lm` section's runs: its ablation settings and every condition's model as LMConfig builds it."""
    lm = config.get("lm")
    if not lm:
        return []

    try:
        ablation = grid.ablation_settings(lm)
    except ValueError as err:
        return [str(err)]
    problems: dict[str, None] = {}
    for _, condition, _, setting, _ in grid.runs(lm):
        overrides = ablation[setting]["model"] if setting in ablation else {}
        model, origin = layered([("lm.model", lm["model"]), (f"lm.settings.{setting}.model", overrides)])
        heads = heads_problem(model, origin, LMConfig)
        if heads:
            problems[heads] = None
            continue
        try:
            LMConfig(vocab_size=2, window=lm["window"], condition=condition, **model).block_config()
        except (TypeError, ValueError) as err:
            where = "lm.model" + (f" < lm.settings.{setting}.model" if overrides else "")
            problems[f"{where} ({condition}): {err}"] = None
    return list(problems)
