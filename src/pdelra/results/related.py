"""The related systems' results: PhysQK-AD's language model and Continuous-Time Attention's ablation.

Pure functions, pandas in and out; `summarise(lm_runs, lm_dynamics, runs, cost)` returns every table by name
(`TABLES`), which `pdelra aggregate` writes as `{name}.csv` and the report's related section only displays.
Columns are machine names (units in the name, CIs as `*_ci_low`/`*_ci_high`, 95 %); an absent or empty
input gives an empty table with the same columns.

PhysQK-AD's LM (`lm_runs.csv`, `lm_dynamics.csv`; pdelra.lm):
- `lm_eval_loss`: test loss per condition in the `base` setting (mean and t-interval over seeds),
  bits/byte, and the difference to MHA paired by seed, beside the seed's reported ΔEval;
- `lm_alpha_ablation`: PhysQK-AD per α allocation (`base` = joint per-layer α, the method) and its paired
  difference to joint learning, beside the seed's range (simpler allocations win by 0.43–0.51 nats);
- `lm_layers`: the final α = σ(w_α), η = exp(w_η) and eff_Pe per allocation and layer (layers numbered
  from 0 as in the model, blocks.0 …), mean and interval over seeds;
- `lm_layer_trajectory`: the same per logged optimizer step (the report's figure `lm_dynamics`).

Continuous-Time Attention (`runs.csv`, `cost.csv`; grid `cta`, pseudo-time steps as settings `stepsN`):
- `cta_type_steps`: test accuracy per task × PDE type × steps and its paired difference to the baseline
  (`none`, h1, base), plus the baseline's own row — only for tasks that have CTA runs; each row's epoch
  budget (`max_epochs`, the largest configured over its runs) and the most epochs a run trained, since a
  steps setting may train for another budget than the default steps' runs (the demo's do);
- `cta_cost`: step time and peak memory with their overhead over the baseline, and each type's attention
  memory class (reaction–diffusion materialises the L × L matrix: O(L²); the others stay fused: O(L));
- `cta_operator_comparison` (grid `cta_lra`, setting `official`): on each LRA task with runs of the authors'
  own model, the official operator (diffusion of the hidden states after every layer, in their post-LN
  backbone) beside our attention-row CTA and the paper's After Attention diffusion (in the pipeline's pre-LN
  backbone): test accuracy and each one's paired difference to the baseline of its own backbone.

Intervals: `pdelra.results.stats.one_sample` (Student t over seeds) and `paired` (paired t over shared seeds,
Welch without two shared seeds).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.results.stats import Estimate, one_sample, paired
from pdelra.runs import BASE_SETTING, BASELINE, COMPLETED, MAIN_SCALE

if TYPE_CHECKING:
    import pandas as pd

MHA = "mha"
AD = "physqk_ad"
CONDITIONS = (MHA, "physqk", AD)  # display order
CTA_TYPES = ("cta_diffusion", "cta_wave", "cta_reaction_diffusion", "cta_advection_diffusion")
O_L2 = frozenset({"cta_reaction_diffusion"})  # materialises the L × L attention matrix
# pdelra.nn.model.ModelConfig.cta_steps: the pseudo-time steps of a CTA run in the `base` setting (a test
# checks they agree; importing pdelra.nn.model here would pull torch into `pdelra aggregate`).
DEFAULT_CTA_STEPS = 3
LAYER_QUANTITIES = ("alpha", "eta", "eff_pe")

TABLES = (
    "lm_eval_loss",
    "lm_alpha_ablation",
    "lm_layers",
    "lm_layer_trajectory",
    "cta_type_steps",
    "cta_cost",
    "cta_operator_comparison",
)


def _ci(name: str) -> tuple[str, str, str]:
    return name, f"{name}_ci_low", f"{name}_ci_high"


# lm_runs.csv's columns these tables read (pdelra.lm.aggregate.RUN_COLUMNS has them all).
LM_RUN_COLUMNS = (
    "task",
    "variant",
    "scale",
    "setting",
    "seed",
    "status",
    "test_loss_nats",
    "test_bits_per_byte",
    "epochs",
    "corpus",
)
LM_EVAL_COLUMNS = (
    "task",
    "scale",
    "variant",
    "corpus",
    "max_epochs_run",
    "n",
    "n_runs",
    *_ci("loss_nats"),
    "bits_per_byte",
    *_ci("delta_vs_mha_nats"),
    "delta_method",
    "paper_delta_nats",
)
ABLATION_COLUMNS = (
    "task",
    "scale",
    "setting",
    "n",
    "n_runs",
    *_ci("loss_nats"),
    *_ci("delta_vs_joint_nats"),
    "delta_method",
    "paper_delta_nats_low",
    "paper_delta_nats_high",
)
LAYER_KEYS = ("task", "scale", "setting", "layer")
LAYER_COLUMNS = (*LAYER_KEYS, "final_step", "n", *(c for q in LAYER_QUANTITIES for c in _ci(q)))
TRAJECTORY_COLUMNS = (*LAYER_KEYS, "step", "n", *(c for q in LAYER_QUANTITIES for c in _ci(q)))
CTA_COLUMNS = (
    "task",
    "variant",
    "scale",
    "setting",
    "pseudo_time_steps",
    "max_epochs",
    "max_epochs_run",
    "n",
    "n_runs",
    *_ci("test_accuracy"),
    *_ci("delta_vs_baseline"),
    "delta_method",
)
# The rows of cta_operator_comparison: (system, variant, setting, backbone, baseline variant), display order.
OFFICIAL_SETTING = "official"  # grid cta_lra: model.backbone official_cta
OPERATOR_ROWS = (
    ("pre-LN baseline", BASELINE, BASE_SETTING, "pdelra"),
    ("After Attention diffusion (PDE-Transformer)", "after_attention", BASE_SETTING, "pdelra"),
    ("attention-row CTA (our reading of the abstract)", "cta_diffusion", BASE_SETTING, "pdelra"),
    ("official backbone, no PDE", BASELINE, OFFICIAL_SETTING, "official_cta"),
    (
        "official operator: diffusion after each layer",
        "cta_official_diffusion",
        OFFICIAL_SETTING,
        "official_cta",
    ),
)
OPERATOR_COLUMNS = (
    "task",
    "system",
    "variant",
    "setting",
    "backbone",
    "n",
    *_ci("test_accuracy"),
    *_ci("delta_vs_own_baseline"),
    "delta_method",
)
COST_COLUMNS = (
    "task",
    "variant",
    "scale",
    "setting",
    "pseudo_time_steps",
    "n",
    "median_step_time_s",
    "peak_memory_mb",
    "wall_time_s",
    "time_overhead_pct",
    "memory_overhead_pct",
    "attention_memory",
)


# ----------------------------------------------------------------------------------------------------------
# Helpers


def _frame(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows, columns=list(columns))


def _present(table: pd.DataFrame | None, *columns: str) -> bool:
    """True when `table` has rows and every named column (a CSV written from an empty frame has neither)."""
    return table is not None and len(table) > 0 and all(c in table.columns for c in columns)


def _with_setting(table: pd.DataFrame) -> pd.DataFrame:
    """Tables written before grid settings existed have no `setting` column: every run was `base`."""
    return table if "setting" in table.columns else table.assign(setting=BASE_SETTING)


def _completed(runs: pd.DataFrame, column: str) -> pd.DataFrame:
    return runs[(runs["status"] == COMPLETED) & runs[column].notna()]


def _by_seed(rows: pd.DataFrame, column: str) -> dict[int, float]:
    return dict(zip(rows["seed"].astype(int), rows[column].astype(float), strict=True))


def _columns(name: str, estimate: Estimate) -> dict[str, float]:
    return {name: estimate.effect, f"{name}_ci_low": estimate.low, f"{name}_ci_high": estimate.high}


def _no_difference(name: str) -> dict[str, Any]:
    return dict.fromkeys(_ci(name), math.nan) | {"delta_method": ""}


def _difference(name: str, own: pd.DataFrame, reference: pd.DataFrame, column: str) -> dict[str, Any]:
    estimate = paired(_by_seed(own, column), _by_seed(reference, column))
    return _columns(name, estimate) | {"delta_method": estimate.method}


def _largest(rows: pd.DataFrame, column: str) -> float:
    """The largest `column` over `rows`; NaN without values or the column (older runs.csv files)."""
    return float(rows[column].max()) if column in rows.columns and rows[column].notna().any() else math.nan


def pseudo_time_steps(setting: str) -> float:
    """A CTA grid setting's pseudo-time steps: `stepsN` → N, `base` → the model's default; NaN otherwise."""
    if setting == BASE_SETTING:
        return float(DEFAULT_CTA_STEPS)
    match = re.fullmatch(r"steps(\d+)", str(setting))
    return float(match.group(1)) if match else math.nan


def _sorted(table: pd.DataFrame, keys: list[str], rank: dict[str, Callable[[Any], Any]]) -> pd.DataFrame:
    """`table` sorted by `keys`, where a key in `rank` sorts by that function of its value."""
    if table.empty:
        return table.reset_index(drop=True)
    return table.sort_values(
        keys, key=lambda s: s.map(rank[s.name]) if s.name in rank else s, kind="stable"
    ).reset_index(drop=True)


# ----------------------------------------------------------------------------------------------------------
# PhysQK-AD's language model


def lm_eval_table(lm_runs: pd.DataFrame | None) -> pd.DataFrame:
    """Per (task, scale, condition) in the base setting: test loss mean/CI, bits/byte, Δ vs MHA (paired)."""
    if not _present(lm_runs, *LM_RUN_COLUMNS):
        return _frame([], LM_EVAL_COLUMNS)
    assert lm_runs is not None
    base = lm_runs[lm_runs["setting"] == BASE_SETTING]
    done = _completed(base, "test_loss_nats")
    rows = []
    for (task, scale, variant), group in base.groupby(["task", "scale", "variant"], sort=False):
        ok = done[(done["task"] == task) & (done["scale"] == scale)]
        own, mha = ok[ok["variant"] == variant], ok[ok["variant"] == MHA]
        loss = one_sample(own["test_loss_nats"].tolist())
        corpora = sorted(map(str, group["corpus"].dropna().unique()))
        row = {
            "task": task,
            "scale": scale,
            "variant": variant,
            "corpus": ", ".join(corpora),
            "max_epochs_run": own["epochs"].max(),
            "n": loss.n,
            "n_runs": len(group),
            **_columns("loss_nats", loss),
            "bits_per_byte": own["test_bits_per_byte"].mean(),
            **_no_difference("delta_vs_mha_nats"),
            "paper_delta_nats": paper.PHYSQK_AD_DELTA.get(variant, math.nan),
        }
        if variant != MHA and len(mha):
            row |= _difference("delta_vs_mha_nats", own, mha, "test_loss_nats")
        rows.append(row)
    order = {v: i for i, v in enumerate(CONDITIONS)}
    table = _frame(rows, LM_EVAL_COLUMNS)
    return _sorted(table, ["task", "scale", "variant"], {"variant": lambda v: order.get(v, len(order))})


def ablation_table(lm_runs: pd.DataFrame | None) -> pd.DataFrame:
    """PhysQK-AD per α allocation: loss mean/CI and the paired difference to joint learning (`base`)."""
    if not _present(lm_runs, *LM_RUN_COLUMNS):
        return _frame([], ABLATION_COLUMNS)
    assert lm_runs is not None
    ad = lm_runs[lm_runs["variant"] == AD]
    done = _completed(ad, "test_loss_nats")
    low, high = sorted(-g for g in paper.PHYSQK_AD_ABLATION_GAIN)  # "beat joint by 0.43–0.51": Δ < 0
    rows = []
    for (task, scale, setting), group in ad.groupby(["task", "scale", "setting"], sort=True):
        same = done[(done["task"] == task) & (done["scale"] == scale)]
        own, joint = same[same["setting"] == setting], same[same["setting"] == BASE_SETTING]
        loss = one_sample(own["test_loss_nats"].tolist())
        row = {
            "task": task,
            "scale": scale,
            "setting": setting,
            "n": loss.n,
            "n_runs": len(group),
            **_columns("loss_nats", loss),
            **_no_difference("delta_vs_joint_nats"),
            "paper_delta_nats_low": math.nan if setting == BASE_SETTING else low,
            "paper_delta_nats_high": math.nan if setting == BASE_SETTING else high,
        }
        if setting != BASE_SETTING and len(joint):
            row |= _difference("delta_vs_joint_nats", own, joint, "test_loss_nats")
        rows.append(row)
    table = _frame(rows, ABLATION_COLUMNS)
    return _sorted(table, ["task", "scale", "setting"], {"setting": lambda s: (s != BASE_SETTING, s)})


def final_layers(dynamics: pd.DataFrame) -> pd.DataFrame:
    """α, η, eff_Pe per run and layer at that run's last logged step."""
    if dynamics.empty:
        return dynamics
    keys = ["task", "variant", "scale", "setting", "seed"]
    last = dynamics.groupby(keys)["step"].transform("max")
    return dynamics[dynamics["step"] == last].reset_index(drop=True)


