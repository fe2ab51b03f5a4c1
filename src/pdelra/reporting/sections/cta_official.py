"""Continuous-Time Attention as its authors run it (display only).

Reads, through `report.table`, `cta_official_summary` (pdelra.cta_official.aggregate: official vs ours per
task × variant), `cta_official_lm` (the WikiText-103 LM: a table per ablation, Tables 3-5 and the data
sizes), `cta_operator_comparison` (pdelra.results.related: the official operator, our attention-row CTA and
the paper's After Attention diffusion on one LRA task) and the rows of `claims` whose family is
`cta_official`; computes no statistic. Shows the recipe's deviations from the official scripts and the
table of differences between the official operator and the pipeline's reading of the abstract (the `cta_*`
rows), `pdelra.paper.CTA_OFFICIAL_DIFFERENCES`. Says "not run" when the grid has no runs. The notebook prints
the section's heading.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pdelra import paper
from pdelra.reporting.display import (
    ci_cell,
    claims_display,
    family_claims,
    number,
    say,
    seeds_cell,
    show_lifted,
)
from pdelra.reporting.io import MISSING, is_missing
from pdelra.reporting.sections import Report
from pdelra.runs import BASELINE

FAMILY = "cta_official"
# What `pdelra train` does differently from the official scripts (src/experiments/run_classification.py,
# run_char_level.py at e6f878d), beside the operator and model, which are theirs.
DEVIATIONS = (
    "**Seeds**: the official scripts train one seed (`torch.manual_seed(42)`); here every configured "
    "seed (`cta_official.seeds`, 5 in the paper config), seeded as every pipeline run is "
    "(pdelra.training.seeding), since a verdict needs at least 2 seeds.",
    "**Learning-rate schedule**: theirs warms up linearly from 0.1 × lr over the first 10 % of steps, then "
    "stays constant; `pdelra train` warms up from lr / warm-up steps over the same number of steps (set per "
    "task in the config), then decays by a cosine to 0 at the last step.",
    "**Batches**: theirs pad every example to the maximum length; `pdelra train` trims each batch to its "
    "longest example. Padding is masked in attention, the PDE step and the mean pooling alike, so this "
    "changes no value up to float rounding; the position parameter is the same slice either way.",
    "**WikiText-103 (Tables 3–5)**: `pdelra cta-official train-lm` keeps their schedule (LinearLR from "
    "0.1 × lr over the first 10 % of steps, then constant), float32 and their loss; it adds the test "
    "perplexity at the best-validation weights (they evaluate on validation only), a seeded shuffle per "
    "epoch, and draws the data-size ablation's blocks with each run's seed (`pdelra.data.cta.subset_rows`; "
    "theirs: one `torch.randperm` after seeding 42). Table 3's PDE run, Table 4's 4 steps and Table 5's "
    "diffusion are one configuration, trained once per seed.",
)


def _task(task: Any) -> str:
    return paper.CTA_OFFICIAL_TASK_LABELS.get(str(task), str(task))


def _variant(variant: Any) -> str:
    return (
        "Standard Transformer"
        if variant == BASELINE
        else paper.VARIANT_LABELS.get(str(variant), str(variant))
    )


def _percent(value: Any, signed: bool = False) -> str:
    if is_missing(value):
        return MISSING
    text = f"{100 * float(value):{'+' if signed else ''}.2f}"
    return text.replace("-", "−")


def summary_display(summary: pd.DataFrame) -> pd.DataFrame:
    """cta_official_summary.csv for display: accuracies in %, seeds as "n" or "n of m"."""
    rows = []
    for _, r in summary.iterrows():
        rows.append(
            {
                "Task": _task(r["task"]),
                "Model": _variant(r["variant"]),
                "Seeds": seeds_cell(r["n"], r["n_runs"]),
                "Official (%)": _percent(r["official"]),
                "Ours (%)": _percent(r["test_accuracy_mean"]),
                "Ours sd (pp)": _percent(r["test_accuracy_std"]),
                "Ours − official (pp)": _percent(r["ours_minus_official"], signed=True),
            }
        )
    return pd.DataFrame(rows)


LM_ABLATIONS = {  # cta_official_lm.csv's `ablation` → the table's caption
    "standard vs PDE": "Table 3: standard vs PDE-Transformer (diffusion at the official steps)",
    "steps": "Table 4: PDE steps (diffusion)",
    "type": "Table 5: PDE type at the official steps",
    "data size": "The data-size ablation (run_ablation_datasize.py): a fraction of the training blocks",
}


PERPLEXITY = "{:.2f}"


def lm_display(table: pd.DataFrame) -> pd.DataFrame:
    """Rows of cta_official_lm.csv for display: perplexities to 2 decimals, the fraction in %."""
    rows = []
    for _, r in table.iterrows():
        rows.append(
            {
                "Model": _variant(r["variant"]),
                "PDE steps": number(r["cta_steps"], "{:.0f}"),
                "Training data (%)": number(100 * float(r["data_fraction"]), "{:g}"),
                "Seeds": seeds_cell(r["n"], r["n_runs"]),
                "Official perplexity": number(r["official"], PERPLEXITY),
                "Ours: best val perplexity": number(r["best_val_perplexity_mean"], PERPLEXITY),
                "Ours sd": number(r["best_val_perplexity_std"], PERPLEXITY),
                "Ours: test perplexity": number(r["test_perplexity_mean"], PERPLEXITY),
            }
        )
    return pd.DataFrame(rows)


def differences_table() -> pd.DataFrame:
    """How the official operator differs from our reading of the abstract, as rows (What, Our reading of the
    abstract, The official code): `pdelra.paper.CTA_OFFICIAL_DIFFERENCES`, data, not text parsed."""
    return pd.DataFrame(
        paper.CTA_OFFICIAL_DIFFERENCES,
        columns=["What", "Our reading of the abstract (cta_*)", "The official code"],
    )


def operator_display(table: pd.DataFrame) -> pd.DataFrame:
    """cta_operator_comparison for display: one row per system, accuracy and Δ vs its backbone's baseline."""
    return pd.DataFrame(
        [
            {
                "Task": paper.TASK_LABELS.get(r["task"], r["task"]),
                "Seeds": seeds_cell(r["n"], None),
                "System": r["system"],
                "Backbone": BACKBONE_LABELS.get(r["backbone"], r["backbone"]),
                "Test accuracy [95 % CI]": ci_cell(r, "test_accuracy", "{:.4f}"),
                "Δ vs its backbone's baseline [95 % CI]": ci_cell(r, "delta_vs_own_baseline", "{:+.4f}"),
            }
            for _, r in table.iterrows()
        ]
    )


