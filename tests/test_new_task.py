"""A task the paper does not have, added in three files: its registry record (a module the config's
`task_modules` names), its data module (generator and reader) and the config's entries for it. It runs
through the tiny DAG to both report pages, where its claims (family `new_tasks`) have their own table.
docs/add-a-task.md is the user's version of this test."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import load_config, make_workspace, run_snakemake

pytestmark = pytest.mark.slow

RECORD = '''"""The parity task: is the number of 1s in a bit string odd?"""
from pdelra.tasks import Task, register

register(Task(
    name="parity", label="Parity", source=None, format="TSV of label and bit string per split",
    max_length=64, num_classes=2, vocab_size=3, splits={"train": 64, "val": 32, "test": 32},
    generator="parity_data:generate", reader="parity_data:read", generate={"length": 64},
))
'''

DATA = '''"""Parity data: `generate` writes {split}.tsv (label TAB bits), `read` the processed arrays."""
import random

import numpy as np

from pdelra.data import store
from pdelra.data.hashing import inputs_hash

SPLITS = ("train", "val", "test")


def generate(out, p):
    rng = random.Random(p["seed"])
    for split in SPLITS:
        rows = ["".join(rng.choice("01") for _ in range(p["length"])) for _ in range(p[f"n_{split}"])]
        (out / f"{split}.tsv").write_text("".join(f"{bits.count('1') % 2}\\t{bits}\\n" for bits in rows))


def read(raw, out, max_length, seed):
    counts, truncated, files = {}, {}, []
    for split in SPLITS:
        path = raw / f"{split}.tsv"
        files.append(path)
        rows = [line.split("\\t") for line in path.read_text().splitlines()]
        tokens = np.zeros((len(rows), max_length), np.uint8)
        lengths = np.zeros(len(rows), np.int32)
        for i, (_, bits) in enumerate(rows):
            kept = bits[:max_length]
            tokens[i, : len(kept)] = [1 + int(b) for b in kept]
            lengths[i] = len(kept)
        labels = np.array([int(label) for label, _ in rows], np.int64)
        store.write_split(out, split, tokens, lengths, labels)
        counts[split] = len(rows)
        truncated[split] = sum(len(bits) > max_length for _, bits in rows)
    return {
        "vocab_size": 3, "vocab": ["<pad>", "0", "1"], "num_classes": 2, "counts": counts,
        "truncated": truncated, "skipped": {"count": 0, "items": []}, "input_hash": inputs_hash(raw, files),
        "pad_id": 0, "notes": ["Generated bit strings; label = parity of the 1s."],
    }
'''


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_a_task_in_three_files_runs_to_both_report_pages(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    before = _files(ws)

    (ws / "parity_task.py").write_text(RECORD)
    (ws / "parity_data.py").write_text(DATA)
    config = load_config("tiny")
    config["task_modules"] = ["parity_task"]
    config["data"]["generate"] = {"parity": {"n_train": 64, "n_val": 32, "n_test": 32, "length": 64}}
    config["tasks"] = {"parity": {"max_length": 64}}
    config["grids"]["main"]["tasks"] = ["parity"]
    (ws / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    after = _files(ws)
    changed = {p for p in after if before.get(p) != after[p]} | (set(before) - set(after))
    assert changed == {"parity_task.py", "parity_data.py", "config/config.yaml"}

    run_snakemake(ws, "--cores", "2", timeout=600, check=True)

    results = ws / "results" / "tiny"
    manifest = json.loads((ws / "data" / "processed" / "parity" / "manifest.json").read_text())
    assert (manifest["task"], manifest["num_classes"], manifest["counts"]["test"]) == ("parity", 2, 32)
    data = pd.read_csv(results / "tables" / "data.csv").set_index("task")
    assert data.loc["parity", "differences"] == "generated data"  # no paper's setting to differ from
    assert pd.isna(data.loc["parity", "paper_max_length"])
    new = pd.read_csv(results / "tables" / "claims.csv").query("family == 'new_tasks'")
    assert list(new["claim_id"]) == ["table11_sign_after_embedding_parity"]
    assert new["verdict"].iloc[0] != "not run"  # both of its cells ran: judged (6 steps learn no parity)
    for page in (results / "report" / "index.html", results / "report" / "report.html"):
        text = page.read_text()
        assert "Tasks the paper does not have" in text, page
        assert "table11_sign_after_embedding_parity" in text, page
