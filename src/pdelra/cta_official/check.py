"""The config check of Continuous-Time Attention's own experiments (the `check` of the part `cta_official`,
pdelra.parts): what the workflow and `pdelra config check` refuse in the `cta_official` section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pdelra.cta_official import grid
from pdelra.cta_official.lm import model_config, validate_lm_run_config
from pdelra.data.generate import resolve_params
from pdelra.errors import UserError
from pdelra.nn.model import ModelConfig
from pdelra.training.runconfig import RunConfigError, validate_run_config


def problems(config: Mapping[str, Any]) -> list[str]:
    """The `cta_official` grid: each task's run config is complete (`pdelra train` would take it), its
    model is the authors' (`backbone: official_cta`) and builds with every variant, and its data can be had
    (real: the downloads; generated: settings `pdelra generate` can meet)."""
    section = config.get("cta_official")
    if not section:
        return []

    problems: dict[str, None] = {}
    for task in grid.tasks(section):
        where = f"cta_official: task {task} (cta_official.defaults < cta_official.tasks.{task})"
        model = grid.merged(section, "model", task)
        if model.get("backbone") != "official_cta":
            problems[f"{where}: model.backbone must be official_cta (the authors' model)"] = None
            continue
        for variant in section["variants"]:
            try:
                validate_run_config(grid.run_config(section, task, variant, 0), where)
                ModelConfig(vocab_size=2, num_classes=2, max_length=1, variant=variant, **model)
            except RunConfigError as err:
                problems[str(err)] = None
            except (TypeError, ValueError) as err:
                problems[f"{where}: {err}"] = None
    return list(problems) + _cta_lm_problems(section) + _cta_data_problems(config, section)


def _cta_lm_problems(section: Mapping[str, Any]) -> list[str]:
    """`cta_official.wikitext103`: every run's config is one `pdelra cta-official train-lm` takes and its
    model builds (d_model divisible by n_heads, …)."""
    lm = grid.lm_section(section)
    if not lm:
        return []
    problems: dict[str, None] = {}
    where = "cta_official.wikitext103"
    for _, variant, _, setting, _ in grid.lm_runs({**section, "seeds": [0]}):
        try:
            cfg = validate_lm_run_config(grid.lm_run_config(section, variant, setting, 0), where)
            model_config(cfg, vocab_size=2, block_size=lm["block_size"])
        except RunConfigError as err:
            problems[f"{where}: {err}" if not str(err).startswith(where) else str(err)] = None
    return list(problems)


def _cta_data_problems(config: Mapping[str, Any], section: Mapping[str, Any]) -> list[str]:
    data = config["data"]
    sources = grid.own_sources(section, data["source"])
    if data["source"] == "real":
        downloads = section.get("downloads") or {}
        problems = [
            f"data.source is real, so cta_official.downloads.{source} (url, md5) is needed"
            for source in sources
            if source not in downloads
        ]
        if grid.lra_raw_tasks(section) and "imdb" not in (data.get("downloads") or {}):
            problems.append(
                "data.source is real, so data.downloads.imdb is needed for cta_official's IMDb tasks"
            )
        return problems

    problems = []
    if grid.lra_raw_tasks(section) and "text" not in config["tasks"]:
        problems.append("cta_official's IMDb tasks read the generated `text` task: add tasks.text")
    for source in sources:
        try:
            resolve_params(source, {"seed": data["seed"], **section["generate"].get(source, {})})
        except UserError as err:
            problems.append(f"cta_official.generate.{source}: {err}")
    return problems