BACKBONE_LABELS = {"pdelra": "pre-LN (the pipeline's)", "official_cta": "post-LN (CTA's official)"}


def render(report: Report) -> None:
    """Display and save the section. No heading: the notebook prints it."""
    out_dir = report.out_dir
    summary = report.table("cta_official_summary")
    if summary.empty:
        say(
            "_Not run: no `cta_official_summary.csv`; add a `cta_official` section to the config "
            "(config/README.md)._"
        )
    else:
        say(
            "The authors' model (`backbone: official_cta`: post-LN layers, masked mean pooling) without "
            "(standard) and with their diffusion step after each layer, on their data and tokenisation, "
            "trained with their recipe by `pdelra train`. Accuracy: the test split at the best epoch, as "
            "their scripts report it (they evaluate on test every epoch)."
        )
        show_lifted(
            summary_display(summary),
            ("Seeds",),
            out_dir,
            "cta_official_summary",
            "Official accuracy beside ours (mean over seeds) per task and model",
        )
    lm = report.table("cta_official_lm")
    if lm.empty:
        say("_WikiText-103 (Tables 3–5): not run; add `cta_official.wikitext103` to the config._")
    else:
        say(
            "The authors' causal LM (`OfficialCTALM`: causal attention, causal stencils) on WikiText-103 "
            "blocks of their tokenizer, trained with their recipe by `pdelra cta-official train-lm`. "
            "Perplexity: exp of the mean next-token nats over the validation split at the best epoch (their "
            "`min(history['val_ppl'])`), mean over seeds; test at the best-validation weights."
        )
        for key, caption in LM_ABLATIONS.items():
            rows = lm[lm["ablation"] == key]
            if len(rows):
                name = "cta_official_lm_" + key.replace(" ", "_").lower()
                show_lifted(
                    lm_display(rows), ("Seeds", "Training data (%)", "PDE steps"), out_dir, name, caption
                )
    operators = report.table("cta_operator_comparison")
    if operators.empty:
        say("_The operators on an LRA task: not run; add the grid `cta_lra` to `run_grids`._")
    else:
        say(
            "**The operators on an LRA task.** The official operator *is* diffusion of the hidden states "
            "after each layer, close to the paper's After Attention position; our reading of CTA's abstract "
            "evolves the attention rows instead. All three on the same task, seeds and data; each is "
            "compared with the no-PDE baseline of its own backbone (paired by seed): the backbones differ."
        )
        show_lifted(
            operator_display(operators),
            ("Seeds", "Task"),
            out_dir,
            "cta_operator_comparison",
            "The official CTA operator, our attention-row CTA and After Attention diffusion on one LRA task: "
            "test accuracy (mean over seeds) and Δ vs the baseline of the same backbone",
        )
    claims = report.table("claims")
    rows = claims if claims.empty else family_claims(claims, FAMILY)
    if rows.empty:
        say(f"_Not run: `claims.csv` has no `{FAMILY}` claims._")
    else:
        show_lifted(
            claims_display(rows),
            ("n", "Method"),
            out_dir,
            "cta_official_claims",
            f"Continuous-Time Attention's own numbers as claims: our effect with its 95 % CI over seeds and "
            f"the verdict, Holm-adjusted within the family `{FAMILY}` (claims.csv)",
        )
    say(
        "**Where our recipe departs from the official scripts**\n\n" + "\n".join(f"- {d}" for d in DEVIATIONS)
    )
    show_lifted(
        differences_table(),
        (),
        out_dir,
        "cta_official_differences",
        "The official operator and model (pdelra.nn.cta_official) against the pipeline's reading of the "
        "abstract (the cta_* variants), read in their code",
    )
