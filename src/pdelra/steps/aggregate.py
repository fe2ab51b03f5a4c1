"""`pdelra aggregate`: every run's metrics.json → the tables the report and the paper comparison read.

Outputs (in `--out`), all CSV:
- `runs.csv`: one row per run, whatever became of it (status `completed`, `diverged`, ...), with provenance.
- `main.csv`: test accuracy mean ± std per task × variant at scale h1, plus a task `average` row per
  variant (paper Tables 6 and 10). Only completed runs count; `n_runs` vs `n` shows what was left out.
- `multiscale.csv`: each (task, variant) trained at several scales, per scale, with the gain over the
  baseline and of the multi-scale combination over the best single scale (paper Table 12).
- `cost.csv`: step time and peak memory per configuration and their overhead over `none` (paper Table 14).
- `alpha.csv`: the learned diffusion coefficients, one row per run and diffusion layer: mean, min, max over
  channels and scales, and per step size h the mean over channels (`per_scale_h1`, `per_scale_h2`,
  `per_scale_h4`; empty for a step size the layer does not have).
- `settings.csv`: test accuracy mean ± std per task × variant × scale × setting, every setting (grid
  ablations such as CTA's pseudo-time steps); `main.csv` and the paper comparisons use the `base` setting.
- `parts.csv`: the experiment's parts and how its config names its own ones (`pdelra claims` reads it).
- what `pdelra.results.build.derived_tables` computes from those: the comparisons with the paper
  (`pdelra.results.tables.COMPARISON_TABLES`), the related systems' and diagnostics' summaries, claims.csv.

A run's identity (task, variant, scale, setting, seed; `pdelra.runs`) is read from metrics.json and checked
against its path `.../runs/{task}/{variant}/{scale}/{setting}/seed{n}/metrics.json`: a misplaced file is
caught, not mislabelled. Every table has a `setting` column right after `scale` and groups by it.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra import paper, parts
from pdelra.atomic import write_csv_atomic
from pdelra.errors import UserError
from pdelra.parts import Part
from pdelra.results.build import (
    AGGREGATE_TABLES,
    DERIVED_TABLES,
    PARTS_TABLE,
    derived_tables,
    parts_table,
    read_inputs,
    read_table,
)
from pdelra.results.spectral import SCALES
from pdelra.results.tables import ALPHA_STEP_SIZES, run_tables
from pdelra.runs import (
    BASE_SETTING,
    COMPLETED,
    RUN_KEYS,
    RunPathError,
    find_run_files,
    parse_run_dir,
)

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


# The run config echoed in runs.csv (the report's Tables 8/9, warm-up and spectral view read them there, not
# from metrics.json): column → (run_config section, key); empty where the config does not say (a default).
RUN_CONFIG_FIELDS = {
    "d_model": ("model", "d_model"),
    "n_layers": ("model", "n_layers"),
    "n_heads": ("model", "n_heads"),
    "alpha_init": ("model", "alpha_init"),
    "stencil_scaling": ("model", "stencil_scaling"),
    "multiscale_init": ("model", "multiscale_init"),
    "batch_size": ("train", "batch_size"),
    "lr": ("train", "lr"),
    "max_epochs": ("train", "max_epochs"),
    "warmup_steps": ("train", "warmup_steps"),
    "weight_decay": ("train", "weight_decay"),
}
CONFIG_COLUMNS = (*RUN_CONFIG_FIELDS, "steps_per_epoch", "planned_steps")
# Columns of runs.csv, in order. Missing values (a diverged run has no test accuracy) are left empty.
RUN_COLUMNS = (
    *RUN_KEYS,
    "status",
    "own_variant",
    "own_position",
    "test_accuracy",
    "n_test",
    "best_val_accuracy",
    "best_epoch",
    "epochs",
    "steps",
    "wall_time_s",
    "median_step_time_s",
    "peak_memory_mb",
    "peak_host_memory_mb",
    "resumed_count",
    "alpha_mean",
    "alpha_min",
    "alpha_max",
    "n_params",
    "device",
    "config_hash",
    "data_hash",
    "code_version",
    "operator_code",
    "metrics_path",
    *CONFIG_COLUMNS,
)


class MetricsError(UserError, ValueError):
    """A metrics.json that cannot be used; the message names the file."""


# ----------------------------------------------------------------------------------------------------
# Reading runs
# ----------------------------------------------------------------------------------------------------
def _learned_alpha(metrics: dict[str, Any]) -> Any:
    """The α summary `{layer: {mean, min, max}}` at the best (tested) epoch, else at the last epoch."""
    history = [h for h in metrics.get("history") or [] if h.get("alpha")]
    best = [h for h in history if h.get("epoch") == metrics.get("best_epoch")]
    return (best or history or [{}])[-1].get("alpha")


def _alpha_stats(alpha: Any) -> tuple[float | None, float | None, float | None]:
    """Mean of the layers' mean α and the overall min/max, from `{layer: {mean, min, max}}`."""
    if not isinstance(alpha, dict) or not alpha:
        return None, None, None
    layers = [v for v in alpha.values() if isinstance(v, dict) and "mean" in v]
    if not layers:
        return None, None, None
    return (
        sum(v["mean"] for v in layers) / len(layers),
        min(v.get("min", v["mean"]) for v in layers),
        max(v.get("max", v["mean"]) for v in layers),
    )


