"""Continuous-Time Attention's WikiText-103 causal LM: the trainer (`pdelra cta-official train-lm`) on a tiny
generated corpus, its schedule and data-size subset, the grid's LM runs, their tables, claims and section.
(The grid's job counts against a real `snakemake -n` are in tests/test_plan.py.)"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO

from pdelra import paper
from pdelra.cta_official import aggregate as tables
from pdelra.cta_official import grid as grid
from pdelra.cta_official.lm import (
    OfficialWarmup,
    _LMRun,
    train_lm,
    validate_lm_run_config,
)
from pdelra.data import cta
from pdelra.data.generate import generate
from pdelra.data.store import load_split
from pdelra.results import claims as C
from pdelra.results.catalogue import cta as cta_claims
from pdelra.training.interrupts import EXIT_INTERRUPTED
from pdelra.training.metrics import TIMING_FIELDS
from pdelra.training.runconfig import RunConfigError

PDE = grid.LM_PDE


def _config(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Generated WikiText-103 and a generated BPE tokenizer.json, as LM blocks of 16 tokens (~120 train)."""
    root = tmp_path_factory.mktemp("wikitext")
    generate("wikitext103", root / "raw", {"n_train": 4, "n_val": 1, "n_test": 1, "seed": 0})
    generate("bpe", root / "bpe", {"seed": 0, "n_texts": 20, "vocab_size": 120})
    cta.preprocess_cta("wikitext103", root / "raw", root / "bpe/tokenizer.json", root / "blocks", 16)
    return root / "blocks"


def _run_config(variant: str = PDE, setting: str = "steps1", **train: Any) -> dict[str, Any]:
    return {
        "task": "wikitext103",
        "variant": variant,
        "scale": "h1",
        "setting": setting,
        "seed": 0,
        "model": {"d_model": 16, "n_layers": 2, "n_heads": 2, "d_mlp": 32, "dropout": 0.1, "cta_steps": 1},
        "train": {
            "batch_size": 8,
            "eval_batch_size": 64,
            "lr": 3e-3,
            "betas": [0.9, 0.999],
            "weight_decay": 0.01,
            "warmup_ratio": 0.1,
            "max_epochs": 3,
            "max_steps": None,
            "grad_clip": 1.0,
            "data_fraction": None,
            "checkpoint_minutes": None,
            "num_threads": 1,
            **train,
        },
    }


