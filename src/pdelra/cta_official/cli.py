"""`pdelra cta-official aggregate | train-lm`: the subcommands of Continuous-Time Attention's own experiments.

Only argparse here: each handler is imported when its command runs (pdelra.cta_official.aggregate for the
tables, pdelra.cta_official.lm for the LM trainer, which imports torch).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdelra.training.cli import add_lm_train_arguments

# What the tables hold: `pdelra cta-official --help`.
DESCRIPTION = """\
`pdelra cta-official aggregate`: Continuous-Time Attention's own runs → tables/cta_official_runs.csv,
tables/cta_official_summary.csv and tables/cta_official_lm.csv (workflow/rules/cta_official.smk); and
`pdelra cta-official train-lm` (pdelra.cta_official.lm), the WikiText-103 LM trainer.

- `cta_official_runs.csv`: one row per run, whatever became of it, with the columns of runs.csv
  (pdelra.steps.aggregate.RUN_COLUMNS; the same reader, so a misplaced or broken metrics.json is caught alike)
  and the LM's `best_val_perplexity`, `test_perplexity`, `final_val_perplexity`, `data_fraction` and
  `cta_steps` (empty for classification). The claims of family `cta_official` are judged on it
  (pdelra.results.catalogue.cta.cta_official_claims).
- `cta_official_summary.csv` (`summarise`): per classification task × variant, completed runs' test
  accuracy mean and standard deviation beside the published number (pdelra.paper.CTA_OFFICIAL) and ours −
  official.
- `cta_official_lm.csv` (`summarise_lm`): Tables 3-5 and the data-size ablation, a row per ablation and
  WikiText-103 cell (variant × setting): its PDE steps and fraction of the training blocks, completed runs'
  best validation perplexity (mean, sd) and test perplexity (mean), and the published perplexity of that
  table where the paper gives one.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cta-official",
        help="tables of Continuous-Time Attention's own experiments (the `cta_official` grid)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cta_official_command", metavar="ACTION", required=True)
    agg = sub.add_parser(
        "aggregate",
        help="the runs' metrics.json → cta_official_runs.csv, cta_official_summary.csv, cta_official_lm.csv",
        description="Read each run's metrics.json and write cta_official_runs.csv, "
        "cta_official_summary.csv and cta_official_lm.csv into --out.",
    )
    agg.add_argument("metrics", nargs="+", type=Path, help="metrics.json files of the cta_official runs")
    agg.add_argument("--out", type=Path, required=True, help="folder for the CSV tables (created if missing)")
    agg.set_defaults(handler="pdelra.cta_official.aggregate:command")

    train = sub.add_parser(
        "train-lm",
        help="train one WikiText-103 LM run (OfficialCTALM), write its metrics.json (exit 75: resume)",
        description="One run of the authors' WikiText-103 LM with their recipe (pdelra.cta_official.lm); "
        "exit 0 when completed or diverged, 75 when interrupted after a checkpoint (rerun to resume), 2 for "
        "a bad run config or data.",
    )
    add_lm_train_arguments(
        train,
        "pdelra.cta_official.lm",
        "task wikitext103, variant, scale, setting, seed, model, train (pdelra.cta_official.lm)",
        "`pdelra preprocess-cta wikitext103` folder",
    )
