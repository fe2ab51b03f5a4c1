"""`pdelra lm aggregate`: the LM runs' metrics.json → lm_runs.csv, lm_dynamics.csv, lm_history.csv.

- `lm_runs.csv`: one row per run: task, variant (condition), scale (d{width}), setting (α allocation), seed,
  status, test_loss_nats, test_bits_per_byte, best_val_loss_nats, final_val_loss_nats, best_epoch, epochs,
  steps, tokens_per_epoch, corpus, n_params, wall_time_s, median_step_time_s, peak_memory_mb, device,
  config_hash, data_hash, metrics_path.
- `lm_dynamics.csv`: run keys, step, epoch, layer, alpha, eta, eff_pe (PhysQK-AD runs; from the start).
- `lm_history.csv`: run keys, epoch, steps, train_loss, val_loss, val_bits_per_byte, lr.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pdelra.atomic import write_csv_atomic
from pdelra.runs import RUN_KEYS, RunPathError, find_run_files, parse_run_dir
from pdelra.steps.aggregate import MetricsError

RUN_COLUMNS = (
    *RUN_KEYS,
    "status",
    "test_loss_nats",
    "test_bits_per_byte",
    "best_val_loss_nats",
    "final_val_loss_nats",
    "best_epoch",
    "epochs",
    "steps",
    "tokens_per_epoch",
    "corpus",
    "n_params",
    "wall_time_s",
    "median_step_time_s",
    "peak_memory_mb",
    "device",
    "config_hash",
    "data_hash",
    "metrics_path",
)
DYNAMICS_COLUMNS = (*RUN_KEYS, "step", "epoch", "layer", "alpha", "eta", "eff_pe")
HISTORY_COLUMNS = (*RUN_KEYS, "epoch", "steps", "train_loss", "val_loss", "val_bits_per_byte", "lr")


def _load(path: Path) -> dict[str, Any]:
    try:
        metrics = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise MetricsError(f"{path}: cannot read LM metrics ({exc})") from exc
    missing = [k for k in (*RUN_KEYS, "test_loss_nats") if k not in metrics]
    if missing:
        raise MetricsError(f"{path}: no {missing}: not a metrics.json written by `pdelra lm train`")
    try:
        where = parse_run_dir(path)
    except RunPathError:
        where = None
    if where and any(str(where[k]) != str(metrics[k]) for k in RUN_KEYS):
        raise MetricsError(f"{path}: the file's run keys do not match its location")
    return metrics


def aggregate_lm(metrics_files: Iterable[Path], out: Path) -> dict[str, Any]:
    import pandas as pd

    files = sorted({Path(p) for p in metrics_files})
    runs, dynamics, history = [], [], []
    for path in files:
        m = _load(path)
        keys = {k: m[k] for k in RUN_KEYS}
        peak = m.get("peak_memory_bytes")
        runs.append(
            {
                **keys,
                "status": m.get("status"),
                "test_loss_nats": m.get("test_loss_nats"),
                "test_bits_per_byte": m.get("test_bits_per_byte"),
                "best_val_loss_nats": m.get("best_val_loss_nats"),
                "final_val_loss_nats": m.get("final_val_loss_nats"),
                "best_epoch": m.get("best_epoch"),
                "epochs": m.get("epochs_run"),
                "steps": m.get("steps_run"),
                "tokens_per_epoch": m.get("tokens_per_epoch"),
                "corpus": m.get("corpus"),
                "n_params": m.get("parameter_count"),
                "wall_time_s": m.get("wall_time_s"),
                "median_step_time_s": m.get("median_step_time_s"),
                "peak_memory_mb": None if peak is None else peak / 2**20,
                "device": m.get("device"),
                "config_hash": m.get("config_hash"),
                "data_hash": m.get("data_manifest_hash"),
                "metrics_path": str(path),
            }
        )
        dynamics += [{**keys, **{c: d.get(c) for c in DYNAMICS_COLUMNS[5:]}} for d in m.get("dynamics", [])]
        history += [{**keys, **{c: h.get(c) for c in HISTORY_COLUMNS[5:]}} for h in m.get("history", [])]
    tables = {
        "lm_runs": pd.DataFrame(runs, columns=list(RUN_COLUMNS)),
        "lm_dynamics": pd.DataFrame(dynamics, columns=list(DYNAMICS_COLUMNS)),
        "lm_history": pd.DataFrame(history, columns=list(HISTORY_COLUMNS)),
    }
    for name, table in tables.items():
        write_csv_atomic(table, Path(out) / f"{name}.csv")
    return tables


def aggregate_command(args: argparse.Namespace) -> int:
    """`pdelra lm aggregate` (pdelra.lm.cli)."""
    files = list(args.metrics) + (find_run_files(args.runs) if args.runs else [])
    aggregate_lm(files, args.out)  # no files: empty tables with headers (the report says "not run")
    return 0
