"""The one renderer of claims as HTML, for both pages (index.html and the report's claims section): a
config's own variants' claims, the paper's headline claims that ran, and one line for those that did not.
Light to import (no pandas at import): the landing page is written without the notebook's libraries."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pdelra.reporting import style
from pdelra.results.catalogue.new_tasks import FAMILY as NEW_TASKS_FAMILY
from pdelra.results.catalogue.own import FAMILY as OWN_FAMILY
from pdelra.results.claims import FAMILIES, what_would_decide

if TYPE_CHECKING:
    import pandas as pd

NUMERIC = "text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums"
# The headline table's header: claim_id, claim, paper_effect, effect [ci_low, ci_high], unit, n, verdict,
# size, p_adjusted of claims.csv, and what would decide an undecided claim (from its power columns).
HEADLINE_HEADER = (
    "claim",
    "statement",
    "paper",
    "ours [95 % CI]",
    "unit",
    "n",
    "verdict",
    "size",
    "p (adjusted)",
    "what would decide it",
)


def claims_table_html(rows: pd.DataFrame, table_id: str = "") -> str:
    """Claims as an HTML table, the verdict cell in its colour (with the unadjusted word when Holm changed
    it), the failed runs each claim set aside or counted under its statement, and what would decide an
    undecided one: the one renderer of claims for both pages. The paper's and the size columns are left out
    when no row has a paper value (a config's own variants)."""
    paper_side = rows["paper_effect"].notna().any()
    header = [h for h in HEADLINE_HEADER if paper_side or h not in ("paper", "size")]
    body = []
    for _, c in rows.iterrows():
        verdict = html.escape(str(c["verdict"]))
        if c["verdict_unadjusted"] != c["verdict"]:
            verdict += f" ({html.escape(str(c['verdict_unadjusted']))} unadjusted)"
        cells = [
            f"<td><code>{html.escape(str(c['claim_id']))}</code></td>",
            f"<td>{html.escape(str(c['claim']))}{failed_runs_line(c)}</td>",
            *([f'<td style="{NUMERIC}">{style.effect(c["paper_effect"])}</td>'] if paper_side else []),
            f'<td style="{NUMERIC}">{effect_ci(c)}</td>',
            f"<td>{html.escape(str(c['unit']))}</td>",
            f'<td style="{NUMERIC}">{style.number(c["n"], "{:.0f}")}</td>',
            f'<td style="background:{style.verdict_colour(c["verdict"])};font-weight:bold">{verdict}</td>',
            *([f"<td>{html.escape(c['size']) if isinstance(c['size'], str) else style.MISSING}</td>"]
              if paper_side else []),
            f'<td style="{NUMERIC}">{style.number(c["p_adjusted"], "{:.3g}")}</td>',
            f"<td>{html.escape(what_would_decide(c))}</td>",
        ]  # fmt: skip
        body.append("<tr>" + "".join(cells) + "</tr>")
    head_row = "".join(f"<th>{html.escape(label)}</th>" for label in header)
    where = f' id="{table_id}"' if table_id else ""
    table = f'<table class="claims"{where}><thead><tr>{head_row}</tr></thead>'
    return f"{table}<tbody>{''.join(body)}</tbody></table>"


OWN_INTRO = (
    "Each of your variants against the baseline and against the paper's diffusion at the position its "
    "operators occupy (where that ran), per task, with our 95 % interval over seeds, the verdict "
    "(Holm-adjusted within your variants' claims) and what would decide an undecided one."
)


def own_rows(claims: pd.DataFrame) -> pd.DataFrame:
    """A config's own variants' claims (family `own`), in the order they were made: per task, against the
    baseline, then against the paper's diffusion at the same position."""
    return claims[claims["family"] == OWN_FAMILY]


NEW_TASKS_TITLE = "Tasks the paper does not have"
NEW_TASKS_INTRO = (
    "Each position that ran on a task of your own (pdelra.tasks, no column in the paper's tables) against "
    "the baseline there, with our 95 % interval over seeds, the verdict (Holm-adjusted within these claims) "
    "and what would decide an undecided one. There is no paper value to compare with."
)


def new_task_rows(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims on tasks the paper does not have (family `new_tasks`), per task, positions in Table 5's
    order."""
    return claims[claims["family"] == NEW_TASKS_FAMILY]


def not_run_line(rows: pd.DataFrame) -> str:
    """The claims among `rows` that did not run, folded into one line of HTML ('' when every one ran)."""
    missing = rows[rows["verdict"] == "not run"]
    if missing.empty:
        return ""
    ids = ", ".join(f"<code>{html.escape(str(i))}</code>" for i in missing["claim_id"])
    return (
        f"<p>{len(missing)} of the paper's headline claims did not run (a configuration they compare has no "
        f"run in this experiment): {ids}.</p>"
    )


def failed_runs_line(claim: pd.Series) -> str:
    """The claim's failed runs and how it read them (claims.csv's `failed_runs`), one line under its
    statement; '' without failures."""
    failed = claim.get("failed_runs")
    if not isinstance(failed, str) or not failed:
        return ""
    return f'<br><small class="failed-runs">Failed runs: {html.escape(failed)}</small>'


FAILURES_TITLE = "Runs that did not learn"
FAILURES_INTRO = (
    "Whether each configuration learns, apart from how well it does when it learns: every cell with a run "
    "that diverged, or whose test accuracy is not distinguishable from chance on its test set (the 95 % "
    "binomial interval of 1 / classes). Each claim above names the failed runs it set aside or counted."
)


def failures_html(failures: pd.DataFrame) -> str:
    """failures.csv (`pdelra.results.failures`) as a list, one cell's finding a line ('' when no run
    failed): the one renderer of the failures for both pages."""
    if failures.empty:
        return ""
    items = "".join(f"<li>{html.escape(str(f))}</li>" for f in failures["finding"])
    return f'<ul class="failures">{items}</ul>'


def effect_ci(claim: pd.Series) -> str:
    """Our effect with its 95 % interval, as the tables print it."""
    if style.missing(claim["effect"]):
        return style.MISSING
    if style.missing(claim["ci_low"]):
        return style.effect(claim["effect"])
    return (
        f"{style.effect(claim['effect'])} [{style.effect(claim['ci_low'])}, {style.effect(claim['ci_high'])}]"
    )


def family_lines(claims: pd.DataFrame, labels: Mapping[str, str] | None = None) -> list[str]:
    """One plain-text line per family of claims shown in sum, not claim by claim (neither a headline family
    nor a config's own variants' or tasks'): its label, its count and its verdicts, in `FAMILIES`' order,
    then the families of the experiment's parts not listed there (a config's own part, labelled by `labels`,
    {family: label}, else by its name) in the order their claims come: every claim of claims.csv is counted
    under some line or table of both pages."""
    labels = {**(labels or {}), **{name: family.label for name, family in FAMILIES.items()}}
    shown_apart = {name for name, family in FAMILIES.items() if family.headline}
    shown_apart |= {OWN_FAMILY, NEW_TASKS_FAMILY}
    order = [*FAMILIES, *(f for f in dict.fromkeys(claims["family"]) if f not in FAMILIES)]
    lines = []
    for name in order:
        rows = claims[claims["family"] == name]
        if len(rows) and name not in shown_apart:
            words = ", ".join(f"{n} {v}" for v, n in rows["verdict"].value_counts().items())
            label = labels.get(name, f"the part {name}'s claims")
            lines.append(f"{label} ({len(rows)} claims, Holm within the family): {words}")
    return lines
