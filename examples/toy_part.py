"""A related system as a part of the experiment (docs/add-a-related-system.md): this one module, copied into
the project root, and its config section. Its data are the module's constants; its hooks are the functions
below, under the names pdelra.parts.PartModule fixes. A toy "training" measures a score from its run
config."""

import json
from pathlib import Path

import pandas as pd

from pdelra.parts import TrainingJob, TrainingRule, job_asks

NAME = "toy"  # `pdelra part run toy`, the aggregate rule's input, its claims' family; its config section
TABLES = ("toy_runs",)  # what `build` writes into results/{experiment}/tables/ (NAME.csv)
RUNS = "toy/runs"  # its run folders under results/{experiment}
RUN_FILE = "metrics.json"  # each run folder's file its tables are built from
TRAINING = (TrainingRule("toy_train", RUNS),)  # its training rules, run by workflow/rules/parts.smk
HEADING = "## A toy system"  # its section's heading in report.html; index.html lists it too


def training_jobs(config):
    """What the planner counts and prices, and what the workflow runs: one TrainingJob a job. Its run is
    (task, variant, scale, setting, seed); its run config carries `train.batch_size` (the plan shows it);
    then its GPUs and minutes."""
    section = config["toy"]
    return [
        TrainingJob(
            "toy_train",
            ("toy", variant, "h1", "base", seed),
            {"variant": variant, "seed": seed, "gain": section["gain"] if variant == "boosted" else 0.0,
             "train": {"batch_size": 1}},
            0,
            section["runtime"],
            **job_asks(config, {}),
            runs_dir=RUNS,
        )
        for variant in ("plain", "boosted")
        for seed in section["seeds"]
    ]  # fmt: skip


def check(config):
    """Problems of its config section, each one line."""
    return [] if config["toy"].get("seeds") else ["toy.seeds: give at least one seed"]


def run(run_config, out, device):
    """One job (`pdelra part run toy --run-config JSON --out DIR`): writes out/RUN_FILE."""
    score = 0.5 + run_config["gain"] + 0.01 * run_config["seed"]
    (out / RUN_FILE).write_text(json.dumps({**run_config, "score": score, "device": device}))


def build(files, tables):
    """Its tables from its run files (`pdelra part aggregate toy --out TABLES FILE...`)."""
    rows = [json.loads(Path(f).read_text()) for f in files]
    pd.DataFrame(rows).sort_values(["variant", "seed"]).to_csv(tables / "toy_runs.csv", index=False)


def claims(inputs):
    """Rows of claims.csv (pdelra.results.claim_types.CLAIM_COLUMNS) of family NAME, Holm-adjusted within
    it; `inputs` holds its tables by name."""
    runs = inputs.get("toy_runs")
    row = {"claim_id": "toy_boost", "claim": "boosting raises the score", "source": "toy", "family": "toy",
           "kind": "difference", "unit": "score"}  # fmt: skip
    if runs is None or runs.empty:
        return [{**row, "verdict": "not run", "verdict_unadjusted": "not run", "n": 0}]
    gain = runs[runs.variant == "boosted"].score.mean() - runs[runs.variant == "plain"].score.mean()
    return [{**row, "effect": gain, "n": len(runs) // 2, "p_value": 0.001, "verdict": "reproduced",
             "verdict_unadjusted": "reproduced"}]  # fmt: skip


def report(report):
    """Its report section: reads its tables through report.table(NAME) only, like every section."""
    from pdelra.reporting.display import say

    runs = report.table("toy_runs")
    say(f"Toy system: {len(runs)} runs, mean score {runs.score.mean():.3f}." if len(runs) else "_Not run._")
