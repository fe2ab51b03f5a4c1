"""The related-systems report section on constructed tables with known answers."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from pdelra.reporting import related_section as rs

SEEDS = (0, 1, 2)


def test_mean_ci_is_the_student_t_interval() -> None:
    mean, low, high, n = rs.mean_ci([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)  # t(0.975, 2) · sd 1 / √3
    assert (mean, n) == (2.0, 3) and (low, high) == pytest.approx((2 - half, 2 + half))
    assert math.isnan(rs.mean_ci([5.0])[1]) and rs.mean_ci([])[3] == 0


def _lm_runs(deltas: dict[tuple[str, str], float]) -> pd.DataFrame:
    """MHA at 2.0, 2.1, 2.2 nats; every other (condition, setting) at MHA + delta + a small seed wobble."""
    rows = []
    for (variant, setting), delta in {("mha", "base"): 0.0, **deltas}.items():
        for s in SEEDS:
            wobble = 0.0 if variant == "mha" else 0.01 * (s - 1)
            loss = 2.0 + 0.1 * s + delta + wobble
            rows.append(
                {
                    "task": "lm_text",
                    "variant": variant,
                    "scale": "d256",
                    "setting": setting,
                    "seed": s,
                    "status": "completed",
                    "test_loss_nats": loss,
                    "test_bits_per_byte": loss / math.log(2),
                    "epochs": 20,
                    "corpus": "text",
                }
            )
    return pd.DataFrame(rows)


def _dynamics(l1_alpha: float, other_alpha: float, l1_pe: float, layers: int = 4) -> pd.DataFrame:
    rows = []
    for s in SEEDS:
        for step in (0, 100):
            for layer in range(layers):
                alpha = 0.5 if step == 0 else (l1_alpha if layer == 1 else other_alpha) + 0.0001 * s
                rows.append(
                    {
                        "task": "lm_text",
                        "variant": "physqk_ad",
                        "scale": "d256",
                        "setting": "base",
                        "seed": s,
                        "step": step,
                        "epoch": step // 100,
                        "layer": layer,
                        "alpha": alpha,
                        "eta": 1.0,
                        "eff_pe": (l1_pe if layer == 1 else 0.1) + 0.01 * s,
                    }
                )
    return pd.DataFrame(rows)


def _verdicts(table: pd.DataFrame) -> dict[str, str]:
    return dict(zip(table["claim_id"], table["verdict"], strict=True))


def test_lm_tables_and_claims_reproduce_the_seed_when_the_data_say_so() -> None:
    runs = _lm_runs({("physqk_ad", "base"): -0.065, ("physqk", "base"): +0.05, ("physqk_ad", "shared"): -0.5})
    table = rs.lm_eval_table(runs).set_index("condition")
    assert table.loc["PhysQK-AD", "delta_vs_mha"] == pytest.approx(-0.065)
    assert table.loc["PhysQK-AD", "delta_ci_high"] < 0 < table.loc["PhysQK", "delta_ci_low"]
    assert table.loc["MHA", "loss_nats"] == pytest.approx(2.1) and table.loc["MHA", "n"] == 3
    ablation = rs.ablation_table(runs).set_index("allocation")
    assert ablation.loc["shared", "delta_vs_joint"] == pytest.approx(-0.5 + 0.065)
    verdicts = _verdicts(rs.lm_claims(runs, _dynamics(0.44, 0.001, 1.2)))
    assert verdicts == {
        "lm_physqk_ad_vs_mha": "reproduced",
        "lm_physqk_vs_mha": "reproduced",
        "lm_allocation_shared": "reproduced",
        "lm_l1_most_convective": "reproduced",
        "lm_l1_alpha": "reproduced",
        "lm_closed_layers": "reproduced",
        "lm_l1_pe_above_1": "reproduced",
    }


def test_lm_claims_are_contradicted_when_the_data_disagree() -> None:
    runs = _lm_runs({("physqk_ad", "base"): +0.2, ("physqk", "base"): -0.2, ("physqk_ad", "shared"): +0.3})
    verdicts = _verdicts(rs.lm_claims(runs, _dynamics(0.2, 0.3, 0.5)))
    assert set(verdicts.values()) == {"contradicted"}


def test_per_layer_claims_need_the_layers_they_name() -> None:
    runs = _lm_runs({("physqk_ad", "base"): -0.065})
    verdicts = _verdicts(rs.lm_claims(runs, _dynamics(0.44, 0.001, 1.2, layers=2)))
    assert verdicts["lm_closed_layers"] == "not run" and verdicts["lm_l1_pe_above_1"] == "not run"
    assert verdicts["lm_physqk_vs_mha"] == "not run"  # no physqk runs at all


def _cta_runs() -> pd.DataFrame:
    rows = []
    for s in SEEDS:
        rows.append(
            {
                "task": "listops",
                "variant": "none",
                "scale": "h1",
                "setting": "base",
                "seed": s,
                "status": "completed",
                "test_accuracy": 0.30 + 0.01 * s,
            }
        )
        for steps, gain in (("steps1", 0.02), ("steps4", 0.05)):
            rows.append(
                {
                    "task": "listops",
                    "variant": "cta_wave",
                    "scale": "h1",
                    "setting": steps,
                    "seed": s,
                    "status": "completed",
                    "test_accuracy": 0.30 + 0.01 * s + gain + 0.001 * s,
                }
            )
    return pd.DataFrame(rows)


def test_cta_table_pairs_with_the_baseline_and_cost_flags_the_quadratic_variant() -> None:
    table = rs.cta_table(_cta_runs()).set_index("setting")
    assert table.loc["steps4", "delta_vs_baseline"] == pytest.approx(0.051)
    assert table.loc["steps1", "n"] == 3 and table.loc["steps1", "type"] == "wave"
    cost = pd.DataFrame(
        {
            "task": ["listops"] * 3,
            "variant": ["none", "cta_wave", "cta_reaction_diffusion"],
            "scale": "h1",
            "setting": ["base", "steps4", "steps4"],
        }
    )
    flagged = rs.cta_cost_table(cost).set_index("variant")["attention_memory"]
    assert flagged["cta_reaction_diffusion"].startswith("O(L²)") and flagged["cta_wave"].startswith("O(L)")


def test_cta_claims_join_the_claims_table() -> None:
    from pdelra import claims

    ids = {c.claim_id for c in claims.all_claims()}
    assert {c.claim_id for c in rs.CLAIMS} <= ids
    table = claims.evaluate(_cta_runs(), rs.CLAIMS)
    assert set(table["verdict"]) == {"not run"}  # the claims average five tasks; only ListOps ran


def test_render_saves_every_table_and_says_not_run_without_inputs(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    tables = tmp_path / "tables"
    tables.mkdir()
    rs.render(tmp_path / "absent", tmp_path / "empty")
    assert not (tmp_path / "empty").exists()
    _lm_runs({("physqk_ad", "base"): -0.065, ("physqk", "base"): 0.01}).to_csv(
        tables / "lm_runs.csv", index=False
    )
    _dynamics(0.44, 0.001, 1.2).to_csv(tables / "lm_dynamics.csv", index=False)
    _cta_runs().to_csv(tables / "runs.csv", index=False)
    rs.render(tables, tmp_path / "out")
    saved = {p.name for p in (tmp_path / "out" / "tables").glob("*.csv")}
    assert saved == {
        "lm_eval_loss.csv",
        "lm_alpha_ablation.csv",
        "lm_layers.csv",
        "lm_claims.csv",
        "cta_type_steps.csv",
    }
    assert (tmp_path / "out" / "figures" / "lm_dynamics.png").is_file()
