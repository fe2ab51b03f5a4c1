"""The run configuration beside the paper's (Tables 8 and 9: `config_echo`, the warm-up), and provenance: what
ran, on which data and code (`provenance_summary`, `provenance_data`, `runs_per_cell`). Read by
`pdelra.results.tables.summarise`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.runs import COMPLETED, base_rows

if TYPE_CHECKING:
    import pandas as pd

# ----------------------------------------------------------------------------------------------------
# Configuration and provenance
# ----------------------------------------------------------------------------------------------------
# The config fields Tables 8 and 9 name, as runs.csv columns, with the paper's value per task.
CONFIG_FIELDS = (
    "d_model",
    "n_layers",
    "n_heads",
    "batch_size",
    "lr",
    "max_epochs",
    "warmup_steps",
    "weight_decay",
)


def _paper_config(task: str, field: str) -> Any:
    return paper.TABLE8.get(task, {}).get(field, paper.TABLE9.get(field))


def config_echo(runs: pd.DataFrame) -> pd.DataFrame:
    """Tables 8 and 9 beside the configuration actually used: per task and field, the value of the base-
    setting runs (the most common one; `n_values` > 1 says the runs differ) and the paper's."""
    import pandas as pd

    columns = ["task", "field", "ours", "n_values", "paper"]
    base = base_rows(runs)
    rows = []
    for task in paper.TASKS:
        cell = base[base["task"] == task] if len(base) else base
        if cell.empty:
            continue
        for field in CONFIG_FIELDS:
            values = cell[field].dropna() if field in cell else pd.Series(dtype=object)
            rows.append(
                {
                    "task": task,
                    "field": field,
                    "ours": values.mode().iloc[0] if len(values) else None,
                    "n_values": int(values.nunique()),
                    "paper": _paper_config(task, field),
                }
            )
    return pd.DataFrame(rows, columns=columns)


def warmup(runs: pd.DataFrame) -> pd.DataFrame:
    """Per task: steps per epoch and planned optimiser steps (from the runs' data manifests and configs)
    against the warm-up length; where the plan is shorter, the peak learning rate is never reached and
    `highest_lr_fraction` is the fraction of it the schedule reaches."""
    import pandas as pd

    columns = [
        "task",
        "steps_per_epoch",
        "planned_steps",
        "warmup_steps",
        "peak_lr_reached",
        "highest_lr_fraction",
    ]
    needed = {"steps_per_epoch", "planned_steps", "warmup_steps"}
    base = base_rows(runs)
    if base.empty or not needed <= set(base.columns):
        return pd.DataFrame(columns=columns)
    rows = []
    for task in paper.TASKS:
        cell = base[base["task"] == task].dropna(subset=["planned_steps"])
        if cell.empty:
            continue
        planned = int(cell["planned_steps"].mode().iloc[0])
        warm = cell["warmup_steps"].dropna()
        warm_steps = int(warm.mode().iloc[0]) if len(warm) else 0
        per_epoch = cell["steps_per_epoch"].dropna()
        rows.append(
            {
                "task": task,
                "steps_per_epoch": int(per_epoch.mode().iloc[0]) if len(per_epoch) else None,
                "planned_steps": planned,
                "warmup_steps": warm_steps,
                "peak_lr_reached": planned > warm_steps,
                "highest_lr_fraction": min(1.0, planned / warm_steps) if warm_steps else 1.0,
            }
        )
    return pd.DataFrame(rows, columns=columns)


def _distinct(values: pd.Series, width: int | None = None) -> str:
    """The distinct non-empty values, sorted and joined (each cut to `width` characters)."""
    text = values.dropna().astype(str)
    return ", ".join(sorted((text.str[:width] if width else text).unique()))


def provenance_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """What the runs are: counts by status, the grid's extent, code versions (the project's, and each own
    variant's operator code), devices and config hashes, one `item`, `value` row each."""
    import pandas as pd

    if runs.empty:
        return pd.DataFrame(columns=["item", "value"])
    items: list[tuple[str, Any]] = [("runs", len(runs))]
    items += [(f"status {s}", int(n)) for s, n in runs["status"].value_counts().sort_index().items()]
    # Every extent is a count ("seeds 1", not the demo's lone seed "0", which read as no seeds), then the ids.
    extents = ("task", "variant", "scale", "setting", "seed")
    items += [(f"{key}s", int(runs[key].nunique())) for key in extents]
    items += [
        ("seed ids", ", ".join(map(str, sorted(runs["seed"].unique())))),
        ("code versions", _distinct(runs["code_version"])),
    ]
    # Beside the project's commit, the code of each variant's own operator (pdelra.operator_code): a hash
    # that changes with any edit of it, first 16 hex (two values: runs of the same variant by different code).
    if "operator_code" in runs:
        own = runs.dropna(subset=["operator_code"]).groupby("variant", sort=True)["operator_code"]
        items += [(f"operator code {variant}", _distinct(codes, 16)) for variant, codes in own]
    items += [
        ("devices", _distinct(runs["device"])),
        ("config hashes", int(runs["config_hash"].nunique())),
    ]
    return pd.DataFrame(items, columns=["item", "value"])


def provenance_data(runs: pd.DataFrame) -> pd.DataFrame:
    """Per task: the data manifest hashes of its runs (first 16 hex) and how many distinct there are."""
    import pandas as pd

    if runs.empty:
        return pd.DataFrame(columns=["task", "data_hash", "n_hashes"])
    grouped = runs.groupby("task", sort=True)["data_hash"]
    return pd.DataFrame(
        {
            "data_hash": grouped.agg(lambda s: _distinct(s, 16)),
            "n_hashes": grouped.nunique(),
        }
    ).reset_index()


def runs_per_cell(runs: pd.DataFrame) -> pd.DataFrame:
    """Per cell (task, variant, scale, setting): the number of runs and of completed runs."""
    import pandas as pd

    columns = ["task", "variant", "scale", "setting", "runs", "completed"]
    if runs.empty:
        return pd.DataFrame(columns=columns)
    cells = runs.assign(done=runs["status"] == COMPLETED).groupby(["task", "variant", "scale", "setting"])
    return cells.agg(runs=("seed", "count"), completed=("done", "sum")).reset_index()[columns]
