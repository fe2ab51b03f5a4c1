"""`pdelra cta-official aggregate`: Continuous-Time Attention's own runs → tables/cta_official_runs.csv and
tables/cta_official_summary.csv (workflow/rules/cta_official.smk).

- `cta_official_runs.csv`: one row per run, whatever became of it, with the columns of runs.csv
  (pdelra.aggregate.RUN_COLUMNS; the same reader, so a misplaced or broken metrics.json is caught alike).
  The claims of family `cta_official` are judged on it (pdelra.results.claims.cta_official_claims).
- `cta_official_summary.csv` (`summarise`): per task × variant, completed runs' test accuracy mean and
  standard deviation beside the published number (pdelra.paper.CTA_OFFICIAL) and ours − official.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.cta_official_grid import TABLES
from pdelra.runs import RUN_KEYS

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

COMPLETED = "completed"
SUMMARY_COLUMNS = (
    "task",
    "variant",
    "n_runs",
    "n",
    "test_accuracy_mean",
    "test_accuracy_std",
    "official",
    "ours_minus_official",
)


def runs_table(metrics_files: Iterable[Path]) -> pd.DataFrame:
    """cta_official_runs.csv: one row per metrics.json, sorted by the run keys."""
    import pandas as pd

    from pdelra.aggregate import RUN_COLUMNS, MetricsError, read_run

    files = sorted({Path(p) for p in metrics_files})
    if not files:
        raise MetricsError("no metrics.json files to aggregate")
    runs = pd.DataFrame([read_run(p) for p in files], columns=list(RUN_COLUMNS))
    runs = runs.sort_values(list(RUN_KEYS), ignore_index=True)
    duplicates = runs[runs.duplicated(list(RUN_KEYS), keep=False)]
    if len(duplicates):
        raise MetricsError(f"the same run appears twice: {duplicates['metrics_path'].tolist()}")
    runs["test_accuracy"] = pd.to_numeric(runs["test_accuracy"], errors="coerce")
    return runs


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per task × variant (in the runs' order): runs, completed runs, their mean and sample std of test
    accuracy, the published accuracy and ours − official (empty where none is published)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    if runs is not None and len(runs):
        for (task, variant), group in runs.groupby(["task", "variant"], sort=True):
            done = group[group["status"] == COMPLETED]["test_accuracy"].dropna().astype(float)
            mean = done.mean() if len(done) else float("nan")
            official = paper.CTA_OFFICIAL.get(str(task), {}).get(str(variant), float("nan"))
            rows.append(
                {
                    "task": task,
                    "variant": variant,
                    "n_runs": len(group),
                    "n": len(done),
                    "test_accuracy_mean": mean,
                    "test_accuracy_std": done.std(ddof=1) if len(done) > 1 else float("nan"),
                    "official": official,
                    "ours_minus_official": mean - official,
                }
            )
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def aggregate(metrics_files: Iterable[Path], out: Path) -> dict[str, pd.DataFrame]:
    """Write both tables into `out` (atomically each); return them by name."""
    from pdelra.aggregate import write_csv_atomic

    runs = runs_table(metrics_files)
    tables = dict(zip(TABLES, (runs, summarise(runs)), strict=True))
    for name, frame in tables.items():
        write_csv_atomic(frame, Path(out) / f"{name}.csv")
    not_done = int((runs["status"] != COMPLETED).sum())
    log.info("aggregated %d official-CTA runs (%d not completed) into %s", len(runs), not_done, out)
    return tables


def _run(args: argparse.Namespace) -> int:
    aggregate(args.metrics, args.out)
    return 0


def _train_lm(args: argparse.Namespace) -> int:
    from pdelra.data.errors import DataError
    from pdelra.training.runconfig import RunConfigError

    try:
        from pdelra.cta_official_lm import train_from_args

        return train_from_args(
            args.run_config, args.data, args.out, args.checkpoint_dir, args.device, args.allow_cpu
        )
    except (RunConfigError, DataError) as exc:
        log.error("%s", exc)
        return 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cta-official",
        help="tables of Continuous-Time Attention's own experiments (the `cta_official` grid)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cta_official_command", metavar="ACTION", required=True)
    agg = sub.add_parser(
        "aggregate",
        help="the runs' metrics.json → cta_official_runs.csv and cta_official_summary.csv",
        description="Read each run's metrics.json and write cta_official_runs.csv and "
        "cta_official_summary.csv into --out.",
    )
    agg.add_argument("metrics", nargs="+", type=Path, help="metrics.json files of the cta_official runs")
    agg.add_argument("--out", type=Path, required=True, help="folder for the CSV tables (created if missing)")
    agg.set_defaults(func=_run)

    from pdelra.training.cli import add_device_arguments

    train = sub.add_parser(
        "train-lm",
        help="train one WikiText-103 causal-LM run (OfficialCTALM) and write its metrics.json (exit 75: resume)",
        description="One run of the authors' WikiText-103 LM with their recipe (pdelra.cta_official_lm); "
        "exit 0 when completed or diverged, 75 when interrupted after a checkpoint (rerun to resume), 2 for "
        "a bad run config or data.",
    )
    train.add_argument(
        "--run-config",
        required=True,
        metavar="FILE_OR_JSON",
        help="task wikitext103, variant, scale, setting, seed, model, train (pdelra.cta_official_lm)",
    )
    train.add_argument("--data", type=Path, required=True, help="`pdelra preprocess-cta wikitext103` folder")
    train.add_argument("--out", type=Path, required=True, help="run folder for metrics.json")
    train.add_argument("--checkpoint-dir", type=Path, required=True, help="checkpoint folder")
    add_device_arguments(train)
    train.set_defaults(func=_train_lm)
