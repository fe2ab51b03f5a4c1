"""`pdelra plan --power`: the seeds each claim needs, from a pilot's spread or the paper's Table 15."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO
from test_claims_reach import draw_runs, paper_truth

from pdelra.cli import main
from pdelra.results import seeds


def test_without_a_pilot_the_spread_is_table_15s() -> None:
    table = seeds.seeds_table().set_index("claim_id")
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
    table = seeds.seeds_table(pilot).set_index("claim_id")
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
    assert "seeds each claim needs for 80 % power at the paper's effect" in printed
    assert "after_embedding_gain" in printed and "pilot (8 cells × 3 seeds)" in printed
    assert "what seed counts buy" in printed and "primary claims at 80 % power" in printed
    assert main([*args[:-1], "--tables", str(pilot)]) == 1  # --tables alone: one line, no traceback
    assert main([*args, "--tables", str(tmp_path)]) == 1  # no runs.csv there
