"""pdelra.parts: the registry of the experiment's parts, the one declaration of what `pdelra aggregate` reads
besides the LRA runs' metrics (which the workflow's aggregate rule and `pdelra report --partial` both follow),
and of each part's jobs, checks, claims and report section (tests/test_new_part.py adds one end to end)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import REPO, make_workspace, run_snakemake

from pdelra import parts as registry
from pdelra.importing import import_callable
from pdelra.parts import BUILTIN as PARTS
from pdelra.parts import TABLES_DIR, aggregate_inputs, option
from pdelra.results.inputs import CTA_OFFICIAL_TABLES, DIAGNOSTICS_TABLE, LM_TABLES, OPTIONAL_INPUTS


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
    assert registry.reads(PARTS) == OPTIONAL_INPUTS  # in this order on the aggregate rule's command line
    assert all(set(part.reads) <= set(part.tables) for part in PARTS)
    tables = [Path("t") / f"{table}.csv" for part in reversed(PARTS) for table in part.tables]
    assert list(aggregate_inputs(tables)) == list(OPTIONAL_INPUTS)
    assert option("cta_official_runs") == "--cta-official-runs"


def test_the_registry_names_each_table_as_its_builders_write_them() -> None:
    tables = {part.name: part.tables for part in PARTS}
    assert tables == {
        "lm": LM_TABLES,
        "diagnostics": (DIAGNOSTICS_TABLE,),
        "cta_official": CTA_OFFICIAL_TABLES,
    }


def test_every_function_a_built_in_part_names_imports() -> None:
    """A misspelt "module:function" would only fail when that step runs (hours into a grid): each one imports
    here, and each subcommand module registers."""
    for part in PARTS:
        specs = [part.build, part.check, part.other_jobs, part.data_tasks, part.claims, part.report, part.run]
        specs += [rule.jobs for rule in part.training]
        for spec in filter(None, specs):
            assert callable(import_callable(spec, part.name)), spec
        if part.cli:
            assert callable(import_callable(f"{part.cli}:register", part.name))


def test_importing_the_registry_imports_no_system() -> None:
    """common.smk imports pdelra.parts on every Snakemake call: the systems' modules load only when used."""
    code = "import sys, pdelra.parts; print(sorted(m for m in sys.modules if m.startswith('pdelra.')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pdelra.lm" not in loaded and "pdelra.cta_official" not in loaded and "torch" not in loaded


def test_a_config_registers_its_own_part_and_a_wrong_record_is_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "myparts.py").write_text(
        "from pdelra.parts import BUILTIN, GENERIC\nfrom dataclasses import replace\n"
        "TOY = replace(BUILTIN[0], name='toy', section='toy', training=(), workflow=GENERIC)\n"
        "TWIN = replace(BUILTIN[0], training=())\nNOT_A_PART = {'name': 'x'}\n"
    )
    registered = registry.registered({"parts": ["myparts:TOY"]})
    assert [part.name for part in registered] == ["lm", "diagnostics", "cta_official", "toy"]
    # its own other jobs (lm's function: none without `lm`) and its tables rule (workflow/rules/parts.smk)
    assert registered[-1].other_job_counts({"toy": {"x": 1}}) == {"toy_aggregate": 1}
    assert registered[-1].other_job_counts({}) == {}  # its section absent: not run
    with pytest.raises(ValueError, match=r"not a pdelra\.parts\.Part"):
        registry.plugins({"parts": ["myparts:NOT_A_PART"]})
    with pytest.raises(ValueError, match="registered twice"):
        registry.plugins({"parts": ["myparts:TWIN"]})
    with pytest.raises(ValueError, match="cannot import 'nosuchmodule'"):
        registry.plugins({"parts": ["nosuchmodule:PART"]})
    assert replace(PARTS[0]).jobs({}) == []


def test_the_config_check_runs_a_registered_parts_own_check(tmp_path: Path, monkeypatch) -> None:
    """A registered part's section passes the schema as a mapping and is checked by its own `check`; a
    top-level key no part claims is still refused."""
    from pdelra.planning.config_check import config_problems

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "checked_part.py").write_text(
        "from pdelra.parts import GENERIC, Part\n"
        "def check(config):\n    return [] if config['toy'].get('seeds') else ['toy.seeds: give one']\n"
        "PART = Part(name='toy', section='toy', tables=(), reads=(), runs='toy/runs', run_file='m.json',\n"
        "            build='checked_part:check', check='checked_part:check', workflow=GENERIC)\n"
    )
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["parts"] = ["checked_part:PART"]
    assert config_problems({**config, "toy": {"seeds": [0]}}) == []
    assert config_problems({**config, "toy": {"seeds": []}}) == ["toy.seeds: give one"]
    (unknown,) = config_problems({**config, "toy": {"seeds": [0]}, "tyo": {}})
    assert "unknown key(s) 'tyo'" in unknown and "toy" in unknown
    assert config_problems({**config, "parts": ["checked_part:NOPE"]})[0].startswith(
        "parts: part 'checked_part:NOPE'"
    )
