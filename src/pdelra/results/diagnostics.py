"""The diagnostics' tables and the mechanism test, from `diagnostics.csv` (`pdelra diagnose`) and `runs.csv`.

Pure pandas in and out; `summarise(diagnostics, runs)` returns every table by name for `pdelra aggregate` to
write as CSV, and the report section only displays them.

Tables
- `diagnostics_per_position`: per (task, variant, scale, setting), means over blocks then seeds of the run
  means: the trained and probe commutators, the trained one per unit α (`commutator_per_alpha`, see below),
  the roughness reduction 1 − rel_out/rel_in of the trained operators, perturbation/bound, α, and the
  insertion effect on the logits beside the composed bound.
- `diagnostics_per_block`: the same commutators per (task, variant, scale, setting, kind, block), seed means
  (the heat maps' cells).
- `diagnostics_depth`: relative roughness of the residual stream entering each block (and leaving the last),
  per run (the depth profile).
- `diagnostics_bound`: the compositional bound, per (task, variant, scale, setting, kind, position): the
  measured ‖Δlogits‖ when D is removed (trained) or inserted (probe), the composed bound amplification ×
  roughness bound, their ratio and the share of examples where the bound held.
- `diagnostics_points`: the mechanism test's points, one per (task, position): predictor and gain seed means,
  and (`*_within`) their deviations from the task's mean, the view the within-task test reads.
- `diagnostics_mechanism`: one row per predictor: within-task statistic, one-sided p in the theory's
  direction, the two-sided p, Holm-adjusted p over the three predictors, unadjusted and adjusted verdicts.
  `mechanism_claims` gives the same as claims-shaped rows (family "diagnostics"), whose adjustment in the
  claims table is this same Holm over the same p-values.
- `diagnostics_skipped`: the runs `pdelra diagnose` did not measure (kind `skipped`), one row each with why
  (diverged at step n, non-finite weights in ...): the report names them.

Why the commutator is normalised by α: for one scale, D = I + αΔ, so [D, M] = DM − MD = α[Δ, M] exactly
when α is shared by channels (and to first order in the spread of per-channel α). A position whose training
pushed α up has a larger commutator for that reason alone; `commutator_per_alpha` = commutator / mean α is
the commutator of the Laplacian itself with the block's attention, which depends on the position and on
what attention learned, not on the size of the step. (Dividing by the operator's own effect ‖D(x) − x‖
would do the same for one scale but mixes in the roughness of x, which the roughness predictor measures.)
The probe commutator uses the same α = 0.1 in every run and needs no normalisation.

The mechanism test (does the commutator predict the accuracy gain over the baseline?): the points are
(task, position) cells with the predictor's and the gain's seed means. Tasks differ in both (harder tasks,
larger representations), so a correlation pooled across tasks can be made by the task alone (Simpson's
paradox: no relation inside any task, yet ρ = −0.9 across tasks): the statistic is the mean over tasks of
the within-task Spearman ρ. What is exchangeable under the null is the *positions*: the gain and the
predictor are properties of a position, and a position's properties recur in every task. So the null
distribution permutes the position labels jointly across tasks — one permutation of the seven positions
applied to the gains of every task at once, all 7! = 5,040 of them (exact;
`pdelra.results.stats.permutation_of_labels`) — and the evidence counts as seven points, not 35. (Shuffling
positions independently inside each task treats the tasks as independent copies of the same seven positions:
with position-level gains and predictors, unrelated, it read "reproduced" in 18.7 % of replications at a
nominal 2.5 %.) The smallest p is then 1/5,040; a task with fewer than 3 positions adds no ρ. The test is
two-sided: `p_value` = 2 · min(one-sided p's), the word follows the side (`reproduced` in the theory's
direction, `contradicted` in the other), and Holm's adjustment (`stats.holm`) over the three predictors
acts on that p, so a contradiction survives the adjustment exactly as a reproduction does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pdelra.paper import POSITIONS
from pdelra.results import stats
from pdelra.runs import BASE_SETTING, BASELINE, COMPLETED, MAIN_SCALE

if TYPE_CHECKING:
    import pandas as pd

FAMILY = "diagnostics"
SOURCE = "revised abstract"
RESAMPLES = 9999
PERMUTATION_SEED = 0
CONFIG_KEYS = ["task", "variant", "scale", "setting"]
RUN_KEYS = [*CONFIG_KEYS, "seed"]
LOGIT_COLUMNS = ["amplification", "logit_change", "amplified_perturbation", "composed_bound"]
# diagnostics.csv's vocabulary (`pdelra diagnose` writes it, the summaries here read it).
QUANTITIES = (
    "roughness_in",
    "roughness_out",
    "rel_roughness_in",
    "rel_roughness_out",
    "perturbation",
    "bound",
    "bound_closed_form",
    "bound_ratio",
    "commutator",
    "commutator_branch",
)
# Measured on the first `amplification_examples` examples only: each costs a backward pass per class.
LOGIT_QUANTITIES = (
    "amplification",
    "logit_change",
    "amplified_perturbation",
    "composed_bound",
    "composed_ratio",
    "composed_held",
)
# The kind of a run's one row when `pdelra diagnose` did not measure it (diverged, non-finite weights): its
# `reason` says why, every quantity is empty, and no summary but `skipped_runs` reads it.
SKIPPED = "skipped"
COLUMNS = (
    *RUN_KEYS,
    "block",
    "operator",
    "kind",
    "position",
    "alpha_mean",
    "n_examples",
    "n_logit_examples",
    *QUANTITIES,
    *LOGIT_QUANTITIES,
    "reason",
)


# predictor → (what it is, the sign of the within-task association with the gain the theory expects)
PREDICTORS = {
    "commutator_per_alpha": ("diffusion–attention commutator per unit α (trained D)", -1),
    "commutator_branch_per_alpha": ("the same, relative to the attention branch ‖A(x)‖", -1),
    "roughness_reduction": ("roughness reduction 1 − rel_out/rel_in by the trained D", +1),
}
CLAIMS = {
    "commutator_per_alpha": "Positions whose diffusion does not commute with attention (a larger commutator "
    "per unit α) gain less accuracy over the baseline, within a task",
    "commutator_branch_per_alpha": "The same with the commutator relative to the attention branch",
    "roughness_reduction": "Positions whose diffusion removes more roughness gain more accuracy over the "
    "baseline, within a task",
}


# ----------------------------------------------------------------------------------------------------------
# Per run, per position, per block


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    """num / den, NaN where den is 0, NaN or the result not finite."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        out = num.astype(float) / den.astype(float)
    return out.where(np.isfinite(out))