@pytest.fixture(scope="module")
def trained(blocks: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("run")
    assert train_lm(_run_config(), blocks, out / "run", out / "ckpt", "cpu") == 0
    return json.loads((out / "run" / "metrics.json").read_text())


# --------------------------------------------------------------------------------------------- trainer


def test_training_lowers_perplexity_and_reports_the_best_epoch(trained: dict[str, Any], blocks: Path) -> None:
    history = trained["history"]
    assert len(history) == trained["epochs_run"] == 3
    val = [h["val_perplexity"] for h in history]
    assert all(math.isfinite(v) and v > 1 for v in val) and val[-1] < val[0]
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert trained["best_val_perplexity"] == pytest.approx(min(val))
    assert trained["best_val_perplexity"] == pytest.approx(math.exp(trained["best_val_loss_nats"]))
    assert val[trained["best_epoch"] - 1] == pytest.approx(trained["best_val_perplexity"])
    assert math.isfinite(trained["test_perplexity"]) and trained["status"] == "completed"
    keys = {k: trained[k] for k in ("task", "variant", "scale", "setting", "seed")}
    assert keys == {"task": "wikitext103", "variant": PDE, "scale": "h1", "setting": "steps1", "seed": 0}
    n = load_split(blocks, "train").tokens.shape[0]
    assert trained["train_blocks"] == trained["train_blocks_of"] == n
    assert trained["steps_run"] == trained["steps_per_epoch"] * 3 == math.ceil(n / 8) * 3
    assert trained["warmup_steps"] == int(0.1 * trained["planned_steps"])
    assert trained["wall_time_s"] > 0 and trained["median_step_time_s"] > 0
    # one α per PDE step per layer, learned away from the official 0.10
    assert [(r["layer"], r["step"]) for r in trained["pde_coefficients"]] == [(0, 0), (1, 0)]
    assert all(r["alpha"] != 0.1 and r["beta"] is None for r in trained["pde_coefficients"])


def test_an_interrupted_run_resumes_to_the_same_metrics(
    trained: dict[str, Any], blocks: Path, tmp_path: Path
) -> None:
    class StopAfter:
        """An interrupt flag that goes up after `n` checks (one check per optimizer step)."""

        def __init__(self, n: int) -> None:
            self.left = n

        def __bool__(self) -> bool:
            self.left -= 1
            return self.left < 0

    cfg = validate_lm_run_config(_run_config())
    out, ckpt = tmp_path / "run", tmp_path / "ckpt"
    steps = trained["steps_per_epoch"] + 3  # mid-way through the second epoch
    assert _LMRun(cfg, blocks, out, ckpt, "cpu").run(StopAfter(steps)) == EXIT_INTERRUPTED  # type: ignore[arg-type]
    assert (ckpt / "checkpoint.pt").is_file() and not (out / "metrics.json").exists()
    assert _LMRun(cfg, blocks, out, ckpt, "cpu").run(StopAfter(10**9)) == 0  # type: ignore[arg-type]
    resumed = json.loads((out / "metrics.json").read_text())
    assert resumed["resumed_count"] == 1 and not (ckpt / "checkpoint.pt").exists()
    differ = {k for k in trained if resumed.get(k) != trained[k]}
    assert differ <= TIMING_FIELDS, differ - TIMING_FIELDS


def test_the_standard_model_and_a_data_fraction(blocks: Path, tmp_path: Path) -> None:
    cfg = _run_config("none", "data50", data_fraction=0.5, max_epochs=1)
    assert train_lm(cfg, blocks, tmp_path / "run", tmp_path / "ckpt", "cpu") == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    n = metrics["train_blocks_of"]
    assert metrics["train_blocks"] == int(n * 0.5) and metrics["data_fraction"] == 0.5
    assert metrics["pde_coefficients"] == [] and math.isfinite(metrics["best_val_perplexity"])


def test_run_config_errors_name_the_key(blocks: Path, tmp_path: Path) -> None:
    bad = _run_config()
    bad["train"]["warmup_steps"] = 10  # the LM warms up over a ratio of all steps
    with pytest.raises(RunConfigError, match=r"train.*warmup_steps"):
        validate_lm_run_config(bad)
    with pytest.raises(RunConfigError, match="variant 'cta_diffusion' puts operators at attn_values"):
        train_lm(_run_config("cta_diffusion"), blocks, tmp_path / "r", tmp_path / "c", "cpu")
    with pytest.raises(RunConfigError, match="no block"):
        train_lm(_run_config(data_fraction=1e-6), blocks, tmp_path / "r", tmp_path / "c", "cpu")


def test_the_official_schedule_warms_up_from_a_tenth_then_stays() -> None:
    warm = OfficialWarmup(10)
    assert [warm(s) for s in (0, 5, 10, 11, 1000)] == pytest.approx([0.1, 0.55, 1.0, 1.0, 1.0])
    assert OfficialWarmup(0)(0) == 1.0


def test_subset_rows_are_a_seeded_function_shared_with_pdelra_subset(tmp_path: Path) -> None:
    rows = cta.subset_rows(1000, 0.05, seed=3)
    assert len(rows) == 50 and np.all(np.diff(rows) > 0)  # int(N × fraction), in order
    assert np.array_equal(rows, cta.subset_rows(1000, 0.05, seed=3))
    assert not np.array_equal(rows, cta.subset_rows(1000, 0.05, seed=4))
    assert len(cta.subset_rows(1000, 0.001, seed=0)) == 1 and len(cta.subset_rows(999, 0.001, 0)) == 0
    generate("sst2", tmp_path / "raw", {"n_train": 40, "n_val": 4, "n_test": 4})
    generate("wordpiece", tmp_path / "vocab", {"n_texts": 20})
    cta.preprocess_cta("sst2", tmp_path / "raw", tmp_path / "vocab/vocab.txt", tmp_path / "full")
    cta.subset(tmp_path / "full", tmp_path / "part", 0.25, seed=2)
    full, part = (load_split(tmp_path / name, "train").tokens for name in ("full", "part"))
    assert np.array_equal(np.asarray(part), np.asarray(full)[cta.subset_rows(40, 0.25, 2)])


# ------------------------------------------------------------------------------------------------ grid


def test_the_grid_runs_the_official_ablations_at_the_official_recipe() -> None:
    section = _config("config")["cta_official"]
    runs = grid.lm_runs(section)
    cells = sorted({(v, s) for _, v, _, s, _ in runs})
    kinds = [v for v in grid.VARIANTS if v != "none"]
    assert cells == sorted(
        [("none", "base")]
        + [(PDE, f"steps{n}") for n in (1, 2, 4, 8)]
        + [(v, "steps4") for v in kinds if v != PDE]
        + [(v, f"data{p}") for v in ("none", PDE) for p in ("0p1", "1", "5", "10")]
    )
    assert len(runs) == 16 * 5 and {r[0] for r in runs} == {"wikitext103"}
    assert grid.steps_setting(grid.OFFICIAL_LM_STEPS) == cta_claims.CTA_OFFICIAL_LM_SETTING == "steps4"
    rc = grid.lm_run_config(section, PDE, "data0p1", 2)
    assert (rc["model"]["cta_steps"], rc["train"]["data_fraction"], rc["seed"]) == (4, 0.001, 2)
    assert (rc["model"]["d_model"], rc["model"]["n_layers"], rc["model"]["n_heads"]) == (128, 2, 4)
    assert (rc["train"]["batch_size"], rc["train"]["max_epochs"], rc["train"]["lr"]) == (16, 20, 1e-4)
    assert grid.lm_run_config(section, PDE, "steps8", 0)["model"]["cta_steps"] == 8
    validate_lm_run_config(rc)
    with pytest.raises(ValueError, match="unknown WikiText-103 setting 'steps3'"):
        grid.lm_run_config(section, PDE, "steps3", 0)
    demo = grid.lm_runs(_config("demo")["cta_official"])
    # The demo: one toy configuration of each experiment (Tables 3, 4, 5, the data-size script).
    assert {(variant, setting) for _, variant, _, setting, _ in demo} == {
        ("none", "base"), (PDE, "steps4"), (PDE, "steps1"), ("cta_official_wave", "steps4"),
        ("none", "data50"), (PDE, "data50"),
    }  # fmt: skip


def test_config_check_refuses_an_lm_that_cannot_build() -> None:
    from pdelra.planning.config_check import config_problems

    config = copy.deepcopy(_config("demo"))
    config["cta_official"]["wikitext103"]["model"]["n_heads"] = 3  # 16 % 3
    assert any("cta_official.wikitext103" in p and "n_heads" in p for p in config_problems(config))


# ---------------------------------------------------------------------------------- tables and claims


def _lm_runs(perplexity: dict[tuple[str, str], float], seeds: int = 5, sd: float = 0.01) -> pd.DataFrame:
    """LM rows: each cell's best validation perplexity around the given value, a shared draw per seed."""
    rng = np.random.default_rng(0)
    rows = []
    for s in range(seeds):
        shared = rng.normal(0, sd)
        for (variant, setting), value in perplexity.items():
            steps, fraction = grid.lm_settings(_config("config")["cta_official"])[setting]
            ppl = value + shared + rng.normal(0, sd)
            rows.append(dict(task="wikitext103", variant=variant, scale="h1", setting=setting, seed=s,
                             status="completed", best_val_perplexity=ppl, test_perplexity=ppl + 0.1,
                             data_fraction=fraction, cta_steps=steps))  # fmt: skip
    return pd.DataFrame(rows)


PAPER_LIKE = {  # the published order: 4 < 2 < 1 steps, PDE < standard, wave above diffusion
    ("none", "base"): 3.6,
    (PDE, "steps1"): 3.49,
    (PDE, "steps2"): 3.42,
    (PDE, "steps4"): 3.36,
    (PDE, "steps8"): 3.30,
    ("cta_official_wave", "steps4"): 3.48,
    ("cta_official_reaction_diffusion", "steps4"): 3.36,
    ("cta_official_advection_diffusion", "steps4"): 3.39,
    ("none", "data1"): 9.0,
    (PDE, "data1"): 8.5,
}


def test_claims_read_the_lm_rows() -> None:
    # Table 5's reaction-diffusion = diffusion (2.15 both) is a no-difference claim, within 1 % of diffusion's
    # perplexity (±0.0215); advection-diffusion's 2.18 (+0.03) is outside it: a directional claim.
    expected = {
        c.claim_id: c.expected for c in cta_claims.cta_official_claim_list() if isinstance(c, C.Difference)
    }
    assert expected["cta_official_type_reaction_diffusion"] == 0
    assert expected["cta_official_type_advection_diffusion"] == expected["cta_official_type_wave"] == 1
    claims = {r["claim_id"]: r for r in cta_claims.cta_official_claims(_lm_runs(PAPER_LIKE, sd=0.001))}
    assert claims["cta_official_type_advection_diffusion"]["verdict_unadjusted"] == "reproduced"  # above
    assert claims["cta_official_steps_order"]["verdict_unadjusted"] == "reproduced"
    assert claims["cta_official_wikitext103"]["verdict_unadjusted"] == "reproduced"
    assert claims["cta_official_wikitext103"]["effect"] == pytest.approx(3.36 - 3.6, abs=0.02)
    assert claims["cta_official_type_wave"]["verdict_unadjusted"] == "reproduced"  # above diffusion
    assert claims["cta_official_type_reaction_diffusion"]["verdict_unadjusted"] == "reproduced"  # equal
    # 0.015 above diffusion is still "equal" at this margin (it was "different" at the accuracy margin 0.01)
    close = {**PAPER_LIKE, ("cta_official_reaction_diffusion", "steps4"): 3.375}
    rd = {r["claim_id"]: r for r in cta_claims.cta_official_claims(_lm_runs(close, sd=0.001))}
    assert rd["cta_official_type_reaction_diffusion"]["verdict_unadjusted"] == "reproduced"
    reversed_ = {**PAPER_LIKE, (PDE, "steps1"): 3.30, (PDE, "steps4"): 3.49}
    steps = {r["claim_id"]: r for r in cta_claims.cta_official_claims(_lm_runs(reversed_))}[
        "cta_official_steps_order"
    ]
    assert steps["verdict_unadjusted"] == "contradicted"
    assert all(r["verdict_unadjusted"] == "not run" for r in cta_claims.cta_official_claims(None))


def test_lm_table_has_a_row_per_ablation_and_cell() -> None:
    runs = _lm_runs(PAPER_LIKE, sd=0.0)
    runs.loc[(runs["setting"] == "steps8") & (runs["seed"] == 0), "status"] = "diverged"
    lm = tables.summarise_lm(runs)
    assert list(lm["ablation"].drop_duplicates()) == list(tables.ABLATIONS)
    at = lm.set_index(["ablation", "variant", "setting"])
    table3 = paper.CTA_OFFICIAL["wikitext103"]
    assert at.loc[("standard vs PDE", "none", "base"), "official"] == table3["none"]
    for ablation, official in (("standard vs PDE", 1.02), ("steps", 3.36), ("type", 2.15)):
        row = at.loc[(ablation, PDE, "steps4")]  # one run, in three tables
        assert row["official"] == official and row["best_val_perplexity_mean"] == pytest.approx(3.36)
    assert math.isnan(at.loc[("steps", PDE, "steps8"), "official"])  # "unstable": no number
    assert (at.loc[("steps", PDE, "steps8"), "n"], at.loc[("steps", PDE, "steps8"), "n_runs"]) == (4, 5)
    assert at.loc[("data size", PDE, "data1"), "data_fraction"] == 0.01
    assert list(lm[lm["ablation"] == "steps"]["cta_steps"]) == [1, 2, 4, 8]
    assert tables.summarise(runs).empty  # no classification rows: nothing in the accuracy summary


def test_aggregate_reads_the_lm_metrics(trained: dict[str, Any], tmp_path: Path) -> None:
    from pdelra.runs import run_dir

    path = run_dir(tmp_path / "cta_official" / "runs", "wikitext103", PDE, "h1", "steps1", 0) / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(trained))
    written = tables.aggregate([path], tmp_path / "tables")
    row = written["cta_official_runs"].iloc[0]
    assert row["best_val_perplexity"] == pytest.approx(trained["best_val_perplexity"])
    assert (row["cta_steps"], row["setting"]) == (1, "steps1")
    lm = pd.read_csv(tmp_path / "tables" / "cta_official_lm.csv")
    assert list(lm["ablation"]) == ["steps"] and lm["n"].item() == 1


def test_section_shows_a_table_per_ablation(tmp_path: Path, said: list[str]) -> None:
    from pdelra.reporting.io import read_artifacts
    from pdelra.reporting.sections import Report
    from pdelra.reporting.sections import cta_official as section

    folder = tmp_path / "tables"
    folder.mkdir()
    tables.summarise_lm(_lm_runs(PAPER_LIKE)).to_csv(folder / "cta_official_lm.csv", index=False)
    section.render(Report.open(folder, tmp_path / "out", "unit"))
    names = {a["name"] for a in read_artifacts(tmp_path / "out")}
    assert {f"cta_official_lm_{k.replace(' ', '_').lower()}" for k in tables.ABLATIONS} <= names
    steps = pd.read_csv(tmp_path / "out" / "tables" / "cta_official_lm_steps.csv", dtype=str)
    assert list(steps["PDE steps"]) == ["1", "2", "4", "8"]
    assert list(steps["Official perplexity"]) == ["3.49", "3.42", "3.36", "—"]  # 8 steps: "unstable"
    data = pd.read_csv(tmp_path / "out" / "tables" / "cta_official_lm_data_size.csv")
    assert list(data["Model"]) == ["Standard Transformer", "CTA (official) diffusion"]
