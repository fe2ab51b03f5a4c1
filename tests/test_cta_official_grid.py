"""Continuous-Time Attention's own experiments as a grid: its config checks, claims, tables and section.
(The grid's job counts against a real `snakemake -n` are in tests/test_plan.py.)"""

from __future__ import annotations

import copy
import json
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
from pdelra.cta_official.part import TABLES as CTA_OFFICIAL_TABLES
from pdelra.nn.cta_official import OFFICIAL_VARIANTS
from pdelra.planning.config_check import config_problems
from pdelra.reporting.io import read_artifacts
from pdelra.reporting.sections import Report
from pdelra.reporting.sections import cta_official as section
from pdelra.results.build import claims_table
from pdelra.results.catalogue import cta

PDE = "cta_official_diffusion"


def _config(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())


def test_the_grid_takes_the_official_rows_and_the_official_recipe() -> None:
    assert ("none", *OFFICIAL_VARIANTS) == grid.VARIANTS
    section_ = _config("config")["cta_official"]
    runs = grid.runs(section_)
    assert len(runs) == 4 * 2 * 5 and {r[2:4] for r in runs} == {("h1", "base")}
    recipe = {
        task: (
            rc["model"]["d_model"],
            rc["model"]["n_layers"],
            rc["train"]["batch_size"],
            rc["train"]["max_epochs"],
        )
        for task in grid.TASKS
        for rc in [grid.run_config(section_, task, PDE, 0)]
    }  # src/configs/{imdb,ag_news,sst2,char_level_imdb}.yaml
    assert recipe == {"imdb": (128, 2, 64, 5), "agnews": (128, 2, 64, 5), "sst2": (128, 2, 512, 2),
                      "imdb_char": (256, 4, 16, 10)}  # fmt: skip
    rc = grid.run_config(section_, "sst2", PDE, 3)
    assert rc["model"]["backbone"] == "official_cta" and rc["model"]["cta_steps"] == 1 and rc["seed"] == 3
    assert (rc["train"]["lr"], rc["train"]["weight_decay"], rc["train"]["warmup_steps"]) == (1e-4, 0.01, 26)


def test_config_check_refuses_what_the_grid_cannot_run() -> None:
    assert config_problems(_config("config")) == [] and config_problems(_config("demo")) == []
    config = _config("config")
    config["cta_official"]["tasks"]["sst2"]["model"] = {"backbone": "pdelra"}
    del config["cta_official"]["downloads"]["bert_uncased_vocab"]
    del config["cta_official"]["defaults"]["train"]["lr"]
    problems = config_problems(config)
    assert any("task sst2" in p and "backbone must be official_cta" in p for p in problems), problems
    assert any("task imdb" in p and "train" in p and "lr" in p for p in problems), problems
    assert (
        "data.source is real, so cta_official.downloads.bert_uncased_vocab (url, md5) is needed" in problems
    )
    demo = _config("demo")
    demo["cta_official"]["tasks"]["agnews"]["model"] = {"n_heads": 3}  # 32 % 3
    demo["run_grids"] = ["related"]  # ListOps only: nothing else generates the IMDb reviews imdb_char reads
    del demo["tasks"]["text"]
    problems = config_problems(demo)
    assert any("task agnews" in p and "n_heads" in p for p in problems), problems
    assert "cta_official's IMDb tasks read the generated `text` task: add tasks.text" in problems
    bad = copy.deepcopy(_config("demo"))
    bad["cta_official"]["variants"] = ["after_embedding"]  # not a row of the official backbone
    assert any("cta_official.variants" in p for p in config_problems(bad))


def _runs(effects: dict[str, float], seeds: int = 5, sd: float = 0.003, seed: int = 0) -> pd.DataFrame:
    """Runs of every classification task: baseline at the official value, PDE at it + effects[task]."""
    rng = np.random.default_rng(seed)
    rows = []
    for task in grid.TASKS:
        for s in range(seeds):
            shared = rng.normal(0, sd)  # the seed's own draw, common to both variants
            for variant, shift in (("none", 0.0), (PDE, effects.get(task, 0.0))):
                acc = paper.CTA_OFFICIAL[task]["none"] + shift + shared + rng.normal(0, sd)
                rows.append(dict(task=task, variant=variant, scale="h1", setting="base", seed=s,
                                 status="completed", test_accuracy=acc))  # fmt: skip
    return pd.DataFrame(rows)


