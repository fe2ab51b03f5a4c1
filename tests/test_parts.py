"""pdelra.steps.parts: the one declaration of what `pdelra aggregate` reads besides the LRA runs' metrics,
which the workflow's aggregate rule and `pdelra report --partial` both follow."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from conftest import REPO, make_workspace, run_snakemake

from pdelra.results.inputs import OPTIONAL_INPUTS
from pdelra.steps.parts import PARTS, READS, TABLES_DIR, aggregate_inputs, option


def _dry_run_jobs(text: str) -> dict[str, list[dict[str, list[str]]]]:
    """{rule: [{"input": [...], "output": [...]}, ...]} from a `snakemake -n` log."""
    jobs: dict[str, list[dict[str, list[str]]]] = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", text):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if head:
            fields = dict(re.findall(r"^\s+(input|output): (.*)$", block, re.M))
            job = {key: fields.get(key, "").split(", ") for key in ("input", "output")}
            jobs.setdefault(head[1], []).append(job)
    return jobs


def test_partial_report_and_aggregate_rule_read_the_same_parts(tmp_path: Path) -> None:
    """Every input of the workflow's aggregate job besides the runs' metrics is a declared part's table, and
    every declared part is there (the demo runs them all), its runs where the part says: a part the
    workflow gains without a declaration, which the partial report would miss, fails here."""
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    assert all(part.runs_in(config) for part in PARTS)
    proc = run_snakemake(make_workspace(tmp_path / "ws", config), "-n", timeout=120, check=True)
    jobs = _dry_run_jobs(proc.stdout + proc.stderr)
    results = f"results/{config['experiment']}"
    (aggregate,) = jobs["aggregate"]
    extra = {path for path in aggregate["input"] if not path.endswith("/metrics.json")}
    declared = {f"{results}/{TABLES_DIR}/{table}.csv" for part in PARTS for table in part.tables}
    assert extra == declared
    outputs = [path for rule in jobs.values() for job in rule for path in job["output"]]
    for part in PARTS:
        assert any(path.startswith(f"{results}/{part.runs}/") for path in outputs), part.name


def test_the_parts_give_aggregate_every_table_it_reads_as_its_options() -> None:
    assert READS == OPTIONAL_INPUTS  # in this order on the aggregate rule's command line
    assert all(set(part.reads) <= set(part.tables) for part in PARTS)
    tables = [Path("t") / f"{table}.csv" for part in reversed(PARTS) for table in part.tables]
    assert list(aggregate_inputs(tables)) == list(OPTIONAL_INPUTS)
    assert option("cta_official_runs") == "--cta-official-runs"
