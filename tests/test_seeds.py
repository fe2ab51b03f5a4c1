"""`pdelra plan --power`: the seeds each claim needs, from a pilot's spread or the paper's Table 15."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO
from test_claims_cases import judged
from test_claims_reach import draw_runs, paper_truth

from pdelra import paper
from pdelra.cli import main
from pdelra.results import claims as C
from pdelra.results import power, seeds
from pdelra.results.catalogue.paper import paper_claims


def test_without_a_pilot_the_spread_is_table_15s() -> None:
    plan = seeds.seeds_table()
    assert plan.unplanned == []  # the paper's grids run every claim
    table = plan.table.set_index("claim_id")
    assert set(table["spread_from"]) == {"Table 15"}
    assert pytest.approx(0.0043, abs=5e-4) == seeds.TABLE15_SD
    # Primary claims: 2–3 seeds at the paper's spread; Holm's planned levels inside each family.
    assert (table.loc[table["family"] == "primary", "seeds_for_80"] <= 3).all()
    assert table.loc["after_embedding_gain", "level"] == pytest.approx(0.05 / 3)
    assert table.loc["multiscale_gain", "level"] == pytest.approx(0.05)  # the weakest primary: last


def test_a_noisier_pilot_asks_for_more_seeds_as_the_simulation_finds() -> None:
    """A pilot with 1 pp per-run noise: multi-scale needs about 13 seeds (simulated: 33 % reproduced at 5
    seeds, median seeds needed 11, tests/test_claims_reach.py); After Embedding's +4 pp still 2."""
    pilot = draw_runs(paper_truth, np.random.default_rng(3), 5, 0.01)
    table = seeds.seeds_table(pilot).table.set_index("claim_id")
    # The spread of the task's main grid (the baseline and seven positions); multi-scale cells have their own.
    assert table.loc["multiscale_gain", "spread_from"].startswith("pilot (8 cells × 5 seeds)")
    assert 9 <= table.loc["multiscale_gain", "seeds_for_80"] <= 16
    assert 0.2 <= table.loc["multiscale_gain", "power_at_5"] <= 0.55
    assert table.loc["after_embedding_gain", "seeds_for_80"] == 2


def test_plan_power_prints_seeds_and_their_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(yaml.safe_load((REPO / "config" / "demo.yaml").read_text())))
    pilot = tmp_path / "pilot"
    pilot.mkdir()
    draw_runs(paper_truth, np.random.default_rng(4), 3, 0.005).to_csv(pilot / "runs.csv", index=False)
    args = ["plan", str(path), "--no-calibration", "--results", str(tmp_path / "none"), "--power"]
    assert main([*args, "--tables", str(pilot)]) == 0
    printed = capsys.readouterr().out
    assert "seeds each claim of this config needs for 80 % power at the paper's effect" in printed
    assert "after_embedding_gain" in printed and "pilot (8 cells × 3 seeds)" in printed
    assert "what seed counts buy" in printed and "primary claims at 80 % power" in printed
    assert main([*args[:-1], "--tables", str(pilot)]) == 1  # --tables alone: one line, no traceback
    assert main([*args, "--tables", str(tmp_path)]) == 1  # no runs.csv there


# ---------------------------------------------------------------------------------------------------------
# Your own study: the claims of the config's cells, the pilot's spread, the price of a seed

OWN_STUDY = {
    "variants": {
        "conv_embed": {"after_embedding": {"operator": "examples.myops:MovingAverage"}},
        "conv_two": {"embedding": {"operator": "examples.myops:MovingAverage"},
                     "mlp_output": {"operator": "examples.myops:MovingAverage"}},
    },
    "grids": {"mine": {"tasks": ["listops"], "scales": ["h1"], "seeds": [0, 1, 2],
                       "variants": ["none", "after_embedding", "conv_embed", "conv_two"]}},
    "run_grids": ["mine"],
}  # fmt: skip


def _own_plan(pilot: pd.DataFrame | None = None, effect: float | None = None) -> seeds.PowerPlan:
    from pdelra.planning.experiment import lra_runs

    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text()) | OWN_STUDY
    cells = {run[:4] for run in lra_runs(config)}
    return seeds.seeds_table(pilot, 3, cells, seeds.own_positions(config), effect)


