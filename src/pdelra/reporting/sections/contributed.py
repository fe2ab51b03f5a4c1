"""The sections other parts of the project contribute, each `render(tables_dir, out_dir)`, behind the
notebook's one convention `render(report)`: `pdelra.reporting.related_section` (its heading is in the
notebook), `pdelra.reporting.cta_official_section` (a sub-heading of the related systems) and
`pdelra.reporting.diagnostics_section` (it prints its own)."""

from __future__ import annotations

import importlib
import importlib.util

from pdelra.reporting.sections import Report, say

RELATED = "pdelra.reporting.related_section"
DIAGNOSTICS = "pdelra.reporting.diagnostics_section"
CTA_OFFICIAL = "pdelra.reporting.cta_official_section"


def _render(module: str, report: Report) -> None:
    """`module.render(tables_dir, out_dir)`; "not run" when this installation does not have it."""
    if importlib.util.find_spec(module) is None:
        say(f"_Not run: `{module}` is not part of this installation._")
        return
    importlib.import_module(module).render(report.tables_dir, report.out_dir)


def render_related(report: Report) -> None:
    _render(RELATED, report)


def render_diagnostics(report: Report) -> None:
    _render(DIAGNOSTICS, report)


def render_cta_official(report: Report) -> None:
    _render(CTA_OFFICIAL, report)
