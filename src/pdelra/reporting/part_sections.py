"""The report's sections of the experiment's parts (pdelra.parts: the diagnostics, Continuous-Time
Attention's own experiments, a config's own parts): one notebook cell shows each part's heading and runs its
section, in the registry's order, so a new part needs no edit of the notebook. A part without a section
(PhysQK-AD's LM, which the related systems' section shows) is skipped."""

from __future__ import annotations

from pdelra.reporting.sections import Report


def render(report: Report) -> None:
    """Each part's heading (markdown) and section."""
    from IPython.display import Markdown, display

    for part in report.registered():
        if part.report is None:
            continue
        if part.heading:
            display(Markdown(part.heading))
        part.report(report)
