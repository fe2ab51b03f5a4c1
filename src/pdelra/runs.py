"""A run's identity and where its files live: the one place that knows the results layout.

A run is (task, variant, scale, setting, seed). `setting` names a set of overrides of the run's `model` and
`train` config declared by a grid (`grids.NAME.settings: {steps2: {model: {cta_steps: 2}}}`); a grid without
`settings` has the single setting `base` (no overrides). Files of one run:

    {root}/{task}/{variant}/{scale}/{setting}/seed{seed}/          root = results/{experiment}/runs
                                                                        or results/{experiment}/checkpoints

Code that builds or reads these paths uses `run_dir` / `parse_run_dir` / `find_run_files`, never its own
format string. This module imports nothing heavy (Snakemake's common.smk imports it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RUN_KEYS = ("task", "variant", "scale", "setting", "seed")

# The run vocabulary: the values of those keys and of a run's status that the steps single out by name.
BASELINE = "none"  # the variant without an operator (the row of pdelra.nn.model.VARIANTS with no points)
SCALE_ORDER = ("h1", "h2", "h4", "multi")  # pdelra.nn.model.SCALES, in the paper's order (step size h)
MAIN_SCALE = "h1"  # h = 1: every table but the multi-scale ones
MULTI_SCALE = "multi"  # h = 1, 2 and 4 together (Table 12)
BASE_SETTING = "base"  # the setting of a grid without `settings` (no overrides)
COMPLETED, DIVERGED = "completed", "diverged"  # a run's metrics.json `status` (pdelra.training.runner)

# Setting names appear in paths, wildcards and table cells: one path component of plain characters.
SETTING_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# The run folder's last component.
_SEED = re.compile(r"^seed(\d+)$")
# A run folder below its root as a format string (Snakemake wildcards); run_dir() fills it.
RUN_PATTERN = "{task}/{variant}/{scale}/{setting}/seed{seed}"
# Depth of a run folder below its root: task/variant/scale/setting/seedN.
DEPTH = len(RUN_KEYS)


class RunPathError(ValueError):
    """A path that is not a run folder (or a file directly in one); the message names the path."""


def check_setting_name(name: str, where: str = "setting") -> str:
    """`name` if it can be a setting name (a path component), else ValueError naming `where`."""
    if not isinstance(name, str) or not SETTING_NAME.match(name) or name.startswith("seed"):
        raise ValueError(
            f"{where}: {name!r} is not a valid setting name (letters, digits, '_', '.', '-'; "
            "not starting with 'seed' or a punctuation mark)"
        )
    return name


def run_dir(root: str | Path, task: str, variant: str, scale: str, setting: str, seed: int | str) -> Path:
    """The folder of one run under `root` (results/{experiment}/runs or .../checkpoints)."""
    fields = {"task": task, "variant": variant, "scale": scale, "setting": setting, "seed": int(seed)}
    return Path(root, RUN_PATTERN.format(**fields))


def run_glob(name: str = "metrics.json") -> str:
    """Glob pattern, relative to a runs root, of one file `name` in every run folder."""
    return "/".join(["*"] * (DEPTH - 1) + ["seed*", name])


def find_run_files(root: str | Path, name: str = "metrics.json") -> list[Path]:
    """Every `{root}/T/V/S/SETTING/seedN/{name}`, sorted."""
    return sorted(p for p in Path(root).glob(run_glob(name)) if _SEED.match(p.parent.name))


def parse_run_dir(path: str | Path) -> dict[str, Any]:
    """{task, variant, scale, setting, seed (int)} from a run folder or from a file directly inside one.

    Only the last components are read, so the root may be anything:
    `results/x/runs/listops/none/h1/base/seed0/metrics.json` → listops, none, h1, base, 0.
    """
    parts = Path(path).parts
    if parts and not _SEED.match(parts[-1]) and len(parts) > 1 and _SEED.match(parts[-2]):
        parts = parts[:-1]  # a file inside the run folder
    if len(parts) < DEPTH or not _SEED.match(parts[-1]):
        raise RunPathError(
            f"{path}: not a run folder .../{{task}}/{{variant}}/{{scale}}/{{setting}}/seed{{n}}[/file]"
        )
    task, variant, scale, setting, seed_dir = parts[-DEPTH:]
    return {
        "task": task,
        "variant": variant,
        "scale": scale,
        "setting": setting,
        "seed": int(_SEED.match(seed_dir)[1]),  # type: ignore[index]
    }


def grid_settings(grid: Mapping[str, Any], where: str = "grid") -> dict[str, dict[str, dict[str, Any]]]:
    """A grid's settings as {name: {"model": {...}, "train": {...}}}; only `base` when it declares none."""
    declared = grid.get("settings")
    if not declared:
        return {BASE_SETTING: {"model": {}, "train": {}}}
    settings = {}
    for name, overrides in declared.items():
        check_setting_name(name, f"{where}.settings")
        overrides = overrides or {}
        unknown = sorted(set(overrides) - {"model", "train"})
        if unknown:
            raise ValueError(f"{where}.settings.{name}: unknown key(s) {unknown}; allowed: model, train")
        settings[name] = {
            "model": dict(overrides.get("model") or {}),
            "train": dict(overrides.get("train") or {}),
        }
    return settings


def merge_settings(
    grids: Mapping[str, Mapping[str, Any]], names: list[str] | tuple[str, ...]
) -> dict[str, dict[str, dict[str, Any]]]:
    """The settings of the selected grids by name; one name declared with different overrides is an error."""
    merged: dict[str, dict[str, dict[str, Any]]] = {}
    owner: dict[str, str] = {}
    for grid_name in names:
        for name, overrides in grid_settings(grids[grid_name], f"grids.{grid_name}").items():
            if name in merged and merged[name] != overrides:
                raise ValueError(
                    f"setting {name!r} is declared by grids.{owner[name]} and grids.{grid_name} with "
                    f"different overrides ({merged[name]} vs {overrides}); give them different names"
                )
            merged[name], owner[name] = overrides, grid_name
    return merged


def base_rows(frame: Any) -> Any:
    """The rows of a runs-shaped DataFrame in the `base` setting (every table of the paper is on it); an
    empty frame stays empty."""
    return frame[frame["setting"] == BASE_SETTING] if len(frame) else frame
