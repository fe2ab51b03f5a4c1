"""LaTeX for the report's tables: files that plain `pdflatex` compiles.

- `latex_escape(text)`: LaTeX's special characters escaped and every Unicode character the report writes
  (τ, ≤, ±, −, —, é, …) mapped to a command that works in text and in math mode (`UNICODE`, one table).
- `table_tex(header, rows, numeric, caption, label)`: a booktabs `table` float for `\\input`, laid out to fit
  the page: long free text and identifiers in wrapping `p{}` columns (an identifier breaks after `_`), long
  headers on two lines, every table shrunk to `\\linewidth` (and the page height) only when wider, very wide
  ones on a landscape page, long ones split into floats of a page each ("continued"). The file needs
  `\\usepackage{booktabs,array,graphicx,pdflscape}` (`PACKAGES`). `pdelra.reporting.io.save_table` writes it.
The one document of them all is assembled and compiled in `pdelra.reporting.paper_tables`.
"""

from __future__ import annotations

import math
import re
import textwrap
import unicodedata
import warnings
from collections.abc import Iterable, Sequence

PACKAGES = ("booktabs", "array", "graphicx", "pdflscape")
PAPER_TABLES = "paper-tables.tex"

# Sizes in characters of the body font (10 pt Computer Modern: a digit is 5 pt, \tabcolsep 2 x 6 pt) and in
# lines of a table (12 pt) of article's default page (text 345 x 550 pt), for a table that fits at scale 1.
LINE_CHARS = 70
LANDSCAPE_CHARS = 105  # wider than this would shrink below ~2/3 in portrait: turn the page instead
LANDSCAPE_LINE_CHARS = 110
PAGE_LINES = 38  # 85 % of the page's height, less the caption
LANDSCAPE_PAGE_LINES = 22
WRAP_CHARS = 32  # width of a wrapping free-text column (p{16em})
HEADER_CHARS = 10  # longer headers of narrower columns wrap onto two or three lines
COLUMN_GAP = 2

# ----------------------------------------------------------------------------------------------------
# Escaping
# ----------------------------------------------------------------------------------------------------
_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # The OT1 font encoding of plain pdflatex prints these three as ¡, ¿ and an em dash.
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    # After a row end `\\`, a `[` opens its optional vertical-space argument ("Missing = inserted"): a
    # header line or first cell such as "[95 % CI]" must not start with a bare bracket.
    "[": "{[}",
    "]": "{]}",
    '"': "''",
}


def _math(command: str) -> str:
    return rf"\ensuremath{{{command}}}"


# Greek letters, lower case then upper case (those that differ from Latin ones), as math commands.
_GREEK_LETTERS = "αβγδεζηθικλμνξπρσςτυφχψωϵϕµΓΔΘΛΞΠΣΥΦΨΩ"
_GREEK_NAMES = (
    "alpha beta gamma delta varepsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma varsigma tau "
    "upsilon varphi chi psi omega epsilon phi mu Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega"
)
_GREEK = dict(zip(_GREEK_LETTERS, _GREEK_NAMES.split(), strict=True))

