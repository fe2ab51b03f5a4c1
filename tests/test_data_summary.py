"""The data banner: what each task ran on, said before any verdict (`pdelra data-summary`, the banner)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd
import pytest

from pdelra import paper
from pdelra.cli import main
from pdelra.data.summary import DataSummaryError, summarise
from pdelra.reporting import banner


def _manifest(path: Path, max_length: int, counts: dict[str, int]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "manifest.json").write_text(json.dumps({"max_length": max_length, "counts": counts}))
    return path / "manifest.json"


def _spec(tmp_path: Path, source: str, max_length: int, model: dict[str, int]) -> dict[str, dict]:
    counts = {"train": 1000, "val": 100, "test": 100}
    return {
        "listops": {
            "manifest": str(_manifest(tmp_path / "listops", max_length, counts)),
            "source": source,
            "origin": 'pdelra generate listops {"n_train": 1000}'
            if source == "generated"
            else "https://x/y.gz",
            "model": model,
        }
    }


def test_toy_data_is_named_before_any_verdict(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "generated", 120, {"d_model": 32, "n_layers": 2, "n_heads": 2, "batch_size": 32})
    table = summarise(spec)
    row = table.iloc[0]
    assert not row["paper_setting"]
    assert "generated data" in row["differences"]
    assert "length 120 (paper 2000)" in row["differences"]
    assert "d_model 32 (paper 128)" in row["differences"]
    assert (row["n_train"], row["n_val"], row["n_test"]) == (1000, 100, 100)
    md = banner.banner_markdown(table)
    assert md.startswith(f"**{banner.TOY_HEADLINE}**")
    assert "pdelra generate listops" in md
    assert html.escape(banner.TOY_HEADLINE) in banner.banner_html(table)


def test_the_papers_setting_says_so(tmp_path: Path) -> None:
    t8 = paper.TABLE8["listops"]
    spec = _spec(tmp_path, "real", 2000, {k: t8[k] for k in ("d_model", "n_layers", "n_heads", "batch_size")})
    table = summarise(spec)
    assert bool(table.iloc[0]["paper_setting"]) and table.iloc[0]["differences"] == ""
    assert banner.headline(table) == banner.PAPER_HEADLINE
    assert banner.headline(pd.DataFrame()) == banner.MISSING_HEADLINE


def test_cli_writes_data_csv_and_names_a_bad_manifest(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = _spec(tmp_path, "generated", 120, {"d_model": 32, "n_layers": 2, "n_heads": 2, "batch_size": 32})
    out = tmp_path / "tables" / "data.csv"
    assert main(["data-summary", "--spec", json.dumps(spec), "--out", str(out)]) == 0
    assert pd.read_csv(out)["task"].tolist() == ["listops"]
    spec["listops"]["manifest"] = str(tmp_path / "missing" / "manifest.json")
    with pytest.raises(DataSummaryError, match=r"missing/manifest\.json"):
        summarise(spec)


def test_the_banner_says_why_a_generated_split_differs_from_the_config(tmp_path: Path) -> None:
    """The demo's Text asks for 400 / 100 / 100 and trains on 450 / 50 / 100: aclImdb has no validation split,
    so the generator writes 500 train reviews and preprocessing carves 10 % of them, as for the real data."""
    from pdelra.data.preprocess import TEXT_VAL_FRACTION

    settings = {"max_length": 128, "min_length": 64, "n_test": 100, "n_train": 400, "n_val": 100, "seed": 0}
    n_val = round(TEXT_VAL_FRACTION * 500)
    model = {"d_model": 32, "n_layers": 2, "n_heads": 2, "batch_size": 32}
    counts = {"train": 500 - n_val, "val": n_val, "test": 100}
    spec = {
        "text": {
            "manifest": str(_manifest(tmp_path / "text", 128, counts)),
            "source": "generated",
            "origin": f"pdelra generate text {json.dumps(settings, sort_keys=True)}",  # as common.smk has it
            "model": model,
        },
        **_spec(tmp_path, "generated", 120, model),  # ListOps: the sizes asked for (no note)
    }
    spec["listops"]["origin"] = 'pdelra generate listops {"n_test": 100, "n_train": 1000, "n_val": 100}'
    table = summarise(spec)
    md = banner.banner_markdown(table)
    (note,) = banner.split_notes(table)
    assert note.startswith(f"Text: {500 - n_val} / {n_val} / 100, not the config's 400 / 100 / 100.")
    assert "aclImdb has no validation split" in note and "n_train + n_val = 500 train reviews" in note
    assert f"carves {TEXT_VAL_FRACTION:.0%} of train as validation" in note
    assert note in md and html.escape(note) in banner.banner_html(table)


def test_the_banner_shows_a_generators_settings_as_words(tmp_path: Path) -> None:
    settings = {"max_length": 128, "min_length": 64, "n_test": 100, "n_train": 400, "n_val": 100, "seed": 0}
    spec = _spec(tmp_path, "generated", 120, {"d_model": 32, "n_layers": 2, "n_heads": 2, "batch_size": 32})
    spec["listops"]["origin"] = f"pdelra generate listops {json.dumps(settings, sort_keys=True)}"
    md = banner.banner_markdown(summarise(spec))
    assert "{" not in md and '"' not in md  # not the origin's raw JSON
    row = next(line for line in md.splitlines() if line.startswith("| ListOps"))
    assert "pdelra generate listops: 400 train, 100 val, 100 test; length 64–128; seed 0" in row
    assert banner.origin_text("https://x/y.gz (md5 ab)") == "https://x/y.gz (md5 ab)"  # real data as it is


def test_the_banner_prints_a_dash_where_the_paper_has_no_value(tmp_path: Path) -> None:
    """A task of your own has no paper length nor Table 8 row: "—" there, not "nan"."""
    counts = {"train": 10, "val": 5, "test": 5}
    model = {"d_model": 16, "n_layers": 1, "n_heads": 2, "batch_size": 8}
    spec = {"mod3": {"manifest": str(_manifest(tmp_path / "mod3", 48, counts)), "source": "generated",
                     "origin": "pdelra generate mod3 {}", "model": model}}  # fmt: skip
    written = tmp_path / "data.csv"
    summarise(spec).to_csv(written, index=False)
    (row,) = banner.rows(pd.read_csv(written))  # as the report reads data.csv
    assert row["Length (paper)"] == "48 (—)"
    assert row["d_model, layers, heads, batch (paper's Table 8)"] == "16, 1, 2, 8 (—, —, —, —)"
    assert "nan" not in banner.banner_markdown(pd.read_csv(written))