def _layer_rows(dynamics: pd.DataFrame, by: list[str]) -> list[dict[str, Any]]:
    rows = []
    for key, group in dynamics.groupby(by, sort=True):
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        for quantity in LAYER_QUANTITIES:
            estimate = one_sample(group[quantity].tolist())
            row |= _columns(quantity, estimate)
        row["n"] = group["seed"].nunique()
        rows.append(row)
    return rows


def _physqk_ad_dynamics(dynamics: pd.DataFrame | None) -> pd.DataFrame | None:
    if not _present(dynamics, *LAYER_KEYS, "variant", "seed", "step", *LAYER_QUANTITIES):
        return None
    assert dynamics is not None
    return dynamics[dynamics["variant"] == AD]


def layer_table(dynamics: pd.DataFrame | None) -> pd.DataFrame:
    """Per (task, scale, allocation, layer): mean and 95 % CI over seeds of the final α, η and eff_Pe."""
    ad = _physqk_ad_dynamics(dynamics)
    if ad is None or ad.empty:
        return _frame([], LAYER_COLUMNS)
    final = final_layers(ad)
    rows = _layer_rows(final, list(LAYER_KEYS))
    steps = final.groupby(list(LAYER_KEYS))["step"].max()
    for row in rows:
        row["final_step"] = int(steps[tuple(row[k] for k in LAYER_KEYS)])
    table = _frame(rows, LAYER_COLUMNS)
    return _sorted(table, list(LAYER_KEYS), {"setting": lambda s: (s != BASE_SETTING, s)})