# Every non-ASCII character the report may write, as LaTeX that plain pdflatex (OT1, no extra packages)
# typesets in text and in math mode. Letters with accents not listed here are composed from unicodedata.
UNICODE: dict[str, str] = {
    **{ch: _math("\\" + name) for ch, name in _GREEK.items()},
    # Dashes, quotes, spaces.
    "—": "---",
    "–": "--",
    "‐": "-",
    "‑": "-",
    "−": _math("-"),
    "…": r"\ldots{}",
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
    "«": "<<",
    "»": ">>",
    "\u00a0": "~",
    "\u2009": r"\,",
    "\u202f": r"\,",
    "·": _math(r"\cdot"),
    "•": _math(r"\bullet"),
    "§": r"\S{}",
    "¶": r"\P{}",
    "†": r"\dag{}",
    "‡": r"\ddag{}",
    "©": r"\copyright{}",
    "°": _math(r"^\circ"),
    "′": _math(r"'"),
    "″": _math(r"''"),
    # Operators and relations.
    "±": _math(r"\pm"),
    "∓": _math(r"\mp"),
    "×": _math(r"\times"),
    "÷": _math(r"\div"),
    "≤": _math(r"\leq"),
    "≥": _math(r"\geq"),
    "≠": _math(r"\neq"),
    "≈": _math(r"\approx"),
    "≃": _math(r"\simeq"),
    "≡": _math(r"\equiv"),
    "∼": _math(r"\sim"),
    "∝": _math(r"\propto"),
    "≪": _math(r"\ll"),
    "≫": _math(r"\gg"),
    "∞": _math(r"\infty"),
    "√": _math(r"\surd"),
    "∑": _math(r"\sum"),
    "∏": _math(r"\prod"),
    "∫": _math(r"\int"),
    "∂": _math(r"\partial"),
    "∇": _math(r"\nabla"),
    "∈": _math(r"\in"),
    "∉": _math(r"\notin"),
    "⊂": _math(r"\subset"),
    "∪": _math(r"\cup"),
    "∩": _math(r"\cap"),
    "∅": _math(r"\emptyset"),
    "∀": _math(r"\forall"),
    "∃": _math(r"\exists"),
    "¬": _math(r"\neg"),
    "∧": _math(r"\wedge"),
    "∨": _math(r"\vee"),
    "⊕": _math(r"\oplus"),
    "⊗": _math(r"\otimes"),
    "∘": _math(r"\circ"),
    "‖": _math(r"\|"),
    "∣": _math(r"\mid"),
    "⟨": _math(r"\langle"),
    "⟩": _math(r"\rangle"),
    "ℓ": _math(r"\ell"),
    "ℝ": _math(r"\mathbf{R}"),
    # Arrows.
    "→": _math(r"\rightarrow"),
    "←": _math(r"\leftarrow"),
    "↔": _math(r"\leftrightarrow"),
    "↑": _math(r"\uparrow"),
    "↓": _math(r"\downarrow"),
    "⇒": _math(r"\Rightarrow"),
    "⇐": _math(r"\Leftarrow"),
    "⇔": _math(r"\Leftrightarrow"),
    "↦": _math(r"\mapsto"),
    # Checks and crosses as plain words a table reader understands without a symbol font.
    "✓": "yes",
    "✔": "yes",
    "✗": "no",
    "✘": "no",
    # Fractions, super- and subscripts.
    "½": _math(r"\frac{1}{2}"),
    "¼": _math(r"\frac{1}{4}"),
    "¾": _math(r"\frac{3}{4}"),
    "⅓": _math(r"\frac{1}{3}"),
    "⅔": _math(r"\frac{2}{3}"),
    **{sup: _math(f"^{{{d}}}") for sup, d in zip("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789", strict=True)},
    "⁺": _math("^{+}"),
    "⁻": _math("^{-}"),
    **{sub: _math(f"_{{{d}}}") for sub, d in zip("₀₁₂₃₄₅₆₇₈₉", "0123456789", strict=True)},
    # Letters plain OT1 has no glyph for, spelled with its own commands.
    "ß": r"\ss{}",
    "æ": r"\ae{}",
    "Æ": r"\AE{}",
    "ø": r"\o{}",
    "Ø": r"\O{}",
    "œ": r"\oe{}",
    "Œ": r"\OE{}",
    "å": r"\aa{}",
    "Å": r"\AA{}",
    "ł": r"\l{}",
    "Ł": r"\L{}",
    "ı": r"\i{}",
}

# Combining accents (unicodedata's decomposition of é, ü, ñ, ...) as LaTeX's accent commands.
_ACCENTS = {
    "\u0300": "`",
    "\u0301": "'",
    "\u0302": "^",
    "\u0303": "~",
    "\u0304": "=",
    "\u0306": "u",
    "\u0307": ".",
    "\u0308": '"',
    "\u030a": "r",
    "\u030b": "H",
    "\u030c": "v",
    "\u0327": "c",
    "\u0328": "k",
}

