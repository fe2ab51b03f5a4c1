"""pdelra.parts: the registry of the experiment's parts, the one declaration of what `pdelra aggregate` reads
besides the LRA runs' metrics (which the workflow's aggregate rule and `pdelra report --partial` both follow),
and of each part's jobs, checks, claims and report section (tests/test_new_part.py adds one end to end)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from conftest import REPO, make_workspace, run_snakemake

from pdelra import parts as registry
from pdelra.parts import TABLES_DIR, aggregate_inputs, option

PARTS = registry.builtin()


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
    reads = ("lm_runs", "lm_dynamics", "diagnostics", "cta_official_runs")
    assert registry.reads(PARTS) == reads  # in this order on the aggregate rule's command line
    assert all(set(part.reads) <= set(part.tables) for part in PARTS)
    tables = [Path("t") / f"{table}.csv" for part in reversed(PARTS) for table in part.tables]
    assert list(aggregate_inputs(tables)) == list(reads)
    assert option("cta_official_runs") == "--cta-official-runs"


def test_each_built_in_part_is_a_module_in_its_systems_folder_declared_as_a_users() -> None:
    """One name per part, a module whose hooks are its own plain functions (no "module:function" string):
    the tables its builder writes, its family's label and its subcommands come from it."""
    import pdelra.cta_official.part as cta
    import pdelra.lm.part as lm

    assert [part.module for part in PARTS] == [
        "pdelra.lm.part",
        "pdelra.diagnostics.part",
        "pdelra.cta_official.part",
    ]
    by_name = {part.name: part for part in PARTS}
    assert by_name["lm"].training_jobs is lm.training_jobs and by_name["lm"].register is lm.register
    assert by_name["cta_official"].report is cta.report and by_name["cta_official"].tables == cta.TABLES
    for part in PARTS:
        hooks = [getattr(part, name) for name in registry.HOOKS]
        assert all(hook is None or callable(hook) for hook in hooks), part.name
        spec = re.compile(r"^[\w.]+:\w+$")  # what a hook was named by: "module:function"
        assert not any(spec.match(str(getattr(part, f.name))) for f in fields(part)), part.name
    # Whether a part's commands are forked from the fork server comes from its module too.
    from pdelra.cli import forked_commands

    assert forked_commands() == ("train", "diagnose", "lm", "cta-official")
    assert by_name["cta_official"].preload == ("pdelra.cta_official.lm",)
    assert {p.name: p.family_label for p in PARTS} == {
        "lm": "PhysQK-AD's language model",
        "diagnostics": "the mechanism diagnostics",
        "cta_official": "Continuous-Time Attention's own experiments",
    }


def test_importing_the_registry_and_its_parts_imports_no_heavy_library() -> None:
    """common.smk loads the parts on every Snakemake call: their modules are cheap, each hook importing what
    it runs (torch, pandas, the systems' trainers) when it runs."""
    code = (
        "import sys, pdelra.builtin_parts, pdelra.parts; pdelra.parts.builtin(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pandas', 'numpy')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_a_config_registers_its_own_part_and_a_wrong_record_is_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "mytoy.py").write_text(
        "NAME = 'toy'\nTABLES = ()\nRUNS = 'toy/runs'\nRUN_FILE = 'm.json'\n"
        "def build(files, tables):\n    pass\n"
    )
    twin = "from pdelra.lm.part import *\nfrom pdelra.lm.part import NAME, RUN_FILE, RUNS, TABLES\n"
    (tmp_path / "mytwin.py").write_text(twin)
    (tmp_path / "notapart.py").write_text("NAME = 'x'\n")
    registered = registry.registered({"parts": ["mytoy"]})
    assert [part.name for part in registered] == ["lm", "diagnostics", "cta_official", "toy"]
    toy = registered[-1]
    assert (toy.section, toy.reads, toy.workflow, toy.module) == ("toy", (), registry.GENERIC, "mytoy")
    # its tables rule (workflow/rules/parts.smk), no other jobs of its own
    assert toy.other_job_counts({"toy": {"x": 1}}) == {"toy_aggregate": 1}
    assert toy.other_job_counts({}) == {}  # its section absent: not run
    assert toy.jobs({"toy": {"x": 1}}) == []  # no training_jobs: no jobs
    with pytest.raises(ValueError, match=r"defines no TABLES, RUNS, RUN_FILE, build"):
        registry.plugins({"parts": ["notapart"]})
    with pytest.raises(ValueError, match="registered twice"):
        registry.plugins({"parts": ["mytwin"]})
    with pytest.raises(ValueError, match="cannot import it"):
        registry.plugins({"parts": ["nosuchmodule"]})


def test_the_config_check_runs_a_registered_parts_own_check(tmp_path: Path, monkeypatch) -> None:
    """A registered part's section passes the schema as a mapping and is checked by its own `check`; a
    top-level key no part claims is still refused."""
    from pdelra.planning.config_check import config_problems

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "checked_part.py").write_text(
        "NAME = 'toy'\nTABLES = ()\nRUNS = 'toy/runs'\nRUN_FILE = 'm.json'\n"
        "def build(files, tables):\n    pass\n"
        "def check(config):\n    return [] if config['toy'].get('seeds') else ['toy.seeds: give one']\n"
    )
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["parts"] = ["checked_part"]
    assert config_problems({**config, "toy": {"seeds": [0]}}) == []
    assert config_problems({**config, "toy": {"seeds": []}}) == ["toy.seeds: give one"]
    (unknown,) = config_problems({**config, "toy": {"seeds": [0]}, "tyo": {}})
    assert "unknown key(s) 'tyo'" in unknown and "toy" in unknown
    assert config_problems({**config, "parts": ["checked_part_nope"]})[0].startswith(
        "parts: part 'checked_part_nope'"
    )
