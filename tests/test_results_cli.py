"""`pdelra aggregate` writes the claims beside every table; `pdelra claims --tables` recomputes them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from test_aggregate import write_metrics

from pdelra.cli import main
from pdelra.results.build import AGGREGATE_TABLES
from pdelra.results.claims import CLAIM_COLUMNS
from pdelra.steps.aggregate import aggregate


@pytest.fixture
def tables(tmp_path: Path) -> Path:
    """A tiny grid: ListOps, the baseline and After Embedding (+1 pp), 3 seeds."""
    runs = tmp_path / "runs"
    files = []
    for seed in range(3):
        files.append(write_metrics(runs, "listops", "none", "h1", seed, 0.30 + 0.002 * seed))
        files.append(write_metrics(runs, "listops", "after_embedding", "h1", seed, 0.31 + 0.002 * seed))
    aggregate(files, tmp_path / "tables")
    return tmp_path / "tables"


def test_aggregate_writes_every_declared_table_with_the_claims(tables: Path) -> None:
    for name in AGGREGATE_TABLES:
        assert (tables / f"{name}.csv").is_file(), name
    claims = pd.read_csv(tables / "claims.csv").set_index("claim_id")
    assert list(claims.reset_index().columns) == list(CLAIM_COLUMNS)
    row = claims.loc["table11_sign_after_embedding_listops"]
    assert row["effect"] == pytest.approx(0.01)
    assert claims.loc["after_embedding_gain", "verdict"] == "not run"  # needs all five tasks


def test_claims_command_recomputes_the_same_table(tables: Path, tmp_path: Path) -> None:
    out = tmp_path / "again.csv"
    assert main(["claims", "--tables", str(tables), "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out), pd.read_csv(tables / "claims.csv"))


def test_claims_command_names_a_missing_runs_table(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert main(["claims", "--tables", str(tmp_path)]) == 1
    assert f"{tmp_path}/runs.csv: no runs table" in caplog.text


OWN_PART = """
NAME = "toy"
TABLES = ()
RUNS = "toy/runs"
RUN_FILE = "m.json"
HEADING = "## A toy system"


def build(files, tables):
    pass


def claims(inputs):
    return [{"claim_id": "toy_gain", "claim": "toy gains", "source": "toy", "family": "toy",
             "kind": "difference", "unit": "score", "effect": 0.1, "n": 3, "p_value": 0.01,
             "verdict": "reproduced", "verdict_unadjusted": "reproduced"}]
"""


def test_claims_command_finds_the_configs_own_parts_in_the_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """aggregate records the config's parts in parts.csv; `pdelra claims --tables` reads them there, so that
    it gives the workflow's claims.csv without being told the parts (it left a part's claims out before)."""
    from pdelra import parts
    from pdelra.reporting.claims_html import family_lines

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "own_claims_part.py").write_text(OWN_PART)
    files = [write_metrics(tmp_path / "runs", "listops", v, "h1", s, 0.3) for v in ("none",) for s in (0, 1)]
    aggregate(files, tmp_path / "tables", own_parts=parts.plugins({"parts": ["own_claims_part"]}))
    recorded = pd.read_csv(tmp_path / "tables" / "parts.csv").fillna("")
    assert recorded["spec"].tolist() == ["", "", "", "own_claims_part"]
    capsys.readouterr()
    assert main(["claims", "--tables", str(tmp_path / "tables")]) == 0
    assert capsys.readouterr().out == (tmp_path / "tables" / "claims.csv").read_text()
    claims = pd.read_csv(tmp_path / "tables" / "claims.csv")
    assert "toy_gain" in set(claims["claim_id"])
    # Both pages sum its family up in a line, labelled by the part's heading.
    lines = family_lines(claims, parts.family_labels(["own_claims_part"]))
    assert lines[-1] == "A toy system (1 claims, Holm within the family): 1 reproduced"  # after FAMILIES'
