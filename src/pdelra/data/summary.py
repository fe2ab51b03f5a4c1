"""`pdelra data-summary`: what data and model size each task ran on, beside the paper's setting.

The report opens with this (its data banner): a verdict on toy data says nothing about the paper, and a
reader must see that before any verdict. One row per task (`tables/data.csv`):

- `data`: `real` or `generated`; `origin`: the source URL and md5 (real) or the generator and its settings;
- `n_train`, `n_val`, `n_test`, `max_length`: from the processed data's manifest.json;
- `d_model`, `n_layers`, `n_heads`, `batch_size`: the configured model beside Table 8's (`paper_*`);
- `paper_setting`: whether all of it is the paper's (real data, the paper's length and Table 8's model);
  `differences`: what is not, in words.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra import paper, tasks
from pdelra.atomic import write_csv_atomic
from pdelra.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

TABLE = "data"  # written as tables/data.csv
MODEL_KEYS = ("d_model", "n_layers", "n_heads", "batch_size")
COLUMNS = (
    "task",
    "data",
    "origin",
    "n_train",
    "n_val",
    "n_test",
    "max_length",
    "paper_max_length",
    *MODEL_KEYS,
    *(f"paper_{k}" for k in MODEL_KEYS),
    "paper_setting",
    "differences",
)


class DataSummaryError(UserError, ValueError):
    """The spec or a manifest could not be read; the message names it."""


def task_row(task: str, spec: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """One task's row from its spec ({source, origin, model}) and its manifest."""
    counts = manifest.get("counts", {})
    model = spec.get("model", {})
    table8 = paper.TABLE8.get(task, {})
    row: dict[str, Any] = {
        "task": task,
        "data": spec["source"],
        "origin": spec.get("origin", ""),
        "n_train": counts.get("train"),
        "n_val": counts.get("val"),
        "n_test": counts.get("test"),
        "max_length": manifest.get("max_length"),
        "paper_max_length": tasks.TASKS[task].max_length if task in tasks.paper_tasks() else None,
        **{k: model.get(k) for k in MODEL_KEYS},
        **{f"paper_{k}": table8.get(k) for k in MODEL_KEYS},
    }
    differences = []
    if row["data"] != "real":
        differences.append("generated data")
    if row["paper_max_length"] is not None and row["max_length"] != row["paper_max_length"]:
        differences.append(f"length {row['max_length']} (paper {row['paper_max_length']})")
    if table8:  # a task the paper does not have has no setting of the paper's to differ from
        differences += [
            f"{k} {row[k]} (paper {row[f'paper_{k}']})" for k in MODEL_KEYS if row[k] != row[f"paper_{k}"]
        ]
    row["paper_setting"] = not differences
    row["differences"] = "; ".join(differences)
    return row


def summarise(specs: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """data.csv from the per-task specs, each with the path of its `manifest`."""
    import pandas as pd

    rows = []
    for task, spec in specs.items():
        path = Path(spec["manifest"])
        try:
            manifest = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataSummaryError(f"{path}: cannot read the manifest ({exc})") from exc
        rows.append(task_row(task, spec, manifest))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def data_summary_command(args: argparse.Namespace) -> int:
    """`pdelra data-summary --spec JSON --out CSV` (pdelra.data.cli)."""
    try:
        specs = (
            json.loads(Path(args.spec).read_text())
            if not args.spec.startswith("{")
            else json.loads(args.spec)
        )
    except (OSError, json.JSONDecodeError) as exc:
        raise DataSummaryError(f"--spec: not a JSON object or file ({exc})") from exc
    table = summarise(specs)
    write_csv_atomic(table, Path(args.out))
    off = table[~table["paper_setting"]]
    log.info("%d tasks, %d differ from the paper's setting → %s", len(table), len(off), args.out)
    return 0
