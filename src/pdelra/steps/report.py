"""`pdelra report`: execute the report notebook on the result tables (papermill) and render it to HTML.

The report folder holds `report.ipynb` (executed, with outputs), `report.html` (code cells hidden),
`figures/*.{png,pdf}` and `tables/*.{csv,md,tex}` written by the notebook (their captions in
`artifacts.json`), `tables/claims.csv` (the verdict per claim: a copy of the one `pdelra aggregate`
writes), `tables/paper-tables.tex|pdf` and `index.html`, a landing page with the data banner and the
verdicts at the top and every figure and table with its caption. Everything is built in a
staging folder beside `--out` and swapped in at the end, so a failed or interrupted report never leaves a
half-written folder behind.

`pdelra report --partial --runs results/X/runs` renders the same report from whatever metrics.json exist
now (a grid still running): it aggregates them into the report folder's own `source-tables/` and writes
to `results/X/report-partial/` by default, so the workflow's own tables and report are never touched.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pdelra import paper
from pdelra import parts as registry
from pdelra.atomic import atomic_dir
from pdelra.errors import UserError
from pdelra.reporting.banner import banner_html
from pdelra.reporting.claims_html import (
    FAILURES_INTRO,
    FAILURES_TITLE,
    NEW_TASKS_INTRO,
    NEW_TASKS_TITLE,
    OWN_INTRO,
    claims_table_html,
    failures_html,
    family_lines,
    new_task_rows,
    not_run_line,
    own_rows,
)
from pdelra.reporting.io import read_artifacts
from pdelra.reporting.paper_tables import LatexError, build_pdf, write_paper_tables
from pdelra.reporting.style import VERDICT_COLOURS
from pdelra.reporting.title import title_of
from pdelra.results.build import AGGREGATE_TABLES, read_table
from pdelra.results.claims import headline
from pdelra.results.verdict_rule import VERDICT_RULE
from pdelra.runs import find_run_files
from pdelra.steps.aggregate import aggregate
from pdelra.steps.cli import DEFAULT_KERNEL, DEFAULT_NOTEBOOK

# pandas, papermill and nbconvert are imported where they are used: seconds to import, and only the steps
# that build a report need them.

log = logging.getLogger(__name__)


class ReportError(UserError, RuntimeError):
    """The report could not be built; the message says which input or step failed."""


def execute_notebook(
    notebook: Path, executed: Path, parameters: dict[str, Any], kernel: str, timeout: int | None
) -> None:
    """Run `notebook` with papermill into `executed`, injecting `parameters` into its `parameters` cell."""
    import papermill

    try:
        papermill.execute_notebook(
            str(notebook),
            str(executed),
            parameters=parameters,
            kernel_name=kernel,
            cwd=str(executed.parent),
            progress_bar=False,
            log_output=False,
            execution_timeout=timeout,
        )
    except papermill.PapermillExecutionError as exc:
        raise ReportError(f"{notebook}: cell {exc.exec_count} failed with {exc.ename}: {exc.evalue}") from exc
    except Exception as exc:  # no such kernel, unreadable notebook, ...: papermill raises plain errors
        if "No such kernel" in str(exc):
            raise ReportError(
                f"no Jupyter kernel named {kernel!r}: register it with "
                f"`python -m ipykernel install --sys-prefix --name {kernel}` (make venv does)"
            ) from exc
        raise


@contextlib.contextmanager
def kernel_finds_working_dir(parts: tuple[str, ...]) -> Iterator[None]:
    """With a config's own parts, the notebook's kernel (which runs in the report folder) also imports from
    this working directory, where the workflow finds their modules (pdelra.importing): on its PYTHONPATH,
    which it inherits, for the duration."""
    if not parts:
        yield
        return
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (before, str(Path.cwd()))))
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def render_html(executed: Path, html_path: Path) -> None:
    """The executed notebook as a self-contained HTML page without the code cells."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nbformat.read(executed, as_version=4))
    html_path.write_text(body, encoding="utf-8")


