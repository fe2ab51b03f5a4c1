"""The data banner at the top of report.html and index.html: what each task ran on, before any verdict.

Display only: it formats `tables/data.csv` (`pdelra data-summary`). When any task differs from the paper's
setting (generated data, another length, another model size than Table 8) the banner's first line says, in
words, that the verdicts say nothing about the paper. A generator's settings (the `origin` column's JSON)
are shown as words, and where the split sizes trained on differ from the generator's n_train / n_val /
n_test a note under the table says why: the real layout of Text, Image and Pathfinder has no validation
split, so the generator writes n_train + n_val items and preprocessing carves the splits with the fixed
fractions it uses on the real data (`pdelra.data.preprocess`).
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import TYPE_CHECKING, Any

from pdelra import paper
from pdelra.data.preprocess import CIFAR_TRAIN_FRACTION, PATHFINDER_FRACTIONS, TEXT_VAL_FRACTION
from pdelra.reporting.io import MISSING

if TYPE_CHECKING:
    import pandas as pd

TOY_HEADLINE = "Not the paper's setting: verdicts on this data say nothing about the paper."
PAPER_HEADLINE = "The paper's setting: real data, the paper's lengths and Table 8's model on every task."
MISSING_HEADLINE = "The data this report ran on is not described (no tables/data.csv)."
SPLIT_NOTE_HEAD = "**Split sizes other than the config's:**"


def headline(data: pd.DataFrame) -> str:
    if data is None or data.empty:
        return MISSING_HEADLINE
    return PAPER_HEADLINE if bool(data["paper_setting"].astype(bool).all()) else TOY_HEADLINE


GENERATED = re.compile(r"pdelra generate (?P<task>\S+) (?P<settings>\{.*\})")
# Per task whose real layout lacks a validation split (or any split): what the layout lacks, what its
# generator writes (from n_train, n_val, n_test) and how preprocessing splits it, as for the real data.
CARVED = {
    "text": (
        "aclImdb has no validation split",
        lambda tr, va, te: f"n_train + n_val = {tr + va:,} train reviews and {te:,} test",
        f"carves {TEXT_VAL_FRACTION:.0%} of train as validation",
    ),
    "image": (
        "CIFAR-10 has no validation split",
        lambda tr, va, te: f"n_train + n_val = {tr + va:,} train images and {te:,} test",
        f"keeps {CIFAR_TRAIN_FRACTION:.0%} of train for training and the rest for validation",
    ),
    "pathfinder": (
        "Pathfinder has no splits",
        lambda tr, va, te: f"all {tr + va + te:,} images in one set",
        "splits them " + "/".join(f"{f:.0%}".removesuffix("%") for f in PATHFINDER_FRACTIONS) + " % into "
        "train/val/test",
    ),
}


def generator_settings(origin: Any) -> tuple[str, dict[str, Any]] | None:
    """(task, settings) of a generated task's origin "pdelra generate TASK {json}"; None for real data."""
    match = GENERATED.fullmatch(str(origin).strip())
    if match is None:
        return None
    try:
        settings = json.loads(match["settings"])
    except json.JSONDecodeError:
        return None
    return (match["task"], settings) if isinstance(settings, dict) else None


def origin_text(origin: Any) -> str:
    """The origin as a reader reads it: a generator's settings as words ("pdelra generate text: 400 train,
    100 val, 100 test; length 64–128; seed 0"), real data's URL and md5 as they are."""
    parsed = generator_settings(origin)
    if parsed is None:
        return "" if origin is None or str(origin) == "nan" else str(origin)
    task, settings = parsed
    settings = dict(settings)
    parts = []
    sizes = [f"{settings.pop(f'n_{s}')} {s}" for s in ("train", "val", "test") if f"n_{s}" in settings]
    if sizes:
        parts.append(", ".join(sizes))
    if "min_length" in settings and "max_length" in settings:
        parts.append(f"length {settings.pop('min_length')}–{settings.pop('max_length')}")
    parts += [f"{key.replace('_', ' ')} {value}" for key, value in sorted(settings.items())]
    return f"pdelra generate {task}: " + "; ".join(parts)