def _by_id(frame: pd.DataFrame) -> dict[str, pd.Series]:
    return {r["claim_id"]: r for _, r in frame.iterrows()}


def test_claims_judge_the_official_numbers_by_the_papers_rule() -> None:
    # A clear +10 pp gain on AG News (official +11.6) → reproduced; SST-2 reversed → contradicted; IMDb
    # with no effect (official +3) → inconclusive, its size smaller than claimed; characters: the official
    # +0.76 pp is within ±1 pp, a no-difference claim judged around the official value → ours at it:
    # reproduced by TOST.
    runs = _runs({"agnews": 0.10, "sst2": -0.05, "imdb_char": 0.0076})
    claims = _by_id(claims_table({"runs": pd.DataFrame(), "cta_official_runs": runs}))
    ours = {k: v for k, v in claims.items() if v["family"] == "cta_official"}
    assert set(ours) == {c.claim_id for c in cta.cta_official_claim_list()}
    assert ours["cta_official_agnews"]["verdict"] == "reproduced"
    assert ours["cta_official_agnews"]["paper_effect"] == pytest.approx(0.116)
    assert ours["cta_official_agnews"]["effect"] == pytest.approx(0.10, abs=0.01)
    assert ours["cta_official_sst2"]["verdict"] == "contradicted"
    assert ours["cta_official_imdb"]["verdict"] == "inconclusive"
    assert ours["cta_official_imdb"]["size"] == "smaller than claimed"
    assert ours["cta_official_imdb_char"]["verdict"] == "reproduced"
    assert ours["cta_official_imdb_char"]["method"].endswith("TOST within ±0.01 of the paper's +0.0076")
    assert all(v["adjustment"].startswith("Holm within 'cta_official'") for v in ours.values())
    # No WikiText-103 rows here: its claims are not run (tests/test_cta_official_lm.py judges them).
    lm = [v for k, v in ours.items() if k not in {f"cta_official_{t}" for t in grid.TASKS}]
    assert len(lm) == 5 and all(v["verdict"] == "not run" for v in lm)


def test_claims_without_the_grid_are_not_run_and_one_seed_is_inconclusive() -> None:
    rows = cta.cta_official_claims(None)
    assert rows and all(r["verdict_unadjusted"] == "not run" for r in rows)
    one = _by_id(pd.DataFrame(cta.cta_official_claims(_runs({"agnews": 0.10}, seeds=1))))
    assert one["cta_official_agnews"]["verdict_unadjusted"] == "inconclusive"


def test_summary_puts_ours_beside_the_official_number() -> None:
    runs = _runs({"agnews": 0.10}, sd=0.0)
    runs.loc[(runs["task"] == "sst2") & (runs["variant"] == PDE) & (runs["seed"] == 0), "status"] = "diverged"
    summary = tables.summarise(runs).set_index(["task", "variant"])
    row = summary.loc[("agnews", PDE)]
    assert (row["n_runs"], row["n"]) == (5, 5) and row["official"] == pytest.approx(0.721)
    assert row["test_accuracy_mean"] == pytest.approx(0.705)
    assert row["ours_minus_official"] == pytest.approx(-0.016)
    assert summary.loc[("sst2", PDE), "n"] == 4  # the diverged run is counted, not averaged
    assert tables.summarise(pd.DataFrame()).empty


def _metrics(
    root: Path, task: str, variant: str, seed: int, accuracy: float, says: int | None = None
) -> Path:
    """A metrics.json at the run's place; `says`: the seed the file itself gives (default: its folder's)."""
    path = root / task / variant / "h1" / "base" / f"seed{seed}" / "metrics.json"
    path.parent.mkdir(parents=True)
    keys = dict(task=task, variant=variant, scale="h1", setting="base", seed=seed if says is None else says)
    path.write_text(json.dumps({**keys, "status": "completed", "test_accuracy": accuracy}))
    return path