# A hyphen that starts a number ("-0.12", "(-3") is a minus sign.
_NEGATIVE = re.compile(r"(?<![\w.)\]])-(?=\.?\d)")


def _accented(ch: str) -> str | None:
    parts = unicodedata.normalize("NFD", ch)
    base, marks = parts[0], parts[1:]
    if not base.isascii() or not marks or any(m not in _ACCENTS for m in marks):
        return None
    out = base.replace("i", r"\i{}") if base == "i" else base
    for mark in marks:
        out = rf"\{_ACCENTS[mark]}{{{out}}}"
    return out


def _unicode_to_latex(ch: str) -> str:
    found = UNICODE.get(ch) or _accented(ch)
    if found is not None:
        return found
    name = unicodedata.name(ch, "unnamed")
    code = f"U+{ord(ch):04X}"
    warnings.warn(
        f"no LaTeX form for {ch!r} ({code} {name}): written as {code}; add it to "
        "pdelra.reporting.latex.UNICODE",
        stacklevel=3,
    )
    return rf"\texttt{{{code}}}"


def latex_escape(text: object) -> str:
    """`text` as LaTeX that plain pdflatex typesets: specials escaped, Unicode mapped (`UNICODE`), a hyphen
    before a number written as a minus sign. The result is valid in text mode and inside `$...$` too."""
    out = []
    for ch in _NEGATIVE.sub("−", str(text)):
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch.isascii():
            out.append(ch if ch.isprintable() else " ")
        else:
            out.append(_unicode_to_latex(ch))
    return "".join(out)


# ----------------------------------------------------------------------------------------------------
# One table
# ----------------------------------------------------------------------------------------------------
# Shrink the tabular to the line width and 85 % of the page height, never enlarge it. graphicx lets the size
# arguments of \resizebox refer to the box's natural \width and \totalheight.
FIT_MACRO = (
    r"\providecommand{\pdelrafit}[1]{\resizebox*{!}{\ifdim\totalheight>.85\textheight .85\textheight"
    r"\else\totalheight\fi}{\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{#1}}}"
)


def _wrapped_header(name: str, width: int, align: str) -> tuple[str, int]:
    """A header much longer than its cells on two or three lines (a nested tabular), and its width."""
    if len(name) <= max(width, HEADER_CHARS) or " " not in name.strip():
        return latex_escape(name), len(name)
    lines = textwrap.wrap(name, width=max(width, HEADER_CHARS), break_long_words=False)
    if len(lines) > 3:
        lines = textwrap.wrap(name, width=math.ceil(len(name) / 3), break_long_words=False)
    cell = rf"\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}" + r"\\".join(map(latex_escape, lines))
    return cell + r"\end{tabular}", max(map(len, lines))


def _words(cells: Iterable[str]) -> list[int]:
    """The lengths of the longest word of the cells (a line may break at a space or after an underscore)."""
    return [max(map(len, re.split(r"[\s_]", cell)), default=0) for cell in cells]


def _layout(
    header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]
) -> tuple[list[str], list[str], list[int], int]:
    """Column types, header cells, each row's height in lines and the table's width in characters."""
    cells = [max((len(r[i]) for r in rows), default=0) for i in range(len(header))]
    natural = [max(c, len(h)) for c, h in zip(cells, header, strict=True)]
    wrap = [False] * len(header)
    if sum(natural) + COLUMN_GAP * len(header) > LINE_CHARS:
        wrap = [
            not num and c > WRAP_CHARS and any(" " in r[i].strip() or "_" in r[i] for r in rows)
            for i, (c, num) in enumerate(zip(cells, numeric, strict=True))
        ]
    # A wrapping column is as narrow as two lines of its longest cell allow, up to WRAP_CHARS (a unit or an
    # identifier a little over it needs no room for 32 characters on every row), never below a word.
    wrap_chars = [
        min(WRAP_CHARS, max(HEADER_CHARS, math.ceil(cells[i] / 2), *_words(r[i] for r in rows)))
        for i in range(len(header))
    ]
    spec, heads, widths = [], [], []
    for i, name in enumerate(header):
        if wrap[i]:
            spec.append(rf">{{\raggedright\arraybackslash}}p{{{wrap_chars[i] / 2:g}em}}")
            heads.append(latex_escape(name))
            widths.append(wrap_chars[i])
            continue
        align = "r" if numeric[i] else "l"
        head, head_width = _wrapped_header(name, cells[i], align)
        spec.append(align)
        heads.append(head)
        widths.append(max(cells[i], head_width))
    heights = [
        max([math.ceil(len(r[i]) / wrap_chars[i]) for i in range(len(header)) if wrap[i]] or [1])
        for r in rows
    ]
    return spec, heads, heights, sum(widths) + COLUMN_GAP * len(header)


