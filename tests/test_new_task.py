"""A task the paper does not have, added in three files: its registry record (a module the config's
`task_modules` names), its data module (generator and reader) and the config's entries for it. It runs
through the tiny DAG to both report pages, where its claims (family `new_tasks`) have their own table.
It copies docs/add-a-task.md's files as written (examples/parity_task.py, examples/parity_data.py and the
page's config)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, load_config, make_workspace, run_snakemake

pytestmark = pytest.mark.slow

DOC = REPO / "docs" / "add-a-task.md"
EXAMPLES = ("parity_task.py", "parity_data.py")  # the page's two modules, as examples/ holds them


def test_the_pages_modules_are_the_example_files_as_written() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert blocks == [(REPO / "examples" / name).read_text() for name in EXAMPLES]


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_a_task_in_three_files_runs_to_both_report_pages(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    before = _files(ws)

    for name in EXAMPLES:  # 1, 2: the record and the data module, copied as the page shows them
        shutil.copyfile(REPO / "examples" / name, ws / name)
    config = load_config("tiny")
    page = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)[0])
    config.update(task_modules=page["task_modules"], tasks=page["tasks"])  # 3: the page's config entries
    config["data"]["generate"] = page["data"]["generate"]
    config["grids"]["main"] = page["grids"]["main"]
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