def test_aggregate_writes_both_tables_and_catches_a_misplaced_run(tmp_path: Path) -> None:
    from pdelra.cli import main
    from pdelra.steps.aggregate import MetricsError

    runs = tmp_path / "cta_official" / "runs"
    files = [_metrics(runs, "agnews", v, 0, a) for v, a in (("none", 0.6), (PDE, 0.7))]
    assert main(["cta-official", "aggregate", "--out", str(tmp_path / "tables"), *map(str, files)]) == 0
    written = {name: pd.read_csv(tmp_path / "tables" / f"{name}.csv") for name in CTA_OFFICIAL_TABLES}
    assert list(written["cta_official_runs"]["variant"]) == [PDE, "none"]
    differences = written["cta_official_summary"]["ours_minus_official"]
    assert list(differences) == pytest.approx([0.7 - 0.721, 0.6 - 0.605])
    wrong = _metrics(runs, "sst2", "none", 1, 0.5, says=2)
    with pytest.raises(MetricsError, match="does not match its location"):
        tables.aggregate([wrong], tmp_path / "t2")


def test_section_shows_official_ours_verdicts_and_the_differences(tmp_path: Path, said: list[str]) -> None:
    folder, out = tmp_path / "tables", tmp_path / "out"
    folder.mkdir()
    runs = _runs({"agnews": 0.10})
    tables.summarise(runs).to_csv(folder / "cta_official_summary.csv", index=False)
    claims = claims_table({"runs": pd.DataFrame(), "cta_official_runs": runs})
    claims.to_csv(folder / "claims.csv", index=False)
    section.render(Report.open(folder, out, "unit"))
    assert {a["name"] for a in read_artifacts(out)} == {
        "cta_official_summary",
        "cta_official_claims",
        "cta_official_differences",
    }
    shown = pd.read_csv(out / "tables" / "cta_official_summary.csv")
    agnews = shown[(shown["Task"] == "AG News") & (shown["Model"] == "CTA (official) diffusion")].iloc[0]
    assert agnews["Official (%)"] == 72.1 and "Seeds" not in shown.columns  # 5 seeds everywhere: said once
    verdicts = pd.read_csv(out / "tables" / "cta_official_claims.csv")
    assert verdicts.loc[verdicts["Claim"].str.contains("AG News"), "Verdict"].item() == "reproduced"
    differences = pd.read_csv(out / "tables" / "cta_official_differences.csv")
    assert len(differences) == 11 and "boundary" in set(differences["What"])
    wave = differences.set_index("What").loc["wave", "The official code"]
    assert wave == "first-order update α²Δu, α₀ = 0.15"
    assert any("WikiText-103 (Tables 3–5): not run" in line for line in said)
    assert any("The operators on an LRA task: not run" in line for line in said)


def test_section_shows_the_operators_on_an_lra_task(tmp_path: Path, said: list[str]) -> None:
    from pdelra.results import related

    folder, out = tmp_path / "tables", tmp_path / "out"
    folder.mkdir()
    rows = [{"task": "listops", "variant": v, "scale": "h1", "setting": s, "seed": seed,
             "status": "completed", "test_accuracy": a + 0.01 * seed}
            for v, s, a in (("none", "base", 0.3), ("after_attention", "base", 0.28),
                            ("cta_diffusion", "base", 0.31), ("none", "official", 0.4),
                            ("cta_official_diffusion", "official", 0.42))
            for seed in (0, 1, 2)]  # fmt: skip
    related.cta_operator_table(pd.DataFrame(rows)).to_csv(folder / "cta_operator_comparison.csv", index=False)
    section.render(Report.open(folder, out, "unit"))
    shown = pd.read_csv(out / "tables" / "cta_operator_comparison.csv").set_index("System")
    assert "Task" not in shown.columns and "Seeds" not in shown.columns  # one task, 3 seeds: said once
    official = shown.loc["official operator: diffusion after each layer"]
    assert official["Backbone"] == "post-LN (CTA's official)"
    assert official["Δ vs its backbone's baseline [95 % CI]"] == "+0.0200 [+0.0200, +0.0200]"
    assert shown.loc["After Attention diffusion (PDE-Transformer)", "Backbone"] == "pre-LN (the pipeline's)"


def test_section_says_not_run_without_the_grid(tmp_path: Path, said: list[str]) -> None:
    section.render(Report.open(tmp_path / "absent", tmp_path / "out", "unit"))
    assert any(line.startswith("_Not run: no `cta_official_summary.csv`") for line in said)
    assert {a["name"] for a in read_artifacts(tmp_path / "out")} == {"cta_official_differences"}
