"""The diagnostics report section on constructed tables whose answers are known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from pdelra.diagnose import COLUMNS
from pdelra.reporting import diagnostics_section as section

VARIANTS = ["after_embedding", "between_layers", "in_attention", "after_mlp", "after_attention"]


def diagnostics_table(
    commutators: dict[tuple[str, str, int], float], blocks: int = 2, setting: str = "base"
) -> pd.DataFrame:
    """Rows as `pdelra diagnose` writes them: per run (task, variant, seed) and block, a residual row, a
    probe row and (variant ≠ none) a trained row whose commutator is commutators[run] + block/1000."""
    rows = []
    for (task, variant, seed), value in commutators.items():
        for block in range(blocks):
            base = {"task": task, "variant": variant, "scale": "h1", "setting": setting, "seed": seed}
            base |= {"block": block, "n_examples": 8, "alpha_mean": math.nan}
            rows.append(
                base
                | {
                    "operator": "residual",
                    "kind": "residual",
                    "position": "residual_stream",
                    "rel_roughness_in": 2.0 - block / 2,
                    "rel_roughness_out": 1.5 - block / 2,
                }
            )
            rows.append(
                base
                | {
                    "operator": "probe",
                    "kind": "probe",
                    "position": "probe",
                    "alpha_mean": 0.1,
                    "commutator": 0.5,
                    "commutator_branch": 1.0,
                }
            )
            if variant != "none":
                rows.append(
                    base
                    | {
                        "operator": f"encoder.blocks.{block}.x",
                        "kind": "trained",
                        "position": "x",
                        "commutator": value + block / 1000,
                        "commutator_branch": 2 * value,
                        "rel_roughness_in": 2.0,
                        "rel_roughness_out": 2.0 * (1 - value),
                        "bound_ratio": 0.9,
                    }
                )
    return pd.DataFrame(rows).reindex(columns=list(COLUMNS))


def runs_table(accuracy: dict[tuple[str, str, int], float], setting: str = "base") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "task": t,
                "variant": v,
                "scale": "h1",
                "setting": setting,
                "seed": s,
                "status": "completed",
                "test_accuracy": a,
            }
            for (t, v, s), a in accuracy.items()
        ]
    )


def monotone_case(seeds: tuple[int, ...] = (0, 1, 2)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gain = −commutator exactly, with seed-to-seed noise that never changes the order."""
    comm, acc = {}, {}
    for seed in seeds:
        acc[("listops", "none", seed)] = 0.5 + 0.01 * seed
        for i, variant in enumerate(VARIANTS):
            comm[("listops", variant, seed)] = 0.1 * (i + 1) + 0.001 * seed
            acc[("listops", variant, seed)] = 0.5 + 0.01 * seed - 0.02 * (i + 1)
    return diagnostics_table(comm), runs_table(acc)


@settings(max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 4), st.floats(-1, 1)), min_size=3, max_size=12))
def test_spearman_matches_scipy_including_ties(pairs: list[tuple[int, float]]) -> None:
    xs, ys = [float(a) for a, _ in pairs], [b for _, b in pairs]  # integer xs: many ties
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        assert math.isnan(section.spearman(xs, ys))
    else:
        expected = scipy.stats.spearmanr(xs, ys).statistic
        assert section.spearman(xs, ys) == pytest.approx(expected, abs=1e-9)


def test_per_run_and_per_position_average_blocks_then_seeds() -> None:
    diagnostics, _ = monotone_case()
    runs = section.per_run(diagnostics)
    row = runs[(runs["variant"] == "in_attention") & (runs["seed"] == 1)].iloc[0]
    assert row["commutator"] == pytest.approx(0.3 + 0.001 + 0.0005)  # blocks 0 and 1 add 0, 0.001
    assert row["roughness_reduction"] == pytest.approx(0.301)  # 1 − 2(1 − c)/2 = c (before block offsets)
    assert row["probe_commutator"] == 0.5
    table = section.per_position(diagnostics)
    cell = table[table["variant"] == "in_attention"].iloc[0]
    assert cell["commutator"] == pytest.approx(0.3 + 0.001 + 0.0005) and cell["seeds"] == 3


def test_a_perfectly_predictive_commutator_gives_rho_minus_one_and_a_yes() -> None:
    diagnostics, runs = monotone_case()
    points = section.mechanism_points(diagnostics, runs)
    assert len(points) == len(VARIANTS) * 3 and points["baseline_accuracy"].notna().all()
    test = section.mechanism_test(points).set_index("predictor")
    row = test.loc["commutator"]
    assert row["rho"] == pytest.approx(-1) and row["points"] == len(VARIANTS) and row["seeds"] == 3
    assert row["ci_low"] == pytest.approx(-1) and row["ci_high"] == pytest.approx(-1)
    assert row["verdict"] == "reproduced" and row["answer"].startswith("yes")
    # The roughness reduction equals the commutator here: it predicts a loss where the theory expects a gain.
    assert test.loc["roughness_reduction", "rho"] == pytest.approx(-1)
    assert test.loc["roughness_reduction", "verdict"] == "contradicted"
    assert test.loc["roughness_reduction", "answer"].startswith("no: the CI excludes 0 in the opposite")


