"""AG News as Xiang Zhang released it (`ag_news_csv.tgz`): ag_news_csv/{train,test}.csv, classes.txt,
readme.txt.

The CSVs have no header; every field is quoted (`"3","title","description"`, a quote inside a field doubled)
and the class index is 1-4 in the order of classes.txt. The official CTA code reads them through Hugging
Face's `ag_news` loader, which parses them with `csv.reader(quotechar='"', quoting=QUOTE_ALL,
skipinitialspace=True)`, joins title and description with one space and maps the class to 0-3; the reader
here does the same. 120,000 train / 7,600 test rows; the release has no validation split.

The generator writes files of the same layout whose class is carried by topic words in title and
description, so a classifier can learn it.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterator
from pathlib import Path

from pdelra.data.errors import DataError

FOLDER = "ag_news_csv"
SPLIT_FILES = {"train": "train.csv", "test": "test.csv"}
CLASSES = ("World", "Sports", "Business", "Sci/Tech")  # classes.txt, label 0-3 = class index 1-4

TOPIC_WORDS = (
    ("minister", "election", "troops", "embassy", "treaty", "rebels", "parliament", "refugees", "summit"),
    ("coach", "season", "playoff", "striker", "tournament", "championship", "goal", "medal", "innings"),
    ("shares", "profit", "merger", "investors", "quarter", "earnings", "stocks", "retailer", "dividend"),
    (
        "software",
        "internet",
        "processor",
        "researchers",
        "wireless",
        "satellite",
        "browser",
        "genome",
        "chip",
    ),
)
COMMON_WORDS = ("the", "a", "of", "in", "on", "said", "new", "after", "for", "with", "its", "to", "and",
                "has", "will", "says", "over", "report", "week", "first")  # fmt: skip
SOURCES = ("Reuters", "AP", "AFP", "Canadian Press")


def read_rows(path: Path) -> Iterator[tuple[int, str, int]]:
    """(line, text, label 0-3) of one release CSV: text = title + " " + description, as HF's loader."""
    if not path.is_file():
        raise DataError(path, f"not found: expected the ag_news_csv layout {', '.join(SPLIT_FILES.values())}")
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(
            handle, quotechar='"', delimiter=",", quoting=csv.QUOTE_ALL, skipinitialspace=True
        )
        try:
            for row in reader:
                if len(row) != 3:
                    raise DataError(path, f"expected 3 fields (class, title, description), got {len(row)}",
                                    reader.line_num)  # fmt: skip
                klass, title, description = row
                if klass not in ("1", "2", "3", "4"):
                    raise DataError(path, f"class {klass!r} is not 1-4", reader.line_num)
                yield reader.line_num, f"{title} {description}", int(klass) - 1
        except csv.Error as err:
            raise DataError(path, f"not a readable CSV ({err})", reader.line_num) from err


def _words(rng: random.Random, label: int, n: int, signal: float) -> list[str]:
    words = []
    for _ in range(n):
        if rng.random() < 0.4:
            topic = label if rng.random() < signal else rng.randrange(len(CLASSES))
            words.append(rng.choice(TOPIC_WORDS[topic]))
        else:
            words.append(rng.choice(COMMON_WORDS))
    return words


def make_row(rng: random.Random, label: int, signal: float) -> tuple[str, str, str]:
    """(class 1-4, title, description) with the release's quirks: a quoted phrase, commas, a source tag."""
    title = " ".join(_words(rng, label, rng.randint(4, 8), signal)).title()
    if rng.random() < 0.5:
        title += f" ({rng.choice(SOURCES)})"
    body = _words(rng, label, rng.randint(12, 30), signal)
    body[rng.randrange(len(body))] += ","
    quoted = rng.randrange(len(body) - 1)
    body[quoted] = '"' + body[quoted]
    body[quoted + 1] += '"'
    return str(label + 1), title, f"{rng.choice(SOURCES)} - " + " ".join(body) + "."


def generate(out: Path, *, n_train: int, n_test: int, seed: int, signal: float) -> None:
    """Write out/ag_news_csv/{train,test}.csv (balanced classes), classes.txt and readme.txt."""
    rng = random.Random(seed)
    folder = out / FOLDER
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("test", n_test)):
        with open(folder / SPLIT_FILES[split], "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n")
            writer.writerows(make_row(rng, i % len(CLASSES), signal) for i in range(n))
    (folder / "classes.txt").write_text("".join(f"{name}\n" for name in CLASSES))
    (folder / "readme.txt").write_text("AG's News Topic Classification Dataset (generated stand-in)\n")
