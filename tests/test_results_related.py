"""pdelra.results.related on constructed runs with known answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pdelra import paper
from pdelra.results import related

SEEDS = (0, 1, 2)
T975_2 = 4.302652729911275  # t(0.975, 2 degrees of freedom)


def _half(sd: float, n: int = 3) -> float:
    return T975_2 * sd / math.sqrt(n)


def lm_runs(losses: dict[tuple[str, str], list[float]], status: str = "completed") -> pd.DataFrame:
    """One LM run per (variant, setting) and seed with the given test losses (nats/token)."""
    rows = []
    for (variant, setting), per_seed in losses.items():
        for seed, loss in zip(SEEDS, per_seed, strict=False):
            rows.append(
                {
                    "task": "lm_text",
                    "variant": variant,
                    "scale": "d256",
                    "setting": setting,
                    "seed": seed,
                    "status": status,
                    "test_loss_nats": loss,
                    "test_bits_per_byte": loss / math.log(2),
                    "epochs": 20,
                    "corpus": "text",
                }
            )
    return pd.DataFrame(rows)


MHA = [2.0, 2.1, 2.2]


def test_lm_eval_loss_pairs_each_condition_with_mha_by_seed() -> None:
    # PhysQK-AD: −0.075, −0.065, −0.055 below MHA per seed (sd 0.01); PhysQK +0.05 on every seed.
    runs = lm_runs(
        {
            ("physqk_ad", "base"): [1.925, 2.035, 2.145],
            ("mha", "base"): MHA,
            ("physqk", "base"): [2.05, 2.15, 2.25],
            ("physqk_ad", "shared"): [1.0, 1.0, 1.0],  # an ablation run: not a condition of this table
        }
    )
    table = related.lm_eval_table(runs)
    assert table["variant"].tolist() == ["mha", "physqk", "physqk_ad"]  # MHA first whatever the input order
    row = table.set_index("variant").loc["physqk_ad"]
    assert row["delta_vs_mha_nats"] == pytest.approx(-0.065)
    assert (row["delta_vs_mha_nats_ci_low"], row["delta_vs_mha_nats_ci_high"]) == pytest.approx(
        (-0.065 - _half(0.01), -0.065 + _half(0.01))
    )
    assert row["delta_method"] == "paired t" and row["paper_delta_nats"] == paper.PHYSQK_AD_DELTA["physqk_ad"]
    mha = table.set_index("variant").loc["mha"]
    assert mha["loss_nats"] == pytest.approx(2.1) and mha["n"] == 3 and mha["max_epochs_run"] == 20
    assert (mha["loss_nats_ci_low"], mha["loss_nats_ci_high"]) == pytest.approx(
        (2.1 - _half(0.1), 2.1 + _half(0.1))
    )
    assert mha["bits_per_byte"] == pytest.approx(2.1 / math.log(2))
    assert math.isnan(mha["delta_vs_mha_nats"]) and mha["corpus"] == "text"


def test_lm_eval_loss_counts_only_completed_runs() -> None:
    runs = pd.concat(
        [
            lm_runs({("mha", "base"): MHA, ("physqk_ad", "base"): [1.9, 2.0]}),
            lm_runs({("physqk_ad", "base"): [math.nan, math.nan, 9.9]}, status="diverged").iloc[2:],
        ]
    )
    row = related.lm_eval_table(runs).set_index("variant").loc["physqk_ad"]
    assert (row["n"], row["n_runs"]) == (2, 3) and row["loss_nats"] == pytest.approx(1.95)
    assert row["delta_vs_mha_nats"] == pytest.approx(-0.1)  # seeds 0 and 1, paired


def test_ablation_differences_are_to_joint_learning_beside_the_seeds_range() -> None:
    runs = lm_runs(
        {
            ("physqk_ad", "base"): [2.0, 2.1, 2.2],
            ("physqk_ad", "shared"): [1.5, 1.61, 1.72],  # Δ = −0.5, −0.49, −0.48
            ("mha", "base"): MHA,
        }
    )
    table = related.ablation_table(runs)
    assert table["setting"].tolist() == ["base", "shared"]  # joint learning first; MHA is not an allocation
    shared = table.set_index("setting").loc["shared"]
    assert shared["delta_vs_joint_nats"] == pytest.approx(-0.49)
    assert shared["delta_vs_joint_nats_ci_high"] == pytest.approx(-0.49 + _half(0.01))
    assert (shared["paper_delta_nats_low"], shared["paper_delta_nats_high"]) == (-0.51, -0.43)
    base = table.set_index("setting").loc["base"]
    assert math.isnan(base["delta_vs_joint_nats"]) and math.isnan(base["paper_delta_nats_low"])


def dynamics(layers: int, steps: tuple[int, ...] = (0, 50, 100), variant: str = "physqk_ad") -> pd.DataFrame:
    """α = 0.1·layer + 0.01·seed at the last step (0.5 before), η = 1 + step/100, eff_Pe = layer + 1."""
    rows = []
    for seed in SEEDS:
        for step in steps:
            for layer in range(layers):
                last = step == steps[-1]
                rows.append(
                    {
                        "task": "lm_text",
                        "variant": variant,
                        "scale": "d256",
                        "setting": "base",
                        "seed": seed,
                        "step": step,
                        "epoch": step // 50,
                        "layer": layer,
                        "alpha": 0.1 * layer + 0.01 * seed if last else 0.5,
                        "eta": 1.0 + step / 100,
                        "eff_pe": layer + 1.0,
                    }
                )
    return pd.DataFrame(rows)


def test_layer_table_takes_each_runs_last_step_and_only_physqk_ad() -> None:
    frames = [dynamics(4), dynamics(4, variant="physqk")]
    table = related.layer_table(pd.concat(frames, ignore_index=True))
    assert table["layer"].tolist() == [0, 1, 2, 3] and set(table["final_step"]) == {100}
    l1 = table.set_index("layer").loc[1]
    assert l1["alpha"] == pytest.approx(0.11) and l1["n"] == 3
    assert l1["alpha_ci_high"] == pytest.approx(0.11 + _half(0.01))
    assert (l1["eta"], l1["eta_ci_low"], l1["eta_ci_high"]) == pytest.approx((2.0, 2.0, 2.0))


def test_layer_trajectory_has_every_logged_step() -> None:
    table = related.layer_trajectory_table(dynamics(2))
    assert len(table) == 2 * 3 and table["step"].tolist() == [0, 50, 100, 0, 50, 100]
    assert table["eta"].tolist() == pytest.approx([1.0, 1.5, 2.0] * 2)


def cta_runs() -> pd.DataFrame:
    """ListOps: baseline 0.30 + 0.01·seed; CTA wave gains 0.02 (1 step) and 0.05 + 0.001·seed (4 steps),
    and a default-steps run. Text: a baseline only (no CTA runs)."""
    rows = []

    def add(task: str, variant: str, setting: str, seed: int, accuracy: float) -> None:
        rows.append(
            {
                "task": task,
                "variant": variant,
                "scale": "h1",
                "setting": setting,
                "seed": seed,
                "status": "completed",
                "test_accuracy": accuracy,
            }
        )

    for s in SEEDS:
        add("listops", "none", "base", s, 0.30 + 0.01 * s)
        add("text", "none", "base", s, 0.60)
        add("listops", "after_mlp", "base", s, 0.9)  # another grid's run: not in the CTA tables
        add("listops", "cta_wave", "steps1", s, 0.32 + 0.01 * s)
        add("listops", "cta_wave", "steps4", s, 0.35 + 0.011 * s)
        add("listops", "cta_diffusion", "base", s, 0.31 + 0.01 * s)
    return pd.DataFrame(rows)


def test_cta_table_pairs_with_the_baseline_of_tasks_that_have_cta_runs() -> None:
    table = related.cta_table(cta_runs())
    assert set(table["task"]) == {"listops"}  # Text has a baseline but no CTA runs
    assert list(zip(table["variant"], table["setting"], strict=True)) == [
        ("none", "base"),
        ("cta_diffusion", "base"),
        ("cta_wave", "steps1"),
        ("cta_wave", "steps4"),
    ]
    rows = table.set_index(["variant", "setting"])
    four = rows.loc[("cta_wave", "steps4")]
    assert four["delta_vs_baseline"] == pytest.approx(0.051) and four["pseudo_time_steps"] == 4
    assert four["delta_vs_baseline_ci_low"] == pytest.approx(0.051 - _half(0.001))
    assert rows.loc[("cta_diffusion", "base"), "pseudo_time_steps"] == related.DEFAULT_CTA_STEPS
    baseline = rows.loc[("none", "base")]
    assert baseline["test_accuracy"] == pytest.approx(0.31) and math.isnan(baseline["delta_vs_baseline"])
    assert math.isnan(baseline["pseudo_time_steps"])


def test_cta_difference_is_welch_without_shared_seeds() -> None:
    runs = cta_runs()
    runs.loc[(runs["variant"] == "cta_wave") & (runs["setting"] == "steps1"), "seed"] += 10
    row = related.cta_table(runs).set_index(["variant", "setting"]).loc[("cta_wave", "steps1")]
    assert row["delta_method"] == "Welch t" and row["delta_vs_baseline"] == pytest.approx(0.02)


def test_the_default_steps_are_the_models() -> None:
    from pdelra.nn.model import ModelConfig

    assert ModelConfig.cta_steps == related.DEFAULT_CTA_STEPS
    assert related.pseudo_time_steps("steps2") == 2 and math.isnan(related.pseudo_time_steps("wide"))


def test_cta_cost_keeps_tasks_with_cta_runs_and_flags_the_quadratic_type() -> None:
    cost = pd.DataFrame(
        {
            "task": ["listops", "listops", "listops", "text", "listops"],
            "variant": ["none", "cta_wave", "cta_reaction_diffusion", "none", "after_mlp"],
            "scale": "h1",
            "setting": ["base", "steps4", "steps4", "base", "base"],
            "n": 3,
            "median_step_time_s": [0.01, 0.012, 0.02, 0.05, 0.011],
            "peak_memory_mb": [100.0, 101.0, 180.0, 90.0, 100.0],
            "wall_time_s": 60.0,
            "time_overhead_pct": [0.0, 20.0, 100.0, 0.0, 10.0],
            "memory_overhead_pct": [0.0, 1.0, 80.0, 0.0, 0.0],
        }
    )
    table = related.cta_cost_table(cost)
    assert list(table.columns) == list(related.COST_COLUMNS)
    assert table["variant"].tolist() == ["none", "cta_wave", "cta_reaction_diffusion"]  # no Text baseline
    flag = table.set_index("variant")["attention_memory"]
    assert flag["cta_reaction_diffusion"].startswith("O(L²)") and flag["cta_wave"].startswith("O(L)")
    assert table.set_index("variant").loc["cta_wave", "pseudo_time_steps"] == 4


def test_operator_comparison_pairs_each_system_with_its_own_backbones_baseline() -> None:
    runs = cta_runs()
    extra = []

    def add(variant: str, setting: str, seed: int, accuracy: float) -> None:
        extra.append({"task": "listops", "variant": variant, "scale": "h1", "setting": setting, "seed": seed,
                      "status": "completed", "test_accuracy": accuracy})  # fmt: skip

    for s in SEEDS:  # the official backbone: its own baseline 0.40 + 0.01 s, its operator +0.02 on each seed
        add("none", "official", s, 0.40 + 0.01 * s)
        add("cta_official_diffusion", "official", s, 0.42 + 0.01 * s)
        add("after_attention", "base", s, 0.29 + 0.01 * s)
    table = related.cta_operator_table(pd.concat([runs, pd.DataFrame(extra)], ignore_index=True))
    assert list(table["system"]) == [system for system, *_ in related.OPERATOR_ROWS]
    assert set(table["task"]) == {"listops"}  # Text has no runs of the official backbone
    rows = table.set_index("variant", drop=False)
    official = table[table["variant"] == "cta_official_diffusion"].iloc[0]
    assert official["delta_vs_own_baseline"] == pytest.approx(0.02)  # vs the official baseline, not 0.31
    assert official["delta_vs_own_baseline_ci_low"] == pytest.approx(0.02)  # the same gain on every seed
    assert rows.loc["after_attention", "delta_vs_own_baseline"] == pytest.approx(-0.01)  # vs pre-LN none
    assert rows.loc["cta_diffusion", "delta_vs_own_baseline"] == pytest.approx(0.01)
    baselines = table[table["variant"] == "none"]
    assert list(baselines["backbone"]) == ["pdelra", "official_cta"]
    assert baselines["delta_vs_own_baseline"].isna().all()
    assert related.cta_operator_table(runs).empty  # no official-backbone runs: no table


def test_summarise_returns_every_table_even_without_inputs() -> None:
    empty = related.summarise(None, None, None, pd.DataFrame())
    assert tuple(empty) == related.TABLES and all(t.empty for t in empty.values())
    assert list(empty["lm_eval_loss"].columns) == list(related.LM_EVAL_COLUMNS)
    assert list(empty["cta_type_steps"].columns) == list(related.CTA_COLUMNS)
    full = related.summarise(lm_runs({("mha", "base"): MHA}), dynamics(2), cta_runs(), None)
    assert len(full["lm_eval_loss"]) == 1 and len(full["lm_layers"]) == 2 and len(full["cta_type_steps"]) == 4
    assert full["lm_alpha_ablation"].empty and full["cta_cost"].empty
    # A runs.csv from before grid settings (no `setting` column): every run is `base`.
    old = related.cta_table(cta_runs().query("setting == 'base'").drop(columns="setting"))
    assert old["variant"].tolist() == ["none", "cta_diffusion"]


def test_cta_table_gives_each_rows_epoch_budget_and_epochs_run() -> None:
    """The demo's steps settings train 2 epochs, its default-steps runs 4: the table must carry both."""
    runs = cta_runs()
    runs["max_epochs"] = [2 if s.startswith("steps") else 4 for s in runs["setting"]]
    runs["epochs"] = runs["max_epochs"] - (runs["seed"] == 1)  # one seed stopped early
    rows = related.cta_table(runs).set_index(["variant", "setting"])
    assert rows.loc[("cta_wave", "steps1"), ["max_epochs", "max_epochs_run"]].tolist() == [2, 2]
    assert rows.loc[("cta_diffusion", "base"), ["max_epochs", "max_epochs_run"]].tolist() == [4, 4]
    assert rows.loc[("none", "base"), "max_epochs"] == 4
    older = related.cta_table(cta_runs())  # a runs.csv without the columns: NaN, not an error
    assert older["max_epochs"].isna().all() and older["max_epochs_run"].isna().all()