def _markdown_bold(text: str) -> str:
    """The claims module's rule (Markdown with **bold** and *italics*) as HTML."""
    text = html.escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    text = re.sub(r"\*(.+?)\*", r"<em>\1</em>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def _claims_html(claims_csv: Path, parts: tuple[str, ...] = ()) -> str:
    """The verdict counts; a config's own variants' claims first, when it has some; the paper's headline
    claims that ran with direction and size, those that did not in one line; Table 11's per-cell signs,
    the related systems, the diagnostics and each of the experiment's parts (`parts`: the config's own)
    summarised in one line each."""
    import pandas as pd

    if not claims_csv.is_file():
        return "<h2>Verdicts</h2><p><em>No claims table (claims.csv) was written.</em></p>"
    claims = pd.read_csv(claims_csv, keep_default_na=False, na_values=[""])
    counts = claims["verdict"].value_counts()
    badges = " ".join(
        f'<span class="badge" style="background:{colour}">{counts.get(v, 0)} {html.escape(v)}</span>'
        for v, colour in VERDICT_COLOURS.items()
    )
    own = own_rows(claims)
    yours = (
        f"<h2>Your variants</h2><p>{_markdown_bold(OWN_INTRO)}</p>{claims_table_html(own, 'own-claims')}"
        if len(own)
        else ""
    )
    new = new_task_rows(claims)
    if len(new):
        intro = _markdown_bold(NEW_TASKS_INTRO)
        yours += f"<h2>{NEW_TASKS_TITLE}</h2><p>{intro}</p>{claims_table_html(new, 'new-task-claims')}"
    head = headline(claims)
    ran = head[head["verdict"] != "not run"]
    lines = [f"<li>{html.escape(line)}</li>" for line in family_lines(claims, registry.family_labels(parts))]
    others = f"<ul>{''.join(lines)}</ul>" if lines else ""
    failures = read_table(claims_csv.parent / "failures.csv")
    failed = (
        f"<h3>{FAILURES_TITLE}</h3><p>{html.escape(FAILURES_INTRO)}</p>{failures_html(failures)}"
        if len(failures)
        else ""
    )
    return f"""{yours}
<h2>Verdicts</h2>
<p class="badges">{len(claims)} claims: {badges}</p>
{claims_table_html(ran, "claims") if len(ran) else ""}
{not_run_line(head)}
{failed}
{others}
<p class="rule">{_markdown_bold(VERDICT_RULE)} Every claim with its method, p-values and details:
<a href="tables/claims.csv">tables/claims.csv</a>.</p>"""


def _artifacts_html(report_dir: Path) -> str:
    entries = read_artifacts(report_dir)
    figures = [e for e in entries if e["kind"] == "figure"]
    tables = [e for e in entries if e["kind"] == "table"]
    figure_items = []
    for e in figures:
        png = next((f for f in e["files"] if f.endswith(".png")), None)
        links = " · ".join(
            f'<a href="{html.escape(f)}">{html.escape(Path(f).suffix[1:].upper())}</a>' for f in e["files"]
        )
        alt = html.escape(e["caption"])
        thumb = f'<a href="{html.escape(png)}"><img src="{html.escape(png)}" alt="{alt}"></a>'
        figure_items.append(
            f"<figure>{thumb if png else ''}"
            f"<figcaption>{html.escape(e['caption'])} ({links})</figcaption></figure>"
        )
    table_items = []
    for e in tables:
        links = " · ".join(
            f'<a href="{html.escape(f)}">{html.escape(Path(f).suffix[1:].upper())}</a>' for f in e["files"]
        )
        table_items.append(
            f"<li><code>{html.escape(e['name'])}</code>: {html.escape(e['caption'])} ({links})</li>"
        )
    return (
        "<h2>Figures</h2>"
        + (
            '<div class="figures">' + "\n".join(figure_items) + "</div>"
            if figure_items
            else "<p><em>none</em></p>"
        )
        + "<h2>Tables</h2>"
        + ("<ul>" + "\n".join(table_items) + "</ul>" if table_items else "<p><em>none</em></p>")
    )


def _paper_tables_links(report_dir: Path) -> str:
    links = [
        f'<a href="tables/paper-tables.{ext}">{ext.upper()}</a>'
        for ext in ("pdf", "tex")
        if (report_dir / "tables" / f"paper-tables.{ext}").is_file()
    ]
    return " · ".join(links) or "—"


def _parts_html(tables_dir: Path, own: tuple[str, ...]) -> str:
    """The experiment's parts with a report section (pdelra.parts), each with its tables or "not run"."""
    items = []
    for part in registry.registered({"parts": list(own)}):
        if part.report is None:
            continue
        found = [t for t in part.tables if (tables_dir / f"{t}.csv").is_file()]
        what = ", ".join(f"<code>{html.escape(t)}.csv</code>" for t in found) or "<em>not run</em>"
        title = html.escape(part.heading.lstrip("# ") or part.name)
        items.append(f"<li><strong>{title}</strong> (<code>{html.escape(part.name)}</code>): {what}</li>")
    return "<h2>Parts</h2><ul>" + "\n".join(items) + "</ul>" if items else ""


def write_index(
    report_dir: Path, experiment: str, tables_dir: Path, partial: bool = False, parts: tuple[str, ...] = ()
) -> None:
    """A landing page: the verdicts first, then the report, its figures and tables with their captions."""
    import pandas as pd

    runs = pd.read_csv(tables_dir / "runs.csv")
    status = ", ".join(f"{n} {html.escape(str(s))}" for s, n in runs["status"].value_counts().items())
    own = paper.own_variants(runs["variant"])  # a config's own variants: named here, shown in every table
    if own:
        names = ", ".join(f"<code>{html.escape(v)}</code>" for v in own)
        status += f"; variants of your own (the config's <code>variants</code>): {names}"
    note = (
        '<p class="partial"><strong>Partial report</strong>: built from the runs finished so far; '
        "missing cells are shown as missing and their claims as <em>not run</em>.</p>"
        if partial
        else ""
    )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(experiment)}: PDE diffusion on LRA</title>