def _code_version(value: Any) -> Any:
    """metrics.json's `code_version` {package, git} as one string: the git description when there is one."""
    return (value.get("git") or value.get("package")) if isinstance(value, dict) else value


def read_run(path: Path) -> dict[str, Any]:
    """One runs.csv row from a metrics.json file."""
    return _read(path)[0]


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(runs.csv row, alpha.csv rows) of one metrics.json, parsed once (10,000s of files: parse each once)."""
    try:
        metrics = json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise MetricsError(f"{path}: metrics file does not exist") from exc
    except json.JSONDecodeError as exc:
        raise MetricsError(
            f"{path}: line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg}); Snakemake counts "
            f"it as done, so remove it (rm {path}) and rerun snakemake to train that run again"
        ) from exc
    if not isinstance(metrics, dict):
        raise MetricsError(f"{path}: expected a JSON object, got {type(metrics).__name__}")

    row: dict[str, Any] = {}
    for key in RUN_KEYS:
        if key == "setting" and metrics.get(key) is None:
            metrics[key] = BASE_SETTING  # written before settings existed: the grid's only setting
        if metrics.get(key) is None:
            raise MetricsError(f"{path}: no {key!r}: not a metrics.json written by `pdelra train`")
        row[key] = int(metrics[key]) if key == "seed" else str(metrics[key])
    try:
        from_path: dict[str, Any] | None = parse_run_dir(path)
    except RunPathError:  # a file outside the runs layout (given by hand): nothing to check against
        from_path = None
    if from_path and any(row[k] != from_path[k] for k in RUN_KEYS):
        found = ", ".join(f"{k}={row[k]}" for k in RUN_KEYS)
        raise MetricsError(f"{path}: the file says {found}, which does not match its location")

    # Field names as the trainer writes them (docs/interfaces.md, pdelra.training.metrics).
    peak = metrics.get("peak_memory_bytes")
    host_peak = metrics.get("peak_host_memory_bytes")  # absent in metrics.json written before it was measured
    alpha_mean, alpha_min, alpha_max = _alpha_stats(_learned_alpha(metrics))
    row.update(
        status=metrics.get("status") or COMPLETED,
        own_variant=_own_variant(metrics.get("run_config")),
        own_position=_own_position(metrics.get("run_config")),
        test_accuracy=metrics.get("test_accuracy"),
        n_test=metrics.get("n_test"),
        best_val_accuracy=metrics.get("best_val_accuracy"),
        best_epoch=metrics.get("best_epoch"),
        epochs=metrics.get("epochs_run"),
        steps=metrics.get("steps_run"),
        wall_time_s=metrics.get("wall_time_s"),
        median_step_time_s=metrics.get("median_step_time_s"),
        peak_memory_mb=None if peak is None else peak / 2**20,
        peak_host_memory_mb=None if host_peak is None else host_peak / 2**20,
        resumed_count=metrics.get("resumed_count"),
        alpha_mean=alpha_mean,
        alpha_min=alpha_min,
        alpha_max=alpha_max,
        n_params=metrics.get("parameter_count"),
        device=metrics.get("device"),
        config_hash=metrics.get("config_hash"),
        data_hash=metrics.get("data_manifest_hash"),
        code_version=_code_version(metrics.get("code_version")),
        operator_code=metrics.get("operator_code"),  # a variant's own operator code; empty for the project's
        metrics_path=str(path),
        steps_per_epoch=metrics.get("steps_per_epoch"),
        planned_steps=metrics.get("planned_steps"),
        **_config_fields(metrics.get("run_config")),
    )
    return row, _alpha_rows(metrics, row)


def _operators(run_config: Any) -> dict[str, Any]:
    """The run config's `model.operators` (a config variant's {key: operator}); {} for a built-in one."""
    model = run_config.get("model") if isinstance(run_config, dict) else None
    operators = model.get("operators") if isinstance(model, dict) else None
    return operators if isinstance(operators, dict) else {}


def _own_variant(run_config: Any) -> bool:
    """Whether the run is of a variant declared in the config (`variants:`): its model names operators."""
    return bool(_operators(run_config))


def _own_position(run_config: Any) -> str | None:
    """The paper's position whose insertion points a config variant's operators occupy (paper.position_of),
    where its claims compare it with the paper's diffusion; None for a built-in variant or several points."""
    operators = _operators(run_config)
    return paper.position_of(operators) if operators else None


def _config_fields(run_config: Any) -> dict[str, Any]:
    """runs.csv's config columns from metrics.json's `run_config` echo (None where it is silent)."""
    config = run_config if isinstance(run_config, dict) else {}
    out = {}
    for column, (section, key) in RUN_CONFIG_FIELDS.items():
        block = config.get(section)
        out[column] = block.get(key) if isinstance(block, dict) else None
    return out