def as_table(diagnostics: pd.DataFrame | None) -> pd.DataFrame:
    """diagnostics.csv as read: an absent or empty file (no column at all) becomes an empty table with the
    columns `pdelra diagnose` writes, so every summary comes out empty and every claim `not run`."""
    import pandas as pd

    if diagnostics is None or not len(diagnostics.columns):
        return pd.DataFrame(columns=list(COLUMNS))
    return diagnostics


def _with_derived(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """diagnostics.csv rows plus derived columns: α-normalised commutators, roughness reduction."""
    frame = diagnostics.copy()
    frame["commutator_per_alpha"] = _ratio(frame["commutator"], frame["alpha_mean"])
    frame["commutator_branch_per_alpha"] = _ratio(frame["commutator_branch"], frame["alpha_mean"])
    frame["roughness_reduction"] = 1 - _ratio(frame["rel_roughness_out"], frame["rel_roughness_in"])
    return frame


def per_run(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """One row per run: means over its trained operators (and blocks) of the commutators, the roughness
    reduction, perturbation/bound, α and the logit-level quantities; the probe's commutators beside them. A
    config variant's own operators (kind `operator`) count as trained ones; the α-normalised quantities are
    empty for them (they have no α)."""
    frame = _with_derived(diagnostics)
    trained = frame[frame["kind"].isin(["trained", "operator"])]
    probe = frame[frame["kind"] == "probe"]
    columns = [
        "alpha_mean",
        "commutator",
        "commutator_per_alpha",
        "commutator_branch",
        "commutator_branch_per_alpha",
        "roughness_reduction",
        "bound_ratio",
        *LOGIT_COLUMNS,
    ]
    own = trained.groupby(RUN_KEYS)[columns].mean()
    probes = probe.groupby(RUN_KEYS)[["commutator", "commutator_branch"]].mean()
    probes.columns = ["probe_commutator", "probe_commutator_branch"]
    return own.join(probes, how="outer").reset_index()


def per_position(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """Per (task, variant, scale, setting): means over seeds of `per_run`, the commutator's seed spread and
    the number of seeds."""
    runs = per_run(diagnostics)
    values = [c for c in runs.columns if c not in RUN_KEYS]
    table = runs.groupby(CONFIG_KEYS)[values].mean()
    table["commutator_std"] = runs.groupby(CONFIG_KEYS)["commutator"].std()
    table["seeds"] = runs.groupby(CONFIG_KEYS)["seed"].nunique()
    return table.reset_index().sort_values(["task", "scale", "setting", "variant"]).reset_index(drop=True)


def per_block(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """Commutators per (task, variant, scale, setting, kind, block), trained and probe: seed means of the
    mean over the block's operators, with the number of seeds."""
    frame = _with_derived(diagnostics)
    frame = frame[frame["kind"].isin(["trained", "operator", "probe"])]
    columns = ["commutator", "commutator_branch", "commutator_per_alpha", "commutator_branch_per_alpha"]
    keys = [*CONFIG_KEYS, "kind", "block"]
    runs = frame.groupby([*keys, "seed"])[columns].mean().reset_index()
    table = runs.groupby(keys)[columns].mean()
    table["seeds"] = runs.groupby(keys)["seed"].nunique()
    return table.reset_index()


def depth_profile(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """Residual-stream relative roughness per run by depth: b = entering block b, n = leaving the last."""
    import pandas as pd

    residual = diagnostics[diagnostics["kind"] == "residual"]
    entering = residual[[*RUN_KEYS, "block", "rel_roughness_in"]].rename(
        columns={"block": "depth", "rel_roughness_in": "roughness"}
    )
    last = residual.loc[residual.groupby(RUN_KEYS)["block"].idxmax()] if len(residual) else residual
    leaving = last[[*RUN_KEYS, "block", "rel_roughness_out"]].rename(
        columns={"rel_roughness_out": "roughness"}
    )
    leaving["depth"] = leaving.pop("block") + 1
    out = pd.concat([entering, leaving[entering.columns]], ignore_index=True)
    return out.sort_values([*RUN_KEYS, "depth"]).reset_index(drop=True)


def bound_check(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """The compositional bound per (task, variant, scale, setting, kind, position): means over blocks and
    seeds of the measured logit change, amplification × ‖D(x) − x‖, the composed bound amplification ×
    roughness bound, the mean ratio change/bound per example, the share of examples where the bound held
    (`held_share`), `held` (every example), and the runs and examples behind them."""
    frame = diagnostics[diagnostics["kind"].isin(["trained", "probe"]) & diagnostics["logit_change"].notna()]
    keys = [*CONFIG_KEYS, "kind", "position"]
    grouped = frame.groupby(keys)
    table = grouped[["perturbation", "bound", *LOGIT_COLUMNS, "composed_ratio"]].mean()
    # Share of examples: rows can hold different numbers of examples (the last batch), so weight by them.
    held = frame["composed_held"] * frame["n_logit_examples"]
    table["held_share"] = held.groupby([frame[k] for k in keys]).sum() / grouped["n_logit_examples"].sum()
    table["held"] = table["held_share"] >= 1 - 1e-12
    table["runs"] = grouped["seed"].nunique()
    table["examples"] = grouped["n_logit_examples"].sum()
    return table.reset_index().rename(columns={"composed_ratio": "ratio"})


def skipped_runs(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """The runs `pdelra diagnose` skipped, one row each: RUN_KEYS and the `reason` (its one SKIPPED row's)."""
    frame = diagnostics[diagnostics["kind"] == SKIPPED]
    return frame[[*RUN_KEYS, "reason"]].sort_values(RUN_KEYS).reset_index(drop=True)


# ----------------------------------------------------------------------------------------------------------
# The mechanism test


def mechanism_points(diagnostics: pd.DataFrame, runs: pd.DataFrame | None) -> pd.DataFrame:
    """One row per (task, position) with a trained operator: the predictors' and the gain's seed means, where
    the gain of a seed is its test accuracy − the same task's baseline run with that seed, and the seeds.

    Restricted to the paper's seven positions, the `base` setting and one scale per task (h1 when present,
    else the first), completed runs with a test accuracy, and seeds that have a baseline."""
    import pandas as pd

    columns = ["task", "variant", "scale", *PREDICTORS, "gain", "seeds"]
    if runs is None or runs.empty or diagnostics.empty:
        return pd.DataFrame(columns=columns)
    done = runs[(runs["status"] == COMPLETED) & runs["test_accuracy"].notna()]
    done = done[done["setting"] == BASE_SETTING]
    predictors = per_run(diagnostics)
    # The claim is about the paper's seven positions: a related system's or a config's own variant is no
    # point of it (and would change what the permutation exchanges).
    predictors = predictors[(predictors["setting"] == BASE_SETTING) & predictors["variant"].isin(POSITIONS)]
    predictors = predictors[predictors[list(PREDICTORS)].notna().any(axis=1)]
    if predictors.empty:
        return pd.DataFrame(columns=columns)
    scale = predictors.groupby("task")["scale"].agg(lambda s: MAIN_SCALE if MAIN_SCALE in set(s) else min(s))
    predictors = predictors[predictors["scale"] == predictors["task"].map(scale)]
    points = predictors.merge(done[[*RUN_KEYS, "test_accuracy"]], on=RUN_KEYS)
    base = done[(done["variant"] == BASELINE) & (done["scale"] == done["task"].map(scale))]
    base = base.drop_duplicates(["task", "seed"])[["task", "seed", "test_accuracy"]]
    points = points.merge(base.rename(columns={"test_accuracy": "baseline"}), on=["task", "seed"])
    points["gain"] = points["test_accuracy"] - points["baseline"]
    cells = points.groupby(["task", "variant", "scale"])
    table = cells[[*PREDICTORS, "gain"]].mean()
    table["seeds"] = cells["seed"].nunique()
    table = table.reset_index()
    for column in [*PREDICTORS, "gain"]:  # the within-task view the test reads: deviations from task means
        table[f"{column}_within"] = table[column] - table.groupby("task")[column].transform("mean")
    return table[[*columns, *(f"{c}_within" for c in [*PREDICTORS, "gain"])]]


def _verdict(p_value: float, side: int, expected: int) -> str:
    """reproduced / contradicted / inconclusive from the two-sided p and the side the data fall on."""
    if math.isnan(p_value):
        return "not run"
    if p_value >= stats.ALPHA:
        return "inconclusive"
    return "reproduced" if side == expected else "contradicted"


def mechanism_test(
    points: pd.DataFrame, resamples: int = RESAMPLES, seed: int = PERMUTATION_SEED
) -> pd.DataFrame:
    """One row per predictor: points, tasks with ≥ 3 positions, the statistic (mean within-task Spearman ρ
    of predictor and gain), the one-sided p in the expected direction, the two-sided `p_value`, the number
    of permutations, Holm-adjusted `p_adjusted` over the predictors, `verdict_unadjusted`, `verdict` (Holm)
    and a plain-words `answer`. Positions are permuted jointly across tasks (exact up to 8 positions;
    `resamples` random permutations beyond)."""
    import pandas as pd

    rows = []
    for predictor, (description, expected) in PREDICTORS.items():
        usable = points[points[predictor].notna() & points["gain"].notna()]
        sizes = usable.groupby("task").size()
        tasks = int((sizes >= 3).sum())
        statistic = p_greater = p_less = math.nan
        permutations = 0
        if tasks:
            statistic, p_greater, p_less, permutations = stats.permutation_of_labels(
                usable[predictor], usable["gain"], usable["task"], usable["variant"], resamples, seed
            )
        one_sided = p_less if expected < 0 else p_greater
        rows.append(
            {
                "predictor": predictor,
                "description": description,
                "expected_sign": "+" if expected > 0 else "−",
                "points": int(sizes[sizes >= 3].sum()) if tasks else 0,
                "positions": int(usable[usable["task"].map(sizes) >= 3]["variant"].nunique()) if tasks else 0,
                "tasks": tasks,
                "statistic": statistic,
                "p_one_sided": one_sided,
                "p_value": min(1.0, 2 * min(p_greater, p_less)) if tasks else math.nan,
                "side": (1 if p_greater <= p_less else -1) if tasks else 0,  # where the data fall
                "permutations": permutations,
            }
        )
    table = pd.DataFrame(rows)
    table["p_adjusted"] = stats.holm(table["p_value"].tolist())
    expected_side = [PREDICTORS[p][1] for p in table["predictor"]]
    table["verdict_unadjusted"] = [
        _verdict(p, side, e)
        for p, side, e in zip(table["p_value"], table["side"], expected_side, strict=True)
    ]
    table["verdict"] = [
        _verdict(p, side, e)
        for p, side, e in zip(table["p_adjusted"], table["side"], expected_side, strict=True)
    ]
    table["answer"] = [
        _answer(v, t, k, a)
        for v, t, k, a in zip(
            table["verdict"], table["tasks"], table["positions"], table["p_adjusted"], strict=True
        )
    ]
    return table.drop(columns="side")


def _answer(verdict: str, tasks: int, positions: int, p_adjusted: float) -> str:
    """The verdict in words, with the Holm-adjusted p it rests on."""
    if verdict == "not run":
        return "not run: no task has 3 positions with this predictor and a baseline"
    if verdict == "reproduced":
        return f"yes: within-task association in the predicted direction (Holm p = {p_adjusted:.3f})"
    if verdict == "contradicted":
        return f"no: within-task association in the opposite direction (Holm p = {p_adjusted:.3f})"
    return f"no evidence from {positions} positions in {tasks} task(s) (Holm p = {p_adjusted:.2f})"


def part_claims(inputs: Mapping[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """The claims of the part `diagnostics` (pdelra.parts): the mechanism test's rows, from aggregate's
    inputs by table name."""
    import pandas as pd

    return mechanism_claims(inputs.get("diagnostics", pd.DataFrame()), inputs.get("runs")).to_dict("records")


def mechanism_claims(
    diagnostics: pd.DataFrame, runs: pd.DataFrame | None, resamples: int = RESAMPLES
) -> pd.DataFrame:
    """The mechanism test as claims-shaped rows (family "diagnostics", source "revised abstract"): effect =
    the within-task statistic, p_value on the two-sided scale (p_value < stats.ALPHA ⇔ the unadjusted answer
    is yes), verdict_unadjusted; the claims module adjusts within the family and sets `verdict`."""
    import pandas as pd

    test = mechanism_test(mechanism_points(as_table(diagnostics), runs), resamples=resamples)
    rows = []
    for row in test.itertuples(index=False):
        rows.append(
            {
                "claim_id": f"diagnostics_{row.predictor}",
                "claim": CLAIMS[row.predictor],
                "source": SOURCE,
                "family": FAMILY,
                "kind": "association",
                "unit": "mean within-task Spearman ρ",
                "expected_sign": row.expected_sign,
                "effect": row.statistic,
                "n": row.points,
                "p_value": row.p_value,
                "verdict_unadjusted": row.verdict_unadjusted,
                "method": "permutation test of the position labels, jointly across tasks "
                f"({row.permutations} permutations), two-sided",
                "detail": f"{row.points} (task, position) points: {row.positions} positions in {row.tasks} "
                f"task(s); {row.description}",
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------
# Every table


TABLES = (
    "diagnostics_per_position",
    "diagnostics_per_block",
    "diagnostics_depth",
    "diagnostics_bound",
    "diagnostics_points",
    "diagnostics_mechanism",
    "diagnostics_skipped",
)


def summarise(diagnostics: pd.DataFrame, runs: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """Every diagnostics table by name (`TABLES`; the CSV file stem `pdelra aggregate` writes it under)."""
    diagnostics = as_table(diagnostics)
    points = mechanism_points(diagnostics, runs)
    return {
        "diagnostics_per_position": per_position(diagnostics),
        "diagnostics_per_block": per_block(diagnostics),
        "diagnostics_depth": depth_profile(diagnostics),
        "diagnostics_bound": bound_check(diagnostics),
        "diagnostics_points": points,
        "diagnostics_mechanism": mechanism_test(points),
        "diagnostics_skipped": skipped_runs(diagnostics),
    }
