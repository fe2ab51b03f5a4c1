"""Save the report's figures and tables, each with a one-line caption that index.html lists.

- `save_figure(fig, out_dir, name, caption)` → `out_dir/figures/{name}.png` and `.pdf`;
  `show_figure` also shows the saved PNG in the notebook with its caption and closes the figure.
- `save_table(df, out_dir, name, caption)` → `out_dir/tables/{name}.csv` (machine-readable: full precision,
  missing cells empty), `.md` (Markdown) and `.tex` (a LaTeX booktabs float that plain pdflatex compiles,
  fitted to the page: pdelra.reporting.latex): in the last two no index column, one precision per column,
  missing cells as "—".
- Both record the artifact in `out_dir/artifacts.json` (`read_artifacts(out_dir)`): a list of
  {kind, name, caption, files} in the order saved, one entry per (kind, name); saving again replaces it.

Every file is written atomically (pdelra.atomic), so a reader never sees half a file.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra.atomic import atomic_path, write_json_atomic, write_text_atomic
from pdelra.reporting.latex import table_tex

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

MISSING = "—"
MANIFEST = "artifacts.json"
DEFAULT_FLOAT_FORMAT = "{:.4f}"
Formatter = str | Callable[[Any], str]


# ----------------------------------------------------------------------------------------------------
# Cell formatting
# ----------------------------------------------------------------------------------------------------
def is_missing(value: Any) -> bool:
    """None, NaN, pandas NA/NaT and the empty string are missing."""
    if value is None or (isinstance(value, str) and value == ""):
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return math.isnan(float(value))
    try:
        import pandas as pd

        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def format_cell(value: Any, fmt: Formatter | None = None) -> str:
    """One cell as text: missing → "—"; `fmt` (a str.format pattern or a function) for present values;
    without `fmt`, floats get 4 decimals and integers (also integer-valued floats of int columns) none."""
    if is_missing(value):
        return MISSING
    if fmt is not None:
        return fmt(value) if callable(fmt) else fmt.format(value)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return DEFAULT_FLOAT_FORMAT.format(float(value))
    return str(value)


def format_frame(df: pd.DataFrame, formats: Mapping[str, Formatter] | None = None) -> pd.DataFrame:
    """`df` as strings, column by column (same precision down a column), index dropped."""
    import pandas as pd

    formats = dict(formats or {})
    unknown = set(formats) - {str(c) for c in df.columns}
    if unknown:
        raise KeyError(f"formats name columns the table does not have: {sorted(unknown)}")
    out = {}
    for column in df.columns:
        series = df[column]
        fmt = formats.get(str(column))
        if fmt is None and pd.api.types.is_float_dtype(series.dtype):
            present = series.dropna()
            # A float column that only holds whole numbers (an int column with gaps) prints as integers.
            if len(present) and (present == present.round()).all() and present.abs().max() < 1e15:
                fmt = "{:.0f}"
        out[str(column)] = [format_cell(v, fmt) for v in series.tolist()]
    return pd.DataFrame(out, columns=[str(c) for c in df.columns])


def _is_numeric_column(df: pd.DataFrame, column: Any) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(df[column].dtype)) and not pd.api.types.is_bool_dtype(
        df[column].dtype
    )


def to_markdown(df: pd.DataFrame, formats: Mapping[str, Formatter] | None = None) -> str:
    """A GitHub-flavoured Markdown table: numbers right-aligned, text left-aligned, "|" escaped."""
    text = format_frame(df, formats)
    header = [str(c).replace("|", r"\|") for c in text.columns]
    align = ["---:" if _is_numeric_column(df, c) else ":---" for c in df.columns]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    for row in text.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", r"\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


def to_latex(
    df: pd.DataFrame, caption: str, label: str, formats: Mapping[str, Formatter] | None = None
) -> str:
    """A booktabs `table` float with caption and `\\label{tab:<label>}` that plain pdflatex compiles, sized to
    the page (pdelra.reporting.latex.table_tex): `\\input` it into a document with `latex.PACKAGES`."""
    text = format_frame(df, formats)
    numeric = [_is_numeric_column(df, c) for c in df.columns]
    return table_tex(list(text.columns), text.values.tolist(), numeric, caption, label)


# ----------------------------------------------------------------------------------------------------
# The manifest of captions
# ----------------------------------------------------------------------------------------------------
def _check_name(name: str) -> None:
    if not name or "/" in name or "\\" in name or name.startswith(".") or name != name.strip():
        raise ValueError(f"artifact name {name!r} must be a plain file stem (no folders, no leading dot)")


def read_artifacts(out_dir: str | Path) -> list[dict[str, Any]]:
    """The artifacts saved into `out_dir` so far: [{kind, name, caption, files}], in the order saved."""
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    return list(data.get("artifacts", []))


def _record(out_dir: Path, kind: str, name: str, caption: str, files: list[Path]) -> None:
    entries = [a for a in read_artifacts(out_dir) if (a["kind"], a["name"]) != (kind, name)]
    entries.append(
        {
            "kind": kind,
            "name": name,
            "caption": " ".join(str(caption).split()),  # one line
            "files": [f.relative_to(out_dir).as_posix() for f in files],
        }
    )
    write_json_atomic(out_dir / MANIFEST, {"artifacts": entries})


# ----------------------------------------------------------------------------------------------------
# Public: save a figure, save a table
# ----------------------------------------------------------------------------------------------------
CHECK_FIGURES_ENV = "PDELRA_CHECK_FIGURES"


class FigureLayoutError(ValueError):
    """A figure that cannot go on a slide: overlapping texts or a legend over data."""


def save_figure(fig: Figure, out_dir: str | Path, name: str, caption: str) -> None:
    """Write `fig` as `out_dir/figures/{name}.png` (150 dpi) and `.pdf`, and record its caption.

    With PDELRA_CHECK_FIGURES=1 (the test suite sets it) a figure whose texts overlap or whose legend hides
    data is refused, naming what collides (`pdelra.reporting.overlap`; one extra drawing per figure)."""
    _check_name(name)
    if os.environ.get(CHECK_FIGURES_ENV) == "1":
        # Imported only for the check: overlap loads matplotlib's renderer (about 0.5 s), which the
        # processes that import io without drawing (`pdelra report`'s own, via style) never need.
        from pdelra.reporting.overlap import figure_problems

        problems = figure_problems(fig)
        if problems:
            raise FigureLayoutError(f"figure {name}: " + "; ".join(problems))
    out_dir = Path(out_dir)
    folder = out_dir / "figures"
    files = []
    for ext, kwargs in (("png", {"dpi": 150}), ("pdf", {})):
        target = folder / f"{name}.{ext}"
        with atomic_path(target) as tmp:
            fig.savefig(tmp, format=ext, bbox_inches="tight", **kwargs)
        files.append(target)
    _record(out_dir, "figure", name, caption, files)


def show_figure(fig: Figure, out_dir: str | Path, name: str, caption: str) -> None:
    """save_figure, then show the saved PNG with its caption in the notebook and close `fig`.

    Showing the PNG rather than the figure spares a fourth rendering of it (the inline backend would draw
    it again): the report spends most of its time drawing figures."""
    import base64
    import html

    import matplotlib.pyplot as plt
    from IPython.display import HTML, Markdown, display
    from PIL import Image as PILImage

    save_figure(fig, out_dir, name, caption)
    plt.close(fig)
    png = Path(out_dir) / "figures" / f"{name}.png"
    with PILImage.open(png) as image:
        width = round(image.width * 2 / 3)  # 150 dpi shown at the notebook's usual 100 dpi
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    # An <img> with the caption as alt text (a screen reader's figure; nbconvert warns on images without).
    display(HTML(f'<img src="data:image/png;base64,{data}" width="{width}" alt="{html.escape(caption)}">'))
    display(Markdown(f"*Figure `{name}`: {caption}*"))


def save_table(
    df: pd.DataFrame,
    out_dir: str | Path,
    name: str,
    caption: str,
    *,
    formats: Mapping[str, Formatter] | None = None,
    printed: pd.DataFrame | None = None,
) -> None:
    """Write `df` as `out_dir/tables/{name}.csv`, `.md` and `.tex` (booktabs), and record its caption.

    The index is never written (reset it first if it carries data). CSV keeps full precision with empty
    missing cells; Markdown and LaTeX show `formats[column]` (a str.format pattern such as "{:+.2f}", or a
    function) or 4 decimals for floats, and "—" where a value is missing. `printed`, when given, is what
    Markdown and LaTeX show instead of `df` (and what `formats` names): the columns a reader needs, when the
    CSV has many more.
    """
    _check_name(name)
    out_dir = Path(out_dir)
    folder = out_dir / "tables"
    csv, md, tex = (folder / f"{name}.{ext}" for ext in ("csv", "md", "tex"))
    shown = df if printed is None else printed
    write_text_atomic(csv, df.to_csv(index=False, float_format="%.6g"))
    write_text_atomic(md, to_markdown(shown, formats))
    write_text_atomic(tex, to_latex(shown, caption, name, formats))
    _record(out_dir, "table", name, caption, [csv, md, tex])


def table_html(df: pd.DataFrame, formats: Mapping[str, Formatter] | None = None) -> str:
    """The table as an HTML fragment for the notebook (no index column, "—" for missing)."""
    text = format_frame(df, formats)
    styler = text.style.hide(axis="index")
    numeric = [str(c) for c in df.columns if _is_numeric_column(df, c)]
    if numeric:
        styler = styler.set_properties(subset=numeric, **{"text-align": "right"})
    return styler.to_html()


def show_table(
    df: pd.DataFrame,
    out_dir: str | Path | None = None,
    name: str | None = None,
    caption: str = "",
    *,
    formats: Mapping[str, Formatter] | None = None,
) -> None:
    """Display the table in the notebook (caption above it) and, with `out_dir` and `name`, save it too."""
    from IPython.display import HTML, display

    if out_dir is not None and name is not None:
        save_table(df, out_dir, name, caption, formats=formats)
    head = f"<p><em>{caption}</em></p>" if caption else ""
    display(HTML(head + table_html(df, formats)))