def test_plan_power_plans_own_variants_at_the_effect_the_user_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --power --effect 0.01` (or the config's power_effect): every own claim is planned at +1 pp, at
    the spread assumed without a pilot, and its seeds are those `pdelra.results.power` gives for 1 pp at that
    spread and level; a larger named effect needs fewer seeds; the paper's own claim keeps the paper's."""
    at_1pp = _own_plan(effect=0.01).table.set_index("claim_id")
    at_2pp = _own_plan(effect=0.02).table.set_index("claim_id")
    own = at_1pp[at_1pp["family"] == "own"]
    assert (own["effect_aimed_at"] == 0.01).all() and (own["aim"] == "named (--effect / power_effect)").all()
    assert (own["seeds_for_80"] > at_2pp.loc[own.index, "seeds_for_80"]).all()
    for claim_id, row in own.iterrows():  # one comparison each: the seeds of the power function at 1 pp
        if claim_id.startswith("table11_"):
            dof = power.DegreesOfFreedom(1.0)  # bounds: a paired t's df grow slowest, full borrowing fastest
            most = power.seeds_needed(0.01, row["sd_per_seed"], dof, row["level"])
            least = power.seeds_needed(0.01, row["sd_per_seed"], power.DegreesOfFreedom(100.0), row["level"])
            assert least <= row["seeds_for_80"] <= most
    paper_row = at_1pp.loc["table11_sign_after_embedding_listops"]
    assert paper_row["aim"] == "the paper's" and paper_row["effect_aimed_at"] != 0.01
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text()) | OWN_STUDY
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(config | {"power_effect": 0.01}))
    args = ["plan", str(path), "--no-calibration", "--results", str(tmp_path / "none"), "--power"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "for your own variants at the +1.00 pp you named" in printed
    assert main([*args, "--effect", "0.02"]) == 0
    assert "at the +2.00 pp you named" in capsys.readouterr().out
    assert main([*args[:-1], "--effect", "0.02"]) == 1  # --effect alone: one line, no traceback
    assert main([*args, "--effect", "2"]) == 1  # not an accuracy difference: one line, no traceback


def _own_pilot(seeds_: int, sd: float, gain: float) -> pd.DataFrame:
    """A pilot of the own study: conv_embed `gain` above the baseline, the others at it, per-run noise sd."""
    rng = np.random.default_rng(5)
    rows = []
    for seed in range(seeds_):
        base = 0.37 + rng.normal(0, 0.01)  # the seed's effect, shared by its cells
        for variant, mean in (("none", 0), ("after_embedding", 0.0), ("conv_embed", gain), ("conv_two", 0)):
            rows.append(
                {
                    "task": "listops",
                    "variant": variant,
                    "scale": "h1",
                    "setting": "base",
                    "seed": seed,
                    "status": "completed",
                    "test_accuracy": base + mean + rng.normal(0, sd),
                    "n_test": 2000,
                    "own_variant": variant.startswith("conv"),
                    "own_position": "after_embedding" if variant == "conv_embed" else None,
                }
            )
    return pd.DataFrame(rows)  # fmt: skip


def test_an_own_study_plans_its_own_claims_and_folds_the_papers() -> None:
    """Only the config's cells are planned: the own variants against the baseline (and conv_embed against the
    paper's After Embedding, which runs too), and the paper's one claim on these cells (After Embedding's
    ListOps sign); the other 43 are named as not planned. Without a pilot an own variant is assumed to do
    what the paper's diffusion does at its position: conv_embed aims at After Embedding's gain, conv_two
    (no single position) at 0, so it gets no seeds but the smallest effect its 3 seeds detect."""
    plan = _own_plan()
    table = plan.table.set_index("claim_id")
    assert list(table.index) == [
        "table11_sign_after_embedding_listops",
        "table11_sign_conv_embed_listops",
        "own_conv_embed_vs_after_embedding_listops",
        "table11_sign_conv_two_listops",
    ]
    assert len(plan.unplanned) == 43 and "after_embedding_gain" in plan.unplanned
    gain = paper.TABLE10["after_embedding"]["listops"] - paper.TABLE10["none"]["listops"]
    assert table.loc["table11_sign_conv_embed_listops", "effect_aimed_at"] == pytest.approx(gain)
    assert table.loc["table11_sign_conv_embed_listops", "seeds_for_80"] >= 2
    mine = table.loc["table11_sign_conv_two_listops"]
    assert mine["effect_aimed_at"] == 0 and np.isnan(mine["seeds_for_80"]) and np.isnan(mine["power_at_3"])
    assert 0 < mine["detectable_at_3"] < 0.05
    assert set(table["spread_from"]) == {"Table 15"}


def test_an_own_studys_pilot_spread_is_used_and_agrees_with_the_claims_table(tmp_path: Path) -> None:
    """A 3-seed pilot with 1 pp per-run noise: every own claim's spread is the pilot's own (not Table 15's
    0.43 pp), and conv_embed's seeds for its observed gain are the claims table's (at the same Holm
    level, computed the same way; the plan once said 2 where the claims said 129). A 1-seed pilot cannot
    give one, and the row says why."""
    pilot = _own_pilot(3, 0.01, 0.01)
    table = _own_plan(pilot).table.set_index("claim_id")
    own = table[table["family"] == "own"]
    assert own["spread_from"].str.startswith("pilot (this comparison, 3 seeds)").all()
    # the pilot's own spread of each comparison: its paired differences (the grid is too small for per-cell)
    per_seed = pilot.pivot(index="seed", columns="variant", values="test_accuracy")
    observed = {
        "table11_sign_conv_embed_listops": per_seed["conv_embed"] - per_seed["none"],
        "table11_sign_conv_two_listops": per_seed["conv_two"] - per_seed["none"],
        "own_conv_embed_vs_after_embedding_listops": per_seed["conv_embed"] - per_seed["after_embedding"],
    }
    for claim_id, differences in observed.items():
        assert own.loc[claim_id, "sd_per_seed"] == pytest.approx(differences.std(ddof=1))
    claims = judged(tmp_path, pilot)
    row = claims.loc["table11_sign_conv_embed_listops"]
    ours = table.loc["table11_sign_conv_embed_listops"]
    assert row["ci_low"] > 0 and ours["aim"].startswith(f"the pilot's {100 * row['effect']:+.2f} pp [")
    assert ours["effect_aimed_at"] == pytest.approx(row["effect"])
    assert ours["level"] == pytest.approx(row["power_level"], abs=1e-6)  # the family's order is the same here
    assert ours["seeds_for_80"] == row["seeds_needed"] > 3
    # A 2-seed pilot's effect, its interval holding 0, is shown, not aimed at (it once asked for > 200 seeds).
    two = _own_pilot(2, 0.01, 0.01)
    row = judged(tmp_path, two).loc["table11_sign_conv_embed_listops"]
    unaimed = _own_plan(two).table.set_index("claim_id").loc["table11_sign_conv_embed_listops"]
    assert row["ci_low"] < 0 < row["ci_high"]
    assert unaimed["aim"].startswith(f"none: the pilot's {100 * row['effect']:+.2f} pp [")
    assert np.isnan(unaimed["effect_aimed_at"]) and np.isnan(unaimed["seeds_for_80"])
    one = _own_plan(_own_pilot(1, 0.01, 0.01)).table.set_index("claim_id")
    assert one.loc["table11_sign_conv_embed_listops", "spread_from"] == (
        "Table 15 (the pilot: 1 usable seed(s), a spread needs 2)"
    )


def test_plan_power_prices_extra_seeds_from_the_plan_even_when_small(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A CPU study whose runs took 57 s in all: 3 seeds cost 0.0159 device-hours, not "0" (the plan's total,
    finished runs included, per seed of the config); the paper's claims it does not run are one line."""
    from pdelra.planning.plan_text import print_power

    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text()) | OWN_STUDY
    print_power(config, None, 0.0159, "device-hours")
    printed = capsys.readouterr().out
    assert "what seed counts buy (device-hours: this plan's 0.0159 h of LRA training / 3 seed(s))" in printed
    row = next(line.split() for line in printed.splitlines() if line.split()[:1] == ["5"])
    assert row[-1] == "0.0265"  # 5 seeds at 0.0053 h each
    assert "43 of the paper's claims compare cells this config does not run: after_embedding_gain" in printed


# The claims whose planned power the simulation checks: directional ones between 50 % and 95 %, a multi-scale
# one among them (at 5 seeds and Table 15's spread the analytic power was 7–17 pp above the engine's rate).
CHECKED_POWER = (
    "multiscale_gain_after_embedding",
    "table11_sign_after_mlp_listops",
    "table11_sign_after_mlp_retrieval",
    "table11_sign_between_layers_image",
    "table11_sign_in_attention_pathfinder",
)


@pytest.mark.slow
def test_planned_power_at_five_seeds_is_what_the_claims_engine_gives() -> None:
    """`plan --power` without a pilot (Table 15's spread) against 500 studies drawn at the paper's values with
    that spread (fixed seeds): the power at 5 seeds of five claims is within 5 pp of how often each reads
    "reproduced"."""
    plan = seeds.seeds_table(None, 5, draws=500).table.set_index("claim_id")
    rng = np.random.default_rng(20261207)
    replications = 500  # with the plan's 500 draws: a difference's Monte Carlo se of at most 3.2 pp
    reproduced = pd.Series(0.0, index=list(CHECKED_POWER))
    for _ in range(replications):
        runs = draw_runs(paper_truth, rng, 5, seeds.TABLE15_SD)
        judged = C.evaluate(runs, claims=paper_claims(), power=False).set_index("claim_id")
        reproduced += (judged.loc[list(CHECKED_POWER), "verdict"] == "reproduced") / replications
    table = pd.DataFrame({"planned": plan.loc[list(CHECKED_POWER), "power_at_5"], "simulated": reproduced})
    print(f"\nplanned power at 5 seeds against {replications} simulated studies:\n{table.round(3)}")
    assert ((table["planned"] - table["simulated"]).abs() <= 0.05).all(), table