def layer_trajectory_table(dynamics: pd.DataFrame | None) -> pd.DataFrame:
    """Per (task, scale, allocation, layer, logged step): mean and 95 % CI over seeds of α, η, eff_Pe."""
    ad = _physqk_ad_dynamics(dynamics)
    if ad is None or ad.empty:
        return _frame([], TRAJECTORY_COLUMNS)
    table = _frame(_layer_rows(ad, [*LAYER_KEYS, "step"]), TRAJECTORY_COLUMNS)
    return _sorted(table, [*LAYER_KEYS, "step"], {"setting": lambda s: (s != BASE_SETTING, s)})


# ----------------------------------------------------------------------------------------------------------
# Continuous-Time Attention's ablation


def _cta_tasks(table: pd.DataFrame) -> set[str]:
    return set(table.loc[table["variant"].isin(CTA_TYPES), "task"])


def _is_baseline(table: pd.DataFrame) -> pd.Series:
    return (
        (table["variant"] == BASELINE) & (table["scale"] == MAIN_SCALE) & (table["setting"] == BASE_SETTING)
    )


def _cta_order(table: pd.DataFrame) -> pd.DataFrame:
    """Tasks in the paper's order, the baseline first, then the PDE types and steps in their own order."""
    rank = {v: i for i, v in enumerate((BASELINE, *CTA_TYPES))}
    tasks = {t: i for i, t in enumerate(paper.TASKS)}
    return _sorted(
        table,
        ["task", "variant", "pseudo_time_steps", "setting"],
        {"task": lambda t: (tasks.get(t, len(tasks)), t), "variant": lambda v: rank.get(v, len(rank))},
    )