def test_a_ci_that_excludes_zero_is_not_a_yes_when_rho_is_not_significant_across_points() -> None:
    # Three positions with a weak, seed-stable ordering: ρ = −0.5 whatever the seeds, p ≈ 0.67.
    comm, acc = {}, {}
    for seed in (0, 1, 2):
        acc[("listops", "none", seed)] = 0.5
        for variant, c, gain in (("a", 0.1, 0.02), ("b", 0.2, 0.03), ("c", 0.3, 0.01)):
            comm[("listops", variant, seed)] = c
            acc[("listops", variant, seed)] = 0.5 + gain + 0.001 * seed
    test = section.mechanism_test(section.mechanism_points(diagnostics_table(comm), runs_table(acc)))
    row = test.set_index("predictor").loc["commutator"]
    assert row["rho"] == pytest.approx(-0.5) and row["ci_low"] == row["ci_high"] == pytest.approx(-0.5)
    assert row["verdict"] == "reproduced"  # the project's rule on the seed CI alone
    assert row["p_value"] > 0.05 and row["answer"].startswith("no evidence: stable over seeds")


def test_seeds_that_disagree_give_a_ci_that_includes_zero() -> None:
    # Seed 0: gain = +commutator; seed 1: gain = −commutator. Means are flat, each seed alone is ±1.
    comm, acc = {}, {}
    for seed, sign in ((0, 1), (1, -1)):
        acc[("text", "none", seed)] = 0.6
        for i, variant in enumerate(VARIANTS):
            comm[("text", variant, seed)] = 0.1 * (i + 1)
            acc[("text", variant, seed)] = 0.6 + sign * 0.01 * (i + 1)
    test = section.mechanism_test(section.mechanism_points(diagnostics_table(comm), runs_table(acc)))
    row = test.set_index("predictor").loc["commutator"]
    assert math.isnan(row["rho"])  # the seed means are all equal
    assert row["ci_low"] == pytest.approx(-1) and row["ci_high"] == pytest.approx(1)
    assert row["verdict"] == "inconclusive" and row["answer"].startswith("no evidence")


def test_one_seed_or_too_few_points_gives_no_answer_but_a_row() -> None:
    diagnostics, runs = monotone_case(seeds=(0,))
    row = section.mechanism_test(section.mechanism_points(diagnostics, runs)).set_index("predictor")
    assert row.loc["commutator", "rho"] == pytest.approx(-1)
    assert math.isnan(row.loc["commutator", "ci_low"]) and row.loc["commutator", "verdict"] == "inconclusive"
    assert row.loc["commutator", "answer"].startswith("one seed")
    few = diagnostics[diagnostics["variant"].isin(["after_embedding", "after_mlp"])]
    row = section.mechanism_test(section.mechanism_points(few, runs)).set_index("predictor")
    assert row.loc["commutator", "points"] == 2 and row.loc["commutator", "answer"].startswith("not enough")


def test_mechanism_points_pair_seeds_and_skip_other_settings_and_failed_runs() -> None:
    diagnostics, runs = monotone_case()
    other = diagnostics_table({("listops", "after_mlp", 0): 9.0}, setting="steps2")
    runs.loc[(runs["variant"] == "after_attention") & (runs["seed"] == 2), "status"] = "diverged"
    points = section.mechanism_points(pd.concat([diagnostics, other]), runs)
    assert set(points["commutator"]) <= {c for c in section.per_run(diagnostics)["commutator"]}
    assert len(points) == len(VARIANTS) * 3 - 1
    row = points[(points["variant"] == "in_attention") & (points["seed"] == 2)].iloc[0]
    assert row["baseline_accuracy"] == pytest.approx(0.52)


def test_render_says_not_run_without_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("IPython")
    section.render(tmp_path / "tables", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "diagnostics.csv").write_text("")
    section.render(tmp_path / "tables", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_render_saves_every_figure_and_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.pyplot as plt

    diagnostics, runs = monotone_case()
    tables = tmp_path / "tables"
    tables.mkdir()
    diagnostics.to_csv(tables / "diagnostics.csv", index=False)
    runs.to_csv(tables / "runs.csv", index=False)
    section.render(tables, tmp_path / "out")
    artifacts = json.loads((tmp_path / "out" / "artifacts.json").read_text())["artifacts"]
    names = {(a["kind"], a["name"]) for a in artifacts}
    assert names == {
        ("figure", "diagnostics_roughness_depth"),
        ("figure", "diagnostics_commutator"),
        ("figure", "diagnostics_commutator_branch"),
        ("figure", "diagnostics_mechanism"),
        ("table", "diagnostics_per_position"),
        ("table", "diagnostics_mechanism"),
    }
    for artifact in artifacts:
        for name in artifact["files"]:
            assert (tmp_path / "out" / name).stat().st_size > 0
    mechanism = pd.read_csv(tmp_path / "out" / "tables" / "diagnostics_mechanism.csv")
    assert mechanism.set_index("predictor").loc["commutator", "verdict"] == "reproduced"
    # Without runs.csv the figures and the per-position table are still made; the mechanism test says so.
    (tables / "runs.csv").unlink()
    for name in ("figure_roughness", "figure_commutator"):  # drawn above already; cheap stand-ins here
        monkeypatch.setattr(section, name, lambda *args: plt.figure())
    section.render(tables, tmp_path / "out2")
    saved = {a["name"] for a in json.loads((tmp_path / "out2" / "artifacts.json").read_text())["artifacts"]}
    assert "diagnostics_mechanism" not in saved and "diagnostics_per_position" in saved