def _chunks(heights: Sequence[int], width: int, landscape: bool) -> list[range]:
    """Consecutive rows in as few groups of even height as fit a page each; a table shrunk to the line width
    has room for more lines."""
    line_chars, page_lines = (
        (LANDSCAPE_LINE_CHARS, LANDSCAPE_PAGE_LINES) if landscape else (LINE_CHARS, PAGE_LINES)
    )
    capacity = page_lines * max(1.0, width / line_chars)
    total = sum(heights)
    per_chunk = total / max(1, math.ceil(total / capacity))
    starts, before = [0], 0
    for i, h in enumerate(heights):
        # A row goes to the group its middle falls in.
        if i > starts[-1] and (before + h / 2) // per_chunk >= len(starts):
            starts.append(i)
        before += h
    return [range(a, b) for a, b in zip(starts, [*starts[1:], len(heights)], strict=True)]


def _tabular(spec: Sequence[str], heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The booktabs tabular, assembled by pandas' LaTeX writer (cells escaped here, headers already LaTeX)."""
    import pandas as pd

    # A wrapping column may also break an identifier (a claim id, a variant) after each underscore.
    wrapping = [s.startswith(">{") for s in spec]

    def cell(value: str, wraps: bool) -> str:
        text = latex_escape(value)
        return text.replace(r"\_", r"\_\allowbreak{}") if wraps else text

    cells = [[cell(v, w) for v, w in zip(row, wrapping, strict=True)] for row in rows]
    frame = pd.DataFrame(cells, columns=range(len(heads)))
    frame.columns = list(heads)
    styler = frame.style.hide(axis="index")
    return styler.to_latex(column_format="".join(spec), hrules=True).strip()


def table_tex(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: Sequence[bool],
    caption: str,
    label: str,
) -> str:
    """The table (cells as plain text; `numeric[i]` right-aligns column i) as an `\\input`-able LaTeX body:
    one booktabs `table` float per page-full of rows, caption and `\\label{tab:<label>}` on the first (the
    only entry in the list of tables; the others repeat its number and caption, "continued")."""
    if not header:
        raise ValueError(f"table {label!r} has no columns")
    spec, heads, heights, width = _layout(header, rows, numeric)
    landscape = width > LANDSCAPE_CHARS
    lines = [
        f"% pdelra table {label}: needs \\usepackage{{{','.join(PACKAGES)}}}",
        FIT_MACRO,
    ]
    for n, chunk in enumerate(_chunks(heights, width, landscape)):
        title = latex_escape(caption)
        if n == 0:
            head = [rf"\caption{{{title}}}", rf"\label{{tab:{label}}}"]
        else:  # the same number again, set by hand: a \caption (even \caption[]) adds a list-of-tables line
            head = [rf"Table~\thetable: {title} (continued)\par", r"\vspace{\abovecaptionskip}"]
        float_ = [
            r"\begin{table}[htbp]",
            r"\centering",
            *head,
            r"\pdelrafit{%",
            _tabular(spec, heads, [rows[i] for i in chunk]) + "}",
            r"\end{table}",
        ]
        # One landscape page per float: pdflscape turns only the pages it ships itself, not deferred floats.
        lines += [r"\begin{landscape}", *float_, r"\end{landscape}"] if landscape else float_
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------------
# All tables in one document, and its PDF
# ----------------------------------------------------------------------------------------------------