<style>
body{{font-family:sans-serif;max-width:72em;margin:2em auto;line-height:1.45;padding:0 1em}}
table{{border-collapse:collapse;font-size:0.92em}} td,th{{border:1px solid #ccc;padding:0.25em 0.5em}}
td.n{{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}} th{{background:#f3f3f3}}
.badge{{padding:0.15em 0.6em;border-radius:0.6em;margin-right:0.3em;font-weight:bold}}
.figures{{display:grid;grid-template-columns:repeat(auto-fill,minmax(20em,1fr));gap:1em}}
figure{{margin:0}} figure img{{width:100%;border:1px solid #ddd}} figcaption{{font-size:0.9em}}
.partial{{background:#fff3cd;padding:0.5em}}
.banner{{padding:0.6em 1em;margin:1em 0;border-left:0.4em solid #999}}
.banner.toy{{background:#fde0dd;border-color:#c51b8a}}
.banner.paper{{background:#e5f5e0;border-color:#31a354}}
.banner table{{font-size:0.85em}} td.size{{white-space:nowrap}}
</style></head>
<body>
<h1>{html.escape(title_of(runs, read_table(report_dir / "tables" / "claims.csv")))}</h1>
{banner_html(read_table(tables_dir / "data.csv"))}
<p>Experiment <code>{html.escape(experiment)}</code>: {len(runs)} runs ({status}).
<a href="report.html"><strong>Read the full report</strong></a> (claims, the paper's tables and figures
beside ours, provenance, deviations) · <a href="report.ipynb">executed notebook</a> · every table for a paper:
{_paper_tables_links(report_dir)}</p>
{note}
{_claims_html(report_dir / "tables" / "claims.csv", parts)}
{_parts_html(tables_dir, parts)}
{_artifacts_html(report_dir)}
</body></html>
"""
    (report_dir / "index.html").write_text(page, encoding="utf-8")


def _paper_tables(report_dir: Path) -> None:
    """tables/paper-tables.tex (every table, \\input-ed) and its PDF when pdflatex is installed. A failed
    compile is logged and leaves the .tex: the report itself is complete without the PDF (the tests
    compile every table with a real TeX)."""
    tex = write_paper_tables(report_dir)
    try:
        pdf = build_pdf(tex)
    except LatexError as exc:
        log.warning("paper-tables.pdf not built: %s", exc)
        return
    log.info("paper tables: %s", "tables/paper-tables.pdf" if pdf else ".tex only (no pdflatex on PATH)")


def build_report(
    tables: Path,
    out: Path,
    notebook: Path = DEFAULT_NOTEBOOK,
    kernel: str = DEFAULT_KERNEL,
    experiment: str | None = None,
    timeout: int | None = 600,
    partial: bool = False,
    parts: tuple[str, ...] = (),
) -> Path:
    """Build the whole report folder `out` from the aggregate tables; returns the path of index.html.
    `parts`: the config's own parts (their modules), whose sections it shows too."""
    tables, out, notebook = Path(tables).resolve(), Path(out), Path(notebook).resolve()
    if not notebook.is_file():
        raise ReportError(f"report notebook {notebook} does not exist")
    missing = [name for name in AGGREGATE_TABLES if not (tables / f"{name}.csv").is_file()]
    if missing:  # checked here: inside the notebook the error would point into the discarded staging folder
        names = ", ".join(f"{name}.csv" for name in missing)
        raise ReportError(
            f"{tables} lacks {names}: `pdelra aggregate --out {tables} METRICS...` (the workflow's "
            "aggregate rule) writes every table the report reads"
        )
    experiment = experiment or out.resolve().parent.name
    with atomic_dir(out) as staging:  # the previous report stays until the new one is complete
        (staging / "figures").mkdir()
        (staging / "tables").mkdir()
        if partial:  # the snapshot of tables it was built from travels with the partial report
            shutil.copytree(tables, staging / "source-tables")
            tables = (staging / "source-tables").resolve()
        executed = staging / "report.ipynb"
        log.info("executing %s with kernel %s", notebook, kernel)
        params = {
            "tables_dir": str(tables),
            "out_dir": str(staging.resolve()),
            "experiment": experiment,
            "partial": partial,
            "parts": list(parts),
        }
        try:
            with kernel_finds_working_dir(parts):
                execute_notebook(notebook, executed, params, kernel, timeout)
        except ReportError as exc:  # the staging folder is discarded: keep the notebook for the post-mortem
            if not executed.is_file():
                raise
            kept = out.parent / f"{out.name}.failed.ipynb"
            shutil.copyfile(executed, kept)
            raise ReportError(f"{exc} (the partly executed notebook is kept as {kept})") from exc
        if not (staging / "tables" / "claims.csv").is_file():
            raise ReportError(f"{notebook} did not write tables/claims.csv (its claims section is missing)")
        log.info("rendering HTML")
        render_html(executed, staging / "report.html")
        _paper_tables(staging)
        write_index(staging, experiment, tables, partial, parts)
    log.info("report written to %s", out / "index.html")
    return out / "index.html"


def build_partial_report(
    runs: Path,
    out: Path | None = None,
    notebook: Path = DEFAULT_NOTEBOOK,
    kernel: str = DEFAULT_KERNEL,
    experiment: str | None = None,
    timeout: int | None = 600,
    parts: tuple[str, ...] = (),
) -> Path:
    """The report of whatever runs under `runs` have finished (metrics.json written), into `out`
    (default: `runs/../report-partial`), leaving the workflow's own tables and report alone; `parts`: the
    config's own parts."""
    runs = Path(runs).resolve()
    out = Path(out) if out is not None else runs.parent / "report-partial"
    experiment = experiment or runs.parent.name
    with tempfile.TemporaryDirectory(prefix=".partial-tables.", dir=out.resolve().parent) as tmp:
        write_partial_tables(runs, Path(tmp), parts)
        return build_report(Path(tmp), out, notebook, kernel, experiment, timeout, partial=True, parts=parts)


def write_partial_tables(runs: Path, tables: Path, parts: tuple[str, ...] = ()) -> None:
    """Into `tables`, what the workflow's aggregate step would write from the runs finished so far: the
    tables of every part (pdelra.parts: the diagnostics, the LM, Continuous-Time Attention's own
    experiments, the config's own `parts`) from its runs under `runs/..` built with the function its rule
    runs, then `aggregate` over the metrics.json under `runs` and those parts, as the aggregate rule passes
    them; a part without a finished run is left out ("not run"). The workflow's data description
    (tables/data.csv), when written, is copied for the report's banner."""
    found = find_run_files(runs, "metrics.json")
    if not found:
        raise ReportError(
            f"no finished run under {runs} (no */*/*/*/seed*/metrics.json yet): nothing to report"
        )
    experiment_dir = Path(runs).parent
    extra: dict[str, Path] = {}
    own = registry.plugins({"parts": list(parts)})
    for part in registry.builtin():
        extra |= part.build_finished(experiment_dir, tables)
    for part in own:  # aggregate reads their tables from its own folder, `tables`
        part.build_finished(experiment_dir, tables)
    aggregate(found, tables, extra, own)
    data = experiment_dir / "tables" / "data.csv"
    if data.is_file():
        shutil.copyfile(data, tables / "data.csv")


def command(args: argparse.Namespace) -> int:
    """`pdelra report` (declared in pdelra.steps.cli)."""
    if args.partial:
        if args.runs is None:
            raise ReportError("--partial needs --runs results/EXPERIMENT/runs (the runs finished so far)")
        build_partial_report(
            args.runs, args.out, args.notebook, args.kernel, args.experiment, args.timeout, tuple(args.part)
        )
        return 0
    if args.tables is None or args.out is None:
        raise ReportError("give --tables and --out (or --partial --runs DIR)")
    build_report(
        args.tables,
        args.out,
        args.notebook,
        args.kernel,
        args.experiment,
        args.timeout,
        parts=tuple(args.part),
    )
    return 0
