"""How the claims are tested: the procedures, their levels and measured error rates, as
`pdelra.results.claims` states them (shown from there, not written again)."""

from __future__ import annotations

from pdelra.reporting.display import say
from pdelra.reporting.sections import Report
from pdelra.results.claims import methods_markdown


def render(report: Report) -> None:  # the sections' one signature; this one needs no table
    say(methods_markdown())
