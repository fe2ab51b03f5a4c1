"""SST-2 as GLUE releases it (`SST-2.zip`): SST-2/{train,dev,test}.tsv (+ SST-2/original/, not used).

train.tsv and dev.tsv have the header `sentence<TAB>label` (label 0 = negative, 1 = positive); test.tsv has
`index<TAB>sentence` and no labels. Sentences are lower-cased and PTB-tokenised ("it 's", "does n't"), no
quoting: Hugging Face's `glue/sst2` loader (what the official CTA code reads) parses them with
`csv.DictReader(delimiter="\\t", quoting=QUOTE_NONE)`, as the reader here does. 67,349 train / 872 dev / 1,821
test rows. The official code trains on train and evaluates on dev ("SST-2 uses validation as test").

The generator writes the same three files, the label carried by the balance of positive and negative words.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterator
from pathlib import Path

from pdelra.data.errors import DataError

FOLDER = "SST-2"
SPLIT_FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
LABELED_HEADER = ["sentence", "label"]
TEST_HEADER = ["index", "sentence"]
CLASSES = ("negative", "positive")

POSITIVE = ("charming", "affecting", "gorgeous", "funny", "warm", "smart", "wonderful", "engaging", "fresh")
NEGATIVE = ("dull", "tedious", "mess", "flat", "lifeless", "bland", "pointless", "clumsy", "tiresome")
NEUTRAL = ("the", "film", "movie", "it", "'s", "a", "and", "of", "story", "is", "n't", "this", "with",
           "characters", "director", "script", "performances", "an", "that", "as", ",")  # fmt: skip


def read_labeled(path: Path) -> Iterator[tuple[int, str, int]]:
    """(line, sentence, label) of train.tsv or dev.tsv."""
    if not path.is_file():
        raise DataError(path, f"not found: expected the GLUE layout {FOLDER}/{{train,dev}}.tsv")
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        if reader.fieldnames != LABELED_HEADER:
            raise DataError(path, f"header {reader.fieldnames} is not {LABELED_HEADER}", 1)
        for row in reader:
            if row["label"] not in ("0", "1") or None in row:
                raise DataError(
                    path, f"expected `sentence<TAB>label` with label 0/1, got {row}", reader.line_num
                )
            yield reader.line_num, row["sentence"], int(row["label"])


def make_sentence(rng: random.Random, label: int, signal: float) -> str:
    agree, disagree = (POSITIVE, NEGATIVE) if label == 1 else (NEGATIVE, POSITIVE)
    words = [rng.choice(agree if rng.random() < signal else disagree) if rng.random() < 0.3
             else rng.choice(NEUTRAL) for _ in range(rng.randint(3, 25))]  # fmt: skip
    return " ".join(words) + (" . " if rng.random() < 0.7 else " ")  # the release keeps a trailing space


def generate(out: Path, *, n_train: int, n_val: int, n_test: int, seed: int, signal: float) -> None:
    """Write out/SST-2/{train,dev,test}.tsv (dev = n_val rows; test unlabeled, as in GLUE)."""
    rng = random.Random(seed)
    folder = out / FOLDER
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("dev", n_val)):
        rows = [f"{make_sentence(rng, i % 2, signal)}\t{i % 2}\n" for i in range(n)]
        (folder / SPLIT_FILES[split]).write_text("\t".join(LABELED_HEADER) + "\n" + "".join(rows))
    rows = [f"{i}\t{make_sentence(rng, rng.randrange(2), signal)}\n" for i in range(n_test)]
    (folder / SPLIT_FILES["test"]).write_text("\t".join(TEST_HEADER) + "\n" + "".join(rows))
