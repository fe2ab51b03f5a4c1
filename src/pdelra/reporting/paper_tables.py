"""The paper-tables document: every table the report saved in one LaTeX file, compiled where pdflatex is.

- `write_paper_tables(out_dir)` → `out_dir/tables/paper-tables.tex`, a complete document that `\\input`s every
  table recorded in `out_dir/artifacts.json` (each a `pdelra.reporting.latex.table_tex` file);
- `build_pdf(tex_path)` compiles it with pdflatex when installed, naming the table of LaTeX's first error.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

from pdelra.atomic import atomic_path, write_text_atomic
from pdelra.errors import UserError
from pdelra.reporting.io import MANIFEST, read_artifacts
from pdelra.reporting.latex import PACKAGES, PAPER_TABLES

OVERFULL_PT = 1.0  # overfull boxes up to this are invisible; larger ones mean text runs past the margin


class LatexError(UserError):
    """pdflatex failed on a document; the message names the .tex file and LaTeX's first error."""


_MARKER = "pdelra table: "


def write_paper_tables(out_dir: str | Path) -> Path:
    """Write `out_dir/tables/paper-tables.tex`: a document (booktabs, graphicx, pdflscape) with a list of
    tables and then every table recorded in `out_dir/artifacts.json`, in the order saved, one per page."""
    out_dir = Path(out_dir)
    folder = out_dir / "tables"
    target = folder / PAPER_TABLES
    inputs = []
    for entry in read_artifacts(out_dir):
        for name in entry["files"]:
            if entry["kind"] != "table" or not name.endswith(".tex"):
                continue
            path = out_dir / name
            if not path.is_file():
                raise UserError(f"{out_dir / MANIFEST}: table {entry['name']!r} lists missing {name}")
            rel = os.path.relpath(path, folder)
            inputs += [rf"\typeout{{{_MARKER}{rel}}}", rf"\input{{{rel}}}", r"\clearpage"]
    lines = [
        r"\documentclass[10pt]{article}",
        r"\usepackage[a4paper,margin=2cm]{geometry}",
        rf"\usepackage{{{','.join(PACKAGES)}}}",
        r"\begin{document}",
        r"\listoftables",
        r"\clearpage",
        *(inputs or [r"No tables were saved."]),
        r"\end{document}",
    ]
    write_text_atomic(target, "\n".join(lines) + "\n")
    return target


def _first_error(log: str) -> str:
    """LaTeX's first error: "file:line: message" (-file-line-error) or a "! message" line."""
    for line in log.splitlines():
        if re.match(r"^\S.*:\d+: ", line) or line.startswith("! "):
            return line.strip()
    tail = [line for line in log.splitlines() if line.strip()]
    return tail[-1].strip() if tail else "no log written"


def _overfull(log: str, default: str) -> list[str]:
    """Boxes wider than the line by more than OVERFULL_PT, each named by the table being read."""
    found, where = [], default
    for line in log.splitlines():
        if line.startswith(_MARKER):
            where = line[len(_MARKER) :].strip()
        match = re.match(r"Overfull \\hbox \(([\d.]+)pt too wide\)", line)
        if match and float(match.group(1)) > OVERFULL_PT:
            found.append(f"{where}: a line is {float(match.group(1)):.0f} pt wider than the page")
    return found


def _aux_state(folder: Path, stem: str) -> str:
    """A fingerprint of the files a second run reads (cross-references, list of tables)."""
    digest = hashlib.sha256()
    aux = folder / f"{stem}.aux"
    if aux.is_file():  # the labels only: the rest (page count) needs no second run
        labels = [ln for ln in aux.read_text(errors="replace").splitlines() if ln.startswith(r"\newlabel")]
        digest.update("\n".join(labels).encode())
    for ext in ("toc", "lot", "lof"):
        f = folder / f"{stem}.{ext}"
        digest.update(f.read_bytes() if f.is_file() else b"-")
    return digest.hexdigest()


def build_pdf(tex_path: str | Path, *, timeout: float = 120.0) -> Path | None:
    """Compile `tex_path` with pdflatex (nonstop, in a temporary folder, again while its cross-references
    or list of tables change) into `tex_path` with suffix .pdf; files it `\\input`s are found next to it.

    Returns None when pdflatex is not installed. Raises LatexError naming the file and LaTeX's first error
    when it fails or runs past `timeout` seconds; warns for every table that runs off the page."""
    exe = shutil.which("pdflatex")
    if exe is None:
        return None
    tex_path = Path(tex_path).resolve()
    env = {
        **os.environ,
        "TEXINPUTS": f"{tex_path.parent}{os.pathsep}",  # the trailing separator keeps TeX's own folders
        "max_print_line": "100000",  # one log line per message: no file name broken over two lines
        "error_line": "254",
        "half_error_line": "238",
    }
    cmd = [exe, "-interaction=nonstopmode", "-halt-on-error", "-file-line-error", "-no-shell-escape"]
    with tempfile.TemporaryDirectory(prefix="pdelra-latex-") as tmp:
        work = Path(tmp)
        state = _aux_state(work, tex_path.stem)
        for _ in range(3):
            try:
                done = subprocess.run(
                    [*cmd, str(tex_path)], cwd=work, env=env, capture_output=True, timeout=timeout
                )
            except subprocess.TimeoutExpired as exc:
                raise LatexError(f"{tex_path}: pdflatex did not finish within {timeout:g} s") from exc
            log_file = work / f"{tex_path.stem}.log"
            log = log_file.read_text(encoding="utf-8", errors="replace") if log_file.is_file() else ""
            if done.returncode != 0:
                raise LatexError(f"{tex_path}: pdflatex failed: {_first_error(log)}")
            before, state = state, _aux_state(work, tex_path.stem)
            if state == before and "Rerun to get" not in log:
                break
        for problem in _overfull(log, tex_path.name):
            warnings.warn(f"{tex_path}: {problem}", stacklevel=2)
        target = tex_path.with_suffix(".pdf")
        with atomic_path(target) as out:
            shutil.copyfile(work / f"{tex_path.stem}.pdf", out)
    return target
