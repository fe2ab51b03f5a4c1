"""`pdelra cta-official aggregate`: Continuous-Time Attention's own runs → tables/cta_official_runs.csv,
tables/cta_official_summary.csv and tables/cta_official_lm.csv (workflow/rules/cta_official.smk).

What each table holds is the command's description, `pdelra cta-official --help` (pdelra.cta_official.cli).
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.atomic import write_csv_atomic
from pdelra.cta_official.grid import LM_PDE, LM_TASK, OFFICIAL_LM_STEPS, steps_setting
from pdelra.cta_official.grid import TABLES as CTA_OFFICIAL_TABLES
from pdelra.runs import BASELINE, COMPLETED, RUN_KEYS
from pdelra.steps.aggregate import RUN_COLUMNS, MetricsError, read_run

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

# The LM's columns of cta_official_runs.csv, read from its metrics.json (pdelra.cta_official.lm).
LM_COLUMNS = ("best_val_perplexity", "test_perplexity", "final_val_perplexity", "data_fraction")
LM_TABLE_COLUMNS = (
    "ablation",
    "variant",
    "setting",
    "cta_steps",
    "data_fraction",
    "n_runs",
    "n",
    "best_val_perplexity_mean",
    "best_val_perplexity_std",
    "test_perplexity_mean",
    "official",
)
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

    files = sorted({Path(p) for p in metrics_files})
    if not files:
        raise MetricsError("no metrics.json files to aggregate")
    runs = pd.DataFrame([read_run(p) for p in files], columns=list(RUN_COLUMNS))
    runs = runs.sort_values(list(RUN_KEYS), ignore_index=True)
    duplicates = runs[runs.duplicated(list(RUN_KEYS), keep=False)]
    if len(duplicates):
        raise MetricsError(f"the same run appears twice: {duplicates['metrics_path'].tolist()}")
    runs["test_accuracy"] = pd.to_numeric(runs["test_accuracy"], errors="coerce")
    lm = pd.DataFrame([_lm_fields(Path(p)) for p in runs["metrics_path"]], columns=[*LM_COLUMNS, "cta_steps"])
    for column in lm.columns:
        runs[column] = pd.to_numeric(lm[column], errors="coerce")
    return runs


def _lm_fields(path: Path) -> dict[str, Any]:
    """The LM's perplexities, fraction and steps from one metrics.json (None where it has none)."""
    import json

    metrics = json.loads(path.read_text())
    if metrics.get("task") != LM_TASK:
        return {}
    model = (metrics.get("run_config") or {}).get("model") or {}
    return {**{k: metrics.get(k) for k in LM_COLUMNS}, "cta_steps": model.get("cta_steps")}


ABLATIONS = ("standard vs PDE", "steps", "type", "data size")  # Tables 3, 4, 5 and the data-size script


def ablations(variant: str, setting: str, official_steps: int = OFFICIAL_LM_STEPS) -> list[str]:
    """The official LM experiments a (variant, setting) cell belongs to: `standard vs PDE` (Table 3:
    none/base and diffusion at the official steps), `steps` (Table 4: diffusion at steps{n}), `type`
    (Table 5: every kind at the official steps), `data size` (data{p}). Diffusion at the official steps is
    in the first three."""
    official = steps_setting(official_steps)
    if setting.startswith("data"):
        return ["data size"]
    if variant == BASELINE:
        return ["standard vs PDE"]
    if variant == LM_PDE:
        return ["standard vs PDE", "steps", "type"] if setting == official else ["steps"]
    return ["type"]


def published(ablation: str, variant: str, setting: str) -> float:
    """The paper's perplexity for a cell in one ablation (Table 3, 4 or 5); NaN where it gives none (8
    steps: "unstable"; the data-size ablation has no table of numbers)."""
    if ablation == "standard vs PDE":
        return paper.CTA_OFFICIAL[LM_TASK].get(variant, math.nan)
    if ablation == "steps":
        return paper.CTA_OFFICIAL_STEPS.get(int(setting.removeprefix("steps")), math.nan)
    if ablation == "type":
        return paper.CTA_OFFICIAL_TYPES.get(variant, math.nan)
    return math.nan


def summarise_lm(runs: pd.DataFrame | None, official_steps: int = OFFICIAL_LM_STEPS) -> pd.DataFrame:
    """cta_official_lm.csv: per ablation (ABLATIONS' order) and WikiText-103 cell (variant × setting, by
    fraction, steps, variant): runs, completed runs, the mean and sample sd of their best validation
    perplexity, the mean test perplexity and the published number of that table. A cell in several
    ablations (diffusion at the official steps) has a row in each, with the same statistics."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    lm = None if runs is None or not len(runs) else runs[runs["task"] == LM_TASK]
    if lm is not None and len(lm):
        for (variant, setting), group in lm.groupby(["variant", "setting"], sort=True):
            done = group[group["status"] == COMPLETED]
            best = pd.to_numeric(done["best_val_perplexity"], errors="coerce").dropna()
            test = pd.to_numeric(done["test_perplexity"], errors="coerce").dropna()
            fraction = pd.to_numeric(group["data_fraction"], errors="coerce").dropna()
            steps = pd.to_numeric(group["cta_steps"], errors="coerce").dropna()
            cell = {
                "variant": variant,
                "setting": setting,
                "cta_steps": int(steps.iloc[0]) if variant != BASELINE and len(steps) else math.nan,
                "data_fraction": float(fraction.iloc[0]) if len(fraction) else 1.0,
                "n_runs": len(group),
                "n": len(best),
                "best_val_perplexity_mean": best.mean() if len(best) else math.nan,
                "best_val_perplexity_std": best.std(ddof=1) if len(best) > 1 else math.nan,
                "test_perplexity_mean": test.mean() if len(test) else math.nan,
            }
            for name in ablations(str(variant), str(setting), official_steps):
                official = published(name, str(variant), str(setting))
                rows.append({"ablation": name, **cell, "official": official})
    frame = pd.DataFrame(rows, columns=list(LM_TABLE_COLUMNS))
    if len(frame):
        rank = {name: i for i, name in enumerate(ABLATIONS)}
        frame = frame.assign(_rank=frame["ablation"].map(rank))
        frame = frame.sort_values(
            ["_rank", "data_fraction", "cta_steps", "variant"], na_position="first", ignore_index=True
        ).drop(columns="_rank")
    return frame


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per classification task × variant (in the runs' order): runs, completed runs, their mean and sample
    std of test accuracy, the published accuracy and ours − official (empty where none is published)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    if runs is not None and len(runs):
        classification = runs[runs["task"] != LM_TASK]  # the LM has perplexities: summarise_lm
        for (task, variant), group in classification.groupby(["task", "variant"], sort=True):
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
    runs = runs_table(metrics_files)
    tables = dict(zip(CTA_OFFICIAL_TABLES, (runs, summarise(runs), summarise_lm(runs)), strict=True))
    for name, frame in tables.items():
        write_csv_atomic(frame, Path(out) / f"{name}.csv")
    not_done = int((runs["status"] != COMPLETED).sum())
    log.info("aggregated %d official-CTA runs (%d not completed) into %s", len(runs), not_done, out)
    return tables


def command(args: argparse.Namespace) -> int:
    """`pdelra cta-official aggregate` (declared in pdelra.cta_official.cli)."""
    aggregate(args.metrics, args.out)
    return 0
