"""Verdicts, claim by claim: claims.csv (judged by `pdelra.results.claims` in `pdelra aggregate`) with each
claim's verdict and size, the forest plot, the grid of Table 11's sign claims and the verdict rule."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from pdelra import paper
from pdelra import parts as registry
from pdelra.reporting import style
from pdelra.reporting.claims_html import (
    FAILURES_INTRO,
    FAILURES_TITLE,
    NEW_TASKS_INTRO,
    NEW_TASKS_TITLE,
    OWN_INTRO,
    claims_table_html,
    effect_ci,
    failures_html,
    family_lines,
    new_task_rows,
    not_run_line,
    own_rows,
)
from pdelra.reporting.display import say
from pdelra.reporting.io import save_table, show_figure
from pdelra.reporting.sections import Report
from pdelra.results.claims import CLAIM_COLUMNS, VERDICTS, headline
from pdelra.results.verdict_rule import VERDICT_RULE

if TYPE_CHECKING:
    import pandas as pd

SIGN_PREFIX = "table11_sign_"


def render(report: Report) -> None:
    import pandas as pd

    table = report.table("claims")
    if table.empty:
        table = pd.DataFrame(columns=list(CLAIM_COLUMNS))
    save_table(
        table,
        report.out_dir,
        "claims",
        "Every claim with our effect, 95 % CI over seeds, n, verdict (Holm-adjusted within its family) "
        "and size",
        printed=_printed(table),  # formatted as style formats effects; the CSV keeps full precision
    )
    counts = table["verdict"].value_counts()
    say(f"{len(table)} claims: " + ", ".join(f"**{counts.get(v, 0)}** {v}" for v in VERDICTS) + ".")
    say(VERDICT_RULE)
    from IPython.display import HTML, display

    own = own_rows(table)
    if len(own):
        say(f"**Your variants.** {OWN_INTRO}")
        display(HTML(claims_table_html(own, "own-claims")))
    new = new_task_rows(table)
    if len(new):
        say(f"**{NEW_TASKS_TITLE}.** {NEW_TASKS_INTRO}")
        display(HTML(claims_table_html(new, "new-task-claims")))
    head = headline(table)
    ran_head = head[head["verdict"] != "not run"]
    if len(ran_head):
        display(HTML(claims_table_html(ran_head)))
    if folded := not_run_line(head):
        display(HTML(folded))
    failures = report.table("failures")
    if len(failures):
        save_table(failures, report.out_dir, "failures", f"{FAILURES_TITLE}: each cell's failed runs")
        say(f"**{FAILURES_TITLE}.** {FAILURES_INTRO}")
        display(HTML(failures_html(failures)))
    if lines := family_lines(table, registry.family_labels(report.parts)):
        say("\n".join(f"- {line}" for line in lines))
    # The headline accuracy claims that ran; a study whose headline cannot run yet (one task) shows its
    # Table 11 signs instead. Claims that did not run have no effect to draw.
    ran = head[(head["unit"] == "accuracy") & (head["verdict"] != "not run")]
    if ran.empty:
        signs = table[table["claim_id"].str.startswith(SIGN_PREFIX)]
        ran = signs[signs["verdict"] != "not run"]
    if ran.empty:
        say("_No accuracy claim has run yet: the forest plot of effects follows once one has._")
    _forest_plot(report, ran)
    _sign_grid(table[table["claim_id"].str.startswith(SIGN_PREFIX)])


# claims.csv's columns as printed (claims.md, claims.tex and so paper-tables.pdf): what a reader needs of
# its 21, the statement with its source and the effect with its interval in one cell each, so that the
# table is legible on a page. The CSV keeps them all.
PRINTED_HEADER = ("claim", "statement (source)", "unit", "paper", "ours [95 % CI]", "n", "verdict", "size",
                  "p (adjusted)")  # fmt: skip


def _printed(table: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    rows = [
        (
            c["claim_id"],
            f"{c['claim']} ({c['source']})" if isinstance(c["source"], str) else c["claim"],
            c["unit"],
            style.effect(c["paper_effect"]),
            effect_ci(c),
            style.number(c["n"], "{:.0f}"),
            c["verdict"],
            c["size"] if isinstance(c["size"], str) else style.MISSING,
            style.number(c["p_adjusted"], "{:.3g}"),
        )
        for _, c in table.iterrows()
    ]
    return pd.DataFrame(rows, columns=list(PRINTED_HEADER))


def _forest_plot(report: Report, acc: pd.DataFrame) -> None:
    """Each accuracy claim: our effect with its CI (dot coloured by verdict) beside the paper's effect."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if acc.empty:
        return
    acc = acc.iloc[::-1]
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(acc) + 2.2))
    y = np.arange(len(acc))
    has_ci = acc["ci_low"].notna().to_numpy()
    effect = acc["effect"].to_numpy(dtype=float)
    err = np.vstack([effect - acc["ci_low"].to_numpy(float), acc["ci_high"].to_numpy(float) - effect])
    ax.errorbar(effect[has_ci], y[has_ci], xerr=err[:, has_ci], fmt="none", ecolor="black", capsize=3)
    colours = [style.verdict_colour(v) for v in acc["verdict"]]
    ax.scatter(effect, y, c=colours, s=60, zorder=3, edgecolor="black")
    ax.scatter(acc["paper_effect"], y, marker=style.PAPER_MARKER, color=style.PAPER_COLOUR, s=30, zorder=4)
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_yticks(y, acc["claim_id"])
    ax.set_xlabel("effect (difference in test accuracy)")
    key = [
        Patch(facecolor=colour, edgecolor="black", label=verdict)
        for verdict, colour in style.VERDICT_COLOURS.items()
    ]
    key += [
        Line2D([], [], color="black", marker="|", linestyle="-", label="ours, 95 % CI"),
        Line2D([], [], color=style.PAPER_COLOUR, marker=style.PAPER_MARKER, linestyle="none", label="paper"),
    ]
    # The key sits right of the axes, outside the data and clear of the axis label whatever the height.
    ax.legend(handles=key, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", title="verdict")
    ax.set_title("Claims: our effect and 95 % CI (dot colour = verdict) beside the paper's")
    show_figure(
        fig,
        report.out_dir,
        "claims_forest",
        "Each accuracy claim's effect with its 95 % CI over seeds (dot colour = verdict, key beside it) "
        "beside the paper's value",
    )


def _sign_grid(signs: pd.DataFrame) -> None:
    """Table 11's sign claims as a position × task grid of verdict colours."""
    from IPython.display import HTML, display

    if signs.empty:
        return
    verdicts = dict(zip(signs["claim_id"], signs["verdict"], strict=True))
    head = "<th></th>" + "".join(f"<th>{html.escape(style.task_label(t))}</th>" for t in paper.TASKS)
    body = []
    judged = {
        claim[len(SIGN_PREFIX) : -len(task) - 1]
        for claim in verdicts
        for task in paper.TASKS
        if claim.startswith(SIGN_PREFIX) and claim.endswith(f"_{task}")
    }
    own = paper.own_variants(judged)  # a config's own variants, where the claims judge them
    for variant in (*paper.POSITIONS, *own):
        cells = []
        for task in paper.TASKS:
            word = verdicts.get(f"{SIGN_PREFIX}{variant}_{task}", "not run")
            cells.append(f'<td style="background:{style.verdict_colour(word)}">{html.escape(word)}</td>')
        body.append(f"<tr><th>{html.escape(style.variant_label(variant))}</th>{''.join(cells)}</tr>")
    say("**Table 11 signs**: does each position's gain over the baseline have the paper's sign?")
    display(HTML(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"))