def cta_table(runs: pd.DataFrame | None) -> pd.DataFrame:
    """Per task × CTA type × setting: accuracy mean/CI over seeds and Δ vs the baseline (paired by seed),
    with the baseline's own accuracy row for every task that has CTA runs."""
    if not _present(runs, "task", "variant", "scale", "seed", "status", "test_accuracy"):
        return _frame([], CTA_COLUMNS)
    assert runs is not None
    runs = _with_setting(runs)
    tasks = _cta_tasks(runs)
    runs = runs[runs["task"].isin(tasks) & (runs["variant"].isin(CTA_TYPES) | _is_baseline(runs))]
    done = _completed(runs, "test_accuracy")
    rows = []
    for (task, variant, scale, setting), group in runs.groupby(["task", "variant", "scale", "setting"]):
        same = done[done["task"] == task]
        own = same[(same["variant"] == variant) & (same["scale"] == scale) & (same["setting"] == setting)]
        base = same[_is_baseline(same)]
        accuracy = one_sample(own["test_accuracy"].tolist())
        row = {
            "task": task,
            "variant": variant,
            "scale": scale,
            "setting": setting,
            "pseudo_time_steps": math.nan if variant == BASELINE else pseudo_time_steps(setting),
            "max_epochs": _largest(group, "max_epochs"),
            "max_epochs_run": _largest(own, "epochs"),
            "n": accuracy.n,
            "n_runs": len(group),
            **_columns("test_accuracy", accuracy),
            **_no_difference("delta_vs_baseline"),
        }
        if variant != BASELINE and len(base):
            row |= _difference("delta_vs_baseline", own, base, "test_accuracy")
        rows.append(row)
    return _cta_order(_frame(rows, CTA_COLUMNS))


