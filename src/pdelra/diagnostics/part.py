"""The mechanism diagnostics as a part of the experiment (pdelra.parts.PartModule): its record's data beside
its hooks.

Its rules are its own (workflow/rules/diagnose.smk): the workflow concatenates its diagnose jobs' part files;
those are assembled from each run folder's cached diagnostics.csv, which the partial report reads directly,
since a diagnose job still running has written only its runs' files. Its jobs are the LRA runs'
(pdelra.planning.experiment.diagnose_parts), so it declares none here. Its own folder stands above the
diagnose step, the results and the report, whose pieces its hooks join. Cheap to import: the hooks import
the diagnose step (torch), the claims (pandas) and the section when they run."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pdelra.parts import OWN_RULES

NAME = "diagnostics"
SECTION = None  # always on (`diagnostics.enabled: false` plans no diagnose job)
TABLES = ("diagnostics",)  # `pdelra diagnose table`
RUNS = "runs"
RUN_FILE = "diagnostics.csv"
HEADING = "## Operator-theory diagnostics: roughness, perturbation bounds, non-commutativity"
FAMILY = "the mechanism diagnostics"
WORKFLOW = OWN_RULES


def build(files: list[Path], tables: Path) -> None:
    """diagnostics.csv from the runs' cached diagnostics.csv files (what `pdelra diagnose table` runs)."""
    from pdelra.steps.diagnose import write_tables  # the step above this layer (torch): only when built

    write_tables(files, tables)


def claims(inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The mechanism claims (family `diagnostics`) from diagnostics.csv and the runs."""
    from pdelra.results.diagnostics import part_claims  # pandas: only when judged

    return part_claims(inputs)


def report(report: Any) -> None:
    """Its report section (a pdelra.reporting.sections.Report)."""
    from pdelra.reporting.sections.diagnostics import render  # the report layer, above this one

    render(report)
