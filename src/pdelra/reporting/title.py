"""The report's title, one for both pages (index.html and report.html): the paper's question, or that of a
study of your own operators (own variants, and none of the paper's headline claims ran), or both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdelra import paper
from pdelra.results.claims import headline

if TYPE_CHECKING:
    import pandas as pd

PAPER_TITLE = "Where to add PDE diffusion in Transformers: did it reproduce?"


def page_title(own: list[str], headline_ran: bool) -> str:
    """The title for a study with the config's own variants `own`, whether any paper headline claim ran."""
    if not own:
        return PAPER_TITLE
    yours = f"your own operator{'s' if len(own) > 1 else ''} ({', '.join(own)})"
    if headline_ran:
        return f"{PAPER_TITLE[:-1]}, and {'do' if len(own) > 1 else 'does'} {yours} beat it?"
    question = "better than the baseline and the paper's diffusion?"
    return f"{yours[0].upper()}{yours[1:]} beside attention: {question}"


def title_of(runs: pd.DataFrame, claims: pd.DataFrame) -> str:
    """The title of the study whose runs.csv and claims.csv are given (empty frames: the paper's)."""
    own = paper.own_variants(runs["variant"]) if "variant" in runs else []
    ran = "verdict" in claims and bool((headline(claims)["verdict"] != "not run").any())
    return page_title(own, ran)