def cta_cost_table(cost: pd.DataFrame | None) -> pd.DataFrame:
    """cost.csv's CTA rows and the baseline's (tasks with CTA runs only), with each type's memory class."""
    if not _present(cost, "task", "variant", "scale"):
        return _frame([], COST_COLUMNS)
    assert cost is not None
    cost = _with_setting(cost)
    keep = cost[
        cost["task"].isin(_cta_tasks(cost)) & (cost["variant"].isin(CTA_TYPES) | _is_baseline(cost))
    ].copy()
    keep["pseudo_time_steps"] = [
        math.nan if v == BASELINE else pseudo_time_steps(s)
        for v, s in zip(keep["variant"], keep["setting"], strict=True)
    ]
    keep["attention_memory"] = [
        "" if v == BASELINE else "O(L²): materialised" if v in O_L2 else "O(L): fused"
        for v in keep["variant"]
    ]
    table = keep.reindex(columns=list(COST_COLUMNS))
    return _cta_order(table)


def cta_operator_table(runs: pd.DataFrame | None) -> pd.DataFrame:
    """Per task with runs in the `official` setting: each row of OPERATOR_ROWS that has runs, its accuracy
    (mean, t-interval over seeds) and its paired difference to the no-PDE baseline of the same backbone."""
    if not _present(runs, "task", "variant", "scale", "seed", "status", "test_accuracy"):
        return _frame([], OPERATOR_COLUMNS)
    assert runs is not None
    runs = _with_setting(runs)
    runs = runs[runs["scale"] == MAIN_SCALE]
    done = _completed(runs, "test_accuracy")
    tasks = [t for t in paper.TASKS if ((runs["task"] == t) & (runs["setting"] == OFFICIAL_SETTING)).any()]
    rows = []
    for task in tasks:
        on_task = done[done["task"] == task]

        def cell(variant: str, setting: str, on_task: pd.DataFrame = on_task) -> pd.DataFrame:
            return on_task[(on_task["variant"] == variant) & (on_task["setting"] == setting)]

        for system, variant, setting, backbone in OPERATOR_ROWS:
            own = cell(variant, setting)
            if own.empty:
                continue
            accuracy = one_sample(own["test_accuracy"].tolist())
            row = {"task": task, "system": system, "variant": variant, "setting": setting,
                   "backbone": backbone, "n": accuracy.n, **_columns("test_accuracy", accuracy),
                   **_no_difference("delta_vs_own_baseline")}  # fmt: skip
            baseline = cell(BASELINE, setting)
            if variant != BASELINE and len(baseline):
                row |= _difference("delta_vs_own_baseline", own, baseline, "test_accuracy")
            rows.append(row)
    return _frame(rows, OPERATOR_COLUMNS)


# ----------------------------------------------------------------------------------------------------------
# Every table


def summarise(
    lm_runs: pd.DataFrame | None,
    lm_dynamics: pd.DataFrame | None,
    runs: pd.DataFrame | None,
    cost: pd.DataFrame | None,
) -> dict[str, pd.DataFrame]:
    """Every related-systems table by name (`TABLES`); absent inputs (None or empty) give empty tables."""
    tables = {
        "lm_eval_loss": lm_eval_table(lm_runs),
        "lm_alpha_ablation": ablation_table(lm_runs),
        "lm_layers": layer_table(lm_dynamics),
        "lm_layer_trajectory": layer_trajectory_table(lm_dynamics),
        "cta_type_steps": cta_table(runs),
        "cta_cost": cta_cost_table(cost),
        "cta_operator_comparison": cta_operator_table(runs),
    }
    assert tuple(tables) == TABLES
    return tables