def _alpha_rows(metrics: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    alpha = _learned_alpha(metrics)
    if not isinstance(alpha, dict):
        return []
    return [
        {
            **{k: run[k] for k in RUN_KEYS},
            "layer": layer,
            **{s: stats.get(s) for s in ("mean", "min", "max")},
            **_per_scale(stats, run["scale"]),
        }
        for layer, stats in alpha.items()
        if isinstance(stats, dict)
    ]


def _per_scale(stats: dict[str, Any], scale: str) -> dict[str, Any]:
    """`per_scale_h{h}`: the layer's α at step size h (mean over channels), from its `per_scale` and
    `scales`; a one-scale layer without them (older metrics) has its mean at the run's scale."""
    scales = stats.get("scales") or list(SCALES.get(scale, ()))
    values = stats.get("per_scale")
    if values is None and len(scales) == 1:
        values = [stats.get("mean")]
    known = (
        dict(zip(scales, values, strict=True)) if values is not None and len(values) == len(scales) else {}
    )
    return {f"per_scale_h{h}": known.get(h) for h in ALPHA_STEP_SIZES}


def find_metrics(runs_dir: Path) -> list[Path]:
    return find_run_files(runs_dir, "metrics.json")


# ----------------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------------


def aggregate(
    metrics_files: Iterable[Path],
    out: Path,
    extra_inputs: Mapping[str, Path] | None = None,
    own_parts: tuple[Part, ...] = (),
) -> dict[str, pd.DataFrame]:
    """Build every table from the given metrics files (and the optional `extra_inputs` by name:
    `lm_runs`, `lm_dynamics`, `diagnostics` CSVs) and write them into `out`; returns them by name.
    `own_parts` (a config's own, pdelra.parts) add their claims, from the tables of theirs they read, which
    `pdelra part aggregate` wrote into `out` (absent: empty)."""
    import pandas as pd

    files = sorted({Path(p) for p in metrics_files})
    if not files:
        raise MetricsError("no metrics.json files to aggregate")
    parsed = [_read(p) for p in files]
    rows = [row for row, _ in parsed]
    runs = pd.DataFrame(rows, columns=list(RUN_COLUMNS)).sort_values(list(RUN_KEYS), ignore_index=True)
    duplicates = runs[runs.duplicated(list(RUN_KEYS), keep=False)]
    if len(duplicates):
        raise MetricsError(f"the same run appears twice: {duplicates['metrics_path'].tolist()}")
    for column in (
        "test_accuracy",
        "best_val_accuracy",
        "median_step_time_s",
        "peak_memory_mb",
        "peak_host_memory_mb",
        "wall_time_s",
    ):
        runs[column] = pd.to_numeric(runs[column], errors="coerce")
    alpha_rows = [row for _, alpha in parsed for row in alpha]
    tables = {
        "runs": runs,
        **run_tables(runs, alpha_rows),
        PARTS_TABLE: parts_table((*parts.builtin(), *own_parts)),
    }
    for name, frame in tables.items():
        write_csv_atomic(frame, Path(out) / f"{name}.csv")
    # The derived tables and the claims are computed from the run tables as written (floats at the CSV's
    # precision), exactly what `pdelra claims --tables` reads back: the two give the same claims.csv, byte
    # for byte.
    inputs = read_inputs(Path(out), tuple(tables))
    inputs |= {name: read_table(Path(path)) for name, path in (extra_inputs or {}).items()}
    inputs |= read_inputs(Path(out), parts.reads(own_parts))
    derived = derived_tables(inputs, (*parts.builtin(), *own_parts))
    tables |= {name: derived[name] for name in DERIVED_TABLES}
    if set(tables) != set(AGGREGATE_TABLES):
        raise AssertionError(
            f"tables {sorted(tables)} differ from AGGREGATE_TABLES {sorted(AGGREGATE_TABLES)}"
        )
    for name in DERIVED_TABLES:
        write_csv_atomic(tables[name], Path(out) / f"{name}.csv")
    not_done = runs[runs["status"] != COMPLETED]
    log.info(
        "aggregated %d runs (%d not completed: %s) into %s",
        len(runs),
        len(not_done),
        ", ".join(f"{n} {s}" for s, n in not_done["status"].value_counts().items()) or "none",
        out,
    )
    return tables


# ----------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------
def command(args: argparse.Namespace) -> int:
    """`pdelra aggregate` (declared in pdelra.steps.cli)."""
    files: list[Path] = list(args.metrics)
    if args.runs is not None:
        found = find_metrics(args.runs)
        if not found:
            log.error("no runs/T/V/S/SETTING/seedN/metrics.json under %s", args.runs)
            return 1
        files += found
    if not files:
        log.error("give metrics.json files and/or --runs DIR")
        return 2
    read = parts.reads(parts.builtin())  # the built-in parts' tables it reads: its options (pdelra.steps.cli)
    extra = {name: path for name in read if (path := getattr(args, name)) is not None}
    aggregate(files, args.out, extra, parts.plugins({"parts": args.part}))
    return 0
