"""The report's save helpers: every format written, missing shown as "—", captions recorded once."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

from pdelra.reporting.io import (
    MISSING,
    format_cell,
    read_artifacts,
    save_figure,
    save_table,
    to_markdown,
)

matplotlib.use("Agg")


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "variant": ["none", "after_embedding"],
            "mean": [0.37, math.nan],
            "n": [5, 3],
            "gain": [None, 0.0407],
        },
        index=[7, 9],
    )


def test_save_table_writes_csv_markdown_and_booktabs_without_index(tmp_path: Path) -> None:
    save_table(frame(), tmp_path, "main", "Accuracy: 10% & more", formats={"gain": "{:+.2f}"})
    csv = pd.read_csv(tmp_path / "tables" / "main.csv")
    assert list(csv.columns) == ["variant", "mean", "n", "gain"]  # no index column
    assert math.isnan(csv.loc[1, "mean"]) and csv.loc[1, "gain"] == pytest.approx(0.0407)
    md = (tmp_path / "tables" / "main.md").read_text().splitlines()
    assert md[0] == "| variant | mean | n | gain |"
    assert md[1] == "| :--- | ---: | ---: | ---: |"
    assert md[2] == f"| none | 0.3700 | 5 | {MISSING} |"
    assert md[3] == f"| after_embedding | {MISSING} | 3 | +0.04 |"
    tex = (tmp_path / "tables" / "main.tex").read_text()
    for needed in (r"\toprule", r"\midrule", r"\bottomrule", r"\label{tab:main}", r"10\% \& more"):
        assert needed in tex
    assert r"after\_embedding & --- & 3 & +0.04 \\" in tex


def test_captions_are_recorded_in_order_and_replaced_on_resave(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    save_figure(fig, tmp_path, "curve", "first caption")
    save_table(frame(), tmp_path, "main", "a table")
    save_figure(fig, tmp_path, "curve", "second\ncaption")
    plt.close(fig)
    entries = read_artifacts(tmp_path)
    assert [(e["kind"], e["name"]) for e in entries] == [("table", "main"), ("figure", "curve")]
    assert entries[1]["caption"] == "second caption"
    assert entries[1]["files"] == ["figures/curve.png", "figures/curve.pdf"]
    png = (tmp_path / "figures" / "curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and (tmp_path / "figures" / "curve.pdf").read_bytes().startswith(
        b"%PDF"
    )


def test_bad_names_and_format_keys_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="plain file stem"):
        save_table(frame(), tmp_path, "../escape", "x")
    with pytest.raises(KeyError, match="no_such"):
        to_markdown(frame(), {"no_such": "{:.1f}"})


def test_cells() -> None:
    assert format_cell(None) == format_cell(float("nan")) == format_cell(pd.NA) == MISSING
    assert format_cell(3) == "3" and format_cell(0.123456) == "0.1235"
    assert format_cell(0.5, "{:.1%}") == "50.0%"
