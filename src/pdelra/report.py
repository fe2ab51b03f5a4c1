"""`pdelra report`: execute the report notebook on the result tables (papermill) and render it to HTML.

The report folder holds `report.ipynb` (executed, with outputs), `report.html` (code cells hidden),
`figures/*.png` and `tables/*.csv` written by the notebook, and `index.html`, a landing page linking them.
Everything is built in a staging folder beside `--out` and swapped in at the end, so a failed or interrupted
report never leaves a half-written folder behind.
"""

from __future__ import annotations

import argparse
import html
import logging
from pathlib import Path
from typing import Any

from pdelra.atomic import atomic_dir
from pdelra.errors import UserError

log = logging.getLogger(__name__)

DEFAULT_NOTEBOOK = Path("workflow/notebooks/report.ipynb")
DEFAULT_KERNEL = (
    "pdelra"  # registered by `make venv` (python -m ipykernel install --sys-prefix --name pdelra)
)


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
        raise ReportError(
            f"{notebook}: cell {exc.exec_count} failed with {exc.ename}: {exc.evalue} "
            f"(the partly executed notebook is {executed})"
        ) from exc
    except Exception as exc:  # no such kernel, unreadable notebook, ...: papermill raises plain errors
        if "No such kernel" in str(exc):
            raise ReportError(
                f"no Jupyter kernel named {kernel!r}: register it with "
                f"`python -m ipykernel install --sys-prefix --name {kernel}` (make venv does)"
            ) from exc
        raise


def render_html(executed: Path, html_path: Path) -> None:
    """The executed notebook as a self-contained HTML page without the code cells."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nbformat.read(executed, as_version=4))
    html_path.write_text(body, encoding="utf-8")


def _links(folder: Path, pattern: str) -> str:
    items = sorted(folder.glob(pattern))
    if not items:
        return "<li><em>none</em></li>"
    return "\n".join(
        f'<li><a href="{html.escape(p.relative_to(folder.parent).as_posix())}">{html.escape(p.name)}</a></li>'
        for p in items
    )


def write_index(report_dir: Path, experiment: str, tables_dir: Path) -> None:
    """A landing page: the report, its figures and tables, and the source tables it was built from."""
    import pandas as pd

    runs = pd.read_csv(tables_dir / "runs.csv")
    status = ", ".join(f"{n} {html.escape(str(s))}" for s, n in runs["status"].value_counts().items())
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(experiment)}: PDE diffusion on LRA</title>
<style>body{{font-family:sans-serif;max-width:50em;margin:2em auto;line-height:1.5}}</style></head>
<body>
<h1>Where to add PDE diffusion in Transformers: experiment <code>{html.escape(experiment)}</code></h1>
<p>{len(runs)} runs ({status}).</p>
<p><a href="report.html"><strong>Open the report</strong></a> (tables, figures, comparison with the paper,
deviations) · <a href="report.ipynb">executed notebook</a></p>
<h2>Figures</h2><ul>{_links(report_dir / "figures", "*.png")}</ul>
<h2>Tables</h2><ul>{_links(report_dir / "tables", "*.csv")}</ul>
</body></html>
"""
    (report_dir / "index.html").write_text(page, encoding="utf-8")


def build_report(
    tables: Path,
    out: Path,
    notebook: Path = DEFAULT_NOTEBOOK,
    kernel: str = DEFAULT_KERNEL,
    experiment: str | None = None,
    timeout: int | None = 600,
) -> Path:
    """Build the whole report folder `out` from the aggregate tables; returns the path of index.html."""
    tables, out, notebook = Path(tables).resolve(), Path(out), Path(notebook).resolve()
    for required in (notebook, tables / "runs.csv"):
        if not required.is_file():
            raise ReportError(f"{required} does not exist (run `pdelra aggregate` first for the tables)")
    experiment = experiment or out.resolve().parent.name
    with atomic_dir(out) as staging:  # the previous report stays until the new one is complete
        (staging / "figures").mkdir()
        (staging / "tables").mkdir()
        executed = staging / "report.ipynb"
        log.info("executing %s with kernel %s", notebook, kernel)
        params = {"tables_dir": str(tables), "out_dir": str(staging.resolve()), "experiment": experiment}
        execute_notebook(notebook, executed, params, kernel, timeout)
        log.info("rendering HTML")
        render_html(executed, staging / "report.html")
        write_index(staging, experiment, tables)
    log.info("report written to %s", out / "index.html")
    return out / "index.html"


def _run(args: argparse.Namespace) -> int:
    build_report(args.tables, args.out, args.notebook, args.kernel, args.experiment, args.timeout)
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="execute the report notebook on the result tables and render it to HTML",
        description=(
            "Execute the report notebook with papermill (explicit kernel) on the tables of "
            "`pdelra aggregate`, then render it to HTML without code cells. OUT receives report.ipynb, "
            "report.html, figures/*.png, tables/*.csv (ours beside the paper's Tables 10, 12 and 14) and "
            "index.html. OUT is replaced as a whole once everything succeeded."
        ),
    )
    parser.add_argument(
        "--tables", type=Path, required=True, help="folder of runs.csv, main.csv, ... (aggregate)"
    )
    parser.add_argument("--out", type=Path, required=True, help="report folder to (re)create")
    parser.add_argument(
        "--notebook",
        type=Path,
        default=DEFAULT_NOTEBOOK,
        help=f"notebook to execute (default: {DEFAULT_NOTEBOOK})",
    )
    parser.add_argument(
        "--kernel",
        default=DEFAULT_KERNEL,
        help=f"Jupyter kernel to execute it with (default: {DEFAULT_KERNEL})",
    )
    parser.add_argument(
        "--experiment", help="experiment name shown in the report (default: OUT's parent folder)"
    )
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds a single notebook cell may run (default: 600)"
    )
    parser.set_defaults(func=_run)