def split_notes(data: pd.DataFrame) -> list[str]:
    """Why a generated task's split sizes differ from its generator's n_train / n_val / n_test (one line a
    task; none where they agree or the data is real)."""
    notes = []
    for _, r in _ordered(data).iterrows():
        parsed = generator_settings(r.get("origin"))
        if parsed is None:
            continue
        settings = parsed[1]
        asked = [settings.get(f"n_{s}") for s in ("train", "val", "test")]
        got = [r.get(f"n_{s}") for s in ("train", "val", "test")]
        if any(x is None or x != x for x in (*asked, *got)):  # x != x: NaN, a manifest without counts
            continue
        if [int(a) for a in asked] == [int(g) for g in got]:
            continue
        task, label = str(r["task"]), paper.TASK_LABELS.get(str(r["task"]), str(r["task"]))
        shown = " / ".join(f"{int(g):,}" for g in got)
        note = f"{label}: {shown}, not the config's {' / '.join(f'{int(a):,}' for a in asked)}."
        if task in CARVED:
            lacks, writes, splits = CARVED[task]
            note += (
                f" {lacks}, so the generator writes its real layout, {writes(*map(int, asked))}, and "
                f"preprocessing {splits}, as it does for the real data."
            )
        notes.append(note)
    return notes


def _ordered(data: pd.DataFrame) -> pd.DataFrame:
    order = {t: i for i, t in enumerate(paper.TASKS)}
    return data.assign(_o=data["task"].map(order).fillna(len(order))).sort_values("_o").drop(columns="_o")


def _paper(value: Any) -> str:
    """A paper value as the banner prints it: a whole number, or MISSING where the paper has none (a task of
    your own: its cell is empty in data.csv, which pandas reads as NaN, printed "nan" before)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def rows(data: pd.DataFrame) -> list[dict[str, str]]:
    """One display row per task, in the paper's task order."""
    out = []
    for _, r in _ordered(data).iterrows():
        out.append(
            {
                "Task": paper.TASK_LABELS.get(r["task"], r["task"]),
                "Data": str(r["data"]),
                "Origin": origin_text(r["origin"]),
                "Train / val / test": f"{r['n_train']:,} / {r['n_val']:,} / {r['n_test']:,}",
                "Length (paper)": f"{r['max_length']} ({_paper(r['paper_max_length'])})",
                "d_model, layers, heads, batch (paper's Table 8)": (
                    f"{r['d_model']}, {r['n_layers']}, {r['n_heads']}, {r['batch_size']} ("
                    + ", ".join(
                        _paper(r[f"paper_{k}"]) for k in ("d_model", "n_layers", "n_heads", "batch_size")
                    )
                    + ")"
                ),
                "Differs from the paper": str(r["differences"]) if isinstance(r["differences"], str) else "",
            }
        )
    return out


def banner_markdown(data: pd.DataFrame) -> str:
    """The banner as Markdown (the notebook's first output)."""
    if data is None or data.empty:
        return f"**{MISSING_HEADLINE}**"
    table = rows(data)
    header = list(table[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r[h].replace("|", "\\|") for h in header) + " |" for r in table]
    notes = split_notes(data)
    if notes:
        lines += ["", SPLIT_NOTE_HEAD, "", *(f"- {note}" for note in notes)]
    return f"**{headline(data)}**\n\n" + "\n".join(lines)


def banner_html(data: pd.DataFrame) -> str:
    """The banner as an HTML block (index.html)."""
    kind = "toy" if headline(data) != PAPER_HEADLINE else "paper"
    if data is None or data.empty:
        return f'<div class="banner {kind}"><strong>{html.escape(MISSING_HEADLINE)}</strong></div>'
    table = rows(data)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r.values()) + "</tr>" for r in table
    )
    notes = "".join(f"<li>{html.escape(note)}</li>" for note in split_notes(data))
    said = f"<p>{html.escape(SPLIT_NOTE_HEAD.strip('*'))}</p><ul>{notes}</ul>" if notes else ""
    return (
        f'<div class="banner {kind}"><p><strong>{html.escape(headline(data))}</strong></p>'
        f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{said}</div>'
    )
