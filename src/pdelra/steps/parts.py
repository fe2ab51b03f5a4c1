"""What `pdelra aggregate` reads besides the LRA runs' metrics.json: one declaration for the workflow and for
`pdelra report --partial`.

Each `Part` is an experiment of its own (the diagnostics, PhysQK-AD's LM, Continuous-Time Attention's own
experiments) whose rule writes tables into `results/{experiment}/tables/`, some of which `pdelra aggregate`
reads for its derived tables and claims (`--diagnostics`, `--lm-runs`, ...; pdelra.results.build.
OPTIONAL_INPUTS). The workflow's `aggregate` rule takes every part's tables as named inputs and passes on
the ones aggregate reads (common.smk: `aggregate_part_tables`, `aggregate_extra_args`); the partial report
builds each part, with the function its rule's command runs, from the run files found so far and hands the
same tables to `aggregate` (pdelra.steps.report.write_partial_tables). A part added here is in both; a part
without finished runs is left out, and its claims and report section say "not run".

The data table (tables/data.csv, `pdelra data-summary`) is not one: aggregate does not read it (the report
does, and the partial report copies the workflow's). Cheap to import: common.smk imports it for every
Snakemake invocation, so a part names its builder as "module:function", imported only when it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdelra.importing import import_callable
from pdelra.results.inputs import CTA_OFFICIAL_TABLES, DIAGNOSTICS_TABLE, LM_TABLES
from pdelra.runs import find_run_files

TABLES_DIR = "tables"  # results/{experiment}/tables: where every part's rule writes its tables


@dataclass(frozen=True)
class Part:
    """One part of an experiment whose tables the aggregate step also reads."""

    name: str  # the aggregate rule's named input holding its tables
    section: str | None  # the config key that turns it on (None: always on)
    tables: tuple[str, ...]  # what its rule writes into tables/ (NAME.csv): all inputs of the aggregate rule
    reads: tuple[str, ...]  # those `pdelra aggregate` reads (its option --NAME, with `_` as `-`)
    runs: str  # the folder of its runs under results/{experiment}
    run_file: str  # each run folder's file its tables are built from (the partial report looks for these)
    build: str  # "module:function" of (run files, tables folder), which writes `tables` there

    def runs_in(self, config: Mapping[str, Any]) -> bool:
        """Whether a workflow config runs this part (its section is present and not empty)."""
        return self.section is None or bool(config.get(self.section))

    def build_finished(self, experiment_dir: Path, tables: Path) -> dict[str, Path]:
        """This part's tables from the run files under `experiment_dir` now, written into `tables`; the ones
        `pdelra aggregate` reads, by name. None (empty) when no run has finished yet."""
        files = find_run_files(Path(experiment_dir) / self.runs, self.run_file)
        if not files:
            return {}
        import_callable(self.build, f"part {self.name}'s builder")(files, Path(tables))
        return aggregate_inputs(Path(tables) / f"{name}.csv" for name in self.tables)


# In the order `pdelra aggregate`'s options are given on its command line (a different order would be a
# changed parameter, which reruns the aggregate job of a finished experiment).
PARTS = (
    # PhysQK-AD's LM (workflow/rules/lm.smk, `pdelra lm aggregate`).
    Part(
        name="lm",
        section="lm",
        tables=LM_TABLES,
        reads=("lm_runs", "lm_dynamics"),
        runs="lm/runs",
        run_file="metrics.json",
        build="pdelra.lm.aggregate:aggregate_lm",
    ),
    # The mechanism diagnostics (workflow/rules/diagnose.smk). The workflow concatenates its diagnose jobs'
    # part files; those are assembled from each run folder's cached diagnostics.csv, which the partial report
    # reads directly, since a diagnose job still running has written only its runs' files.
    Part(
        name="diagnostics",
        section=None,
        tables=(DIAGNOSTICS_TABLE,),
        reads=(DIAGNOSTICS_TABLE,),
        runs="runs",
        run_file="diagnostics.csv",
        build="pdelra.steps.diagnose:write_tables",  # what `pdelra diagnose table` runs
    ),
    # Continuous-Time Attention's own experiments (workflow/rules/cta_official.smk,
    # `pdelra cta-official aggregate`).
    Part(
        name="cta_official",
        section="cta_official",
        tables=CTA_OFFICIAL_TABLES,
        reads=("cta_official_runs",),
        runs="cta_official/runs",
        run_file="metrics.json",
        build="pdelra.cta_official.aggregate:aggregate",
    ),
)
PART = {part.name: part for part in PARTS}
READS = tuple(name for part in PARTS for name in part.reads)  # every table aggregate may read, in order


def aggregate_inputs(tables: Iterable[str | Path]) -> dict[str, Path]:
    """Of the table files given, those `pdelra aggregate` reads, by name (the option's), in PARTS' order."""
    by_name = {Path(path).stem: Path(path) for path in tables}
    return {name: by_name[name] for name in READS if name in by_name}


def option(name: str) -> str:
    """`pdelra aggregate`'s option for the table `name`: `lm_runs` → `--lm-runs`."""
    return f"--{name.replace('_', '-')}"
