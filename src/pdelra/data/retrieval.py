"""AAN document-pair retrieval as released in LRA: tsv_data/new_aan_pairs.{train,eval,test}.tsv.

Each line is `label<TAB>id1<TAB>id2<TAB>text1<TAB>text2`, no header, no quoting (LRA reads it with
QUOTE_NONE); the label is written as a float ("1.0") or an int. The files are ~10 GB, so they are read as a
byte stream, line by line, never decoded or loaded whole.

The generator writes pairs of documents drawn from topics; a pair is related (label 1) when both documents
come from the same topic, so the label is learnable from the content the two share. Each topic spells its
words from its own few letters, so a document's topic shows in its byte histogram, the first thing a
byte-level encoder can see; `signal` is the share of topic words among a document's words.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from pdelra.data.errors import DataError

SPLIT_FILES = {
    "train": "new_aan_pairs.train.tsv",
    "val": "new_aan_pairs.eval.tsv",
    "test": "new_aan_pairs.test.tsv",
}
NUM_CLASSES = 2
LABELS = {b"0": 0, b"1": 1, b"0.0": 0, b"1.0": 1}


def count_rows(path: Path) -> int:
    """Number of lines, counted in 1 MiB blocks (fast: sizes the output arrays before the real pass)."""
    count = 0
    last = b"\n"
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def read_pairs(path: Path) -> Iterator[tuple[int, int, bytes, bytes]]:
    """Yield (line_number, label, text1, text2) from an AAN TSV as raw bytes."""
    with open(path, "rb") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.rstrip(b"\r\n").split(b"\t")
            if len(fields) != 5:
                raise DataError(path, f"expected 5 tab-separated fields (label id1 id2 text1 text2), "
                                      f"got {len(fields)}", line_number)  # fmt: skip
            label = LABELS.get(fields[0].strip())
            if label is None:
                raise DataError(path, f"label {fields[0][:20]!r} is not 0 or 1", line_number)
            yield line_number, label, fields[3], fields[4]


WORDS_PER_TOPIC = 40
LETTERS_PER_TOPIC = 8
COMMON = ("we", "the", "model", "results", "paper", "show", "of", "and", "a", "in", "for", "on", "task",
          "method", "data", "using", "approach", "propose", "this", "is", "our", "with")  # fmt: skip


def _topic_words(rng: random.Random, n_topics: int) -> list[list[str]]:
    """Each topic's words, spelled from LETTERS_PER_TOPIC letters of its own (random subsets: with many
    topics they overlap, as real fields share vocabulary)."""
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    topics = []
    for _ in range(n_topics):
        letters = rng.sample(alphabet, LETTERS_PER_TOPIC)
        topics.append(["".join(rng.choices(letters, k=rng.randint(4, 9))) for _ in range(WORDS_PER_TOPIC)])
    return topics


def _document(rng: random.Random, words: list[str], min_length: int, max_length: int, signal: float) -> str:
    target = rng.randint(min_length, max_length)
    out: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(words) if rng.random() < signal else rng.choice(COMMON)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:max_length]


def generate(out: Path, *, n_train: int, n_val: int, n_test: int, seed: int, min_length: int,
             max_length: int, n_topics: int, signal: float) -> None:  # fmt: skip
    """Write the three AAN-like TSVs into `out`, half of the pairs related."""
    if n_topics < 2:
        raise DataError(None, f"retrieval needs n_topics >= 2 (an unrelated pair takes two), got {n_topics}")
    rng = random.Random(seed)
    topics = _topic_words(rng, n_topics)
    out.mkdir(parents=True, exist_ok=True)
    doc_id = 0
    for split, n in (("train", n_train), ("val", n_val), ("test", n_test)):
        with open(out / SPLIT_FILES[split], "w", newline="") as handle:
            for i in range(n):
                label = i % 2
                first = rng.randrange(n_topics)
                second = first if label else rng.choice([t for t in range(n_topics) if t != first])
                text1 = _document(rng, topics[first], min_length, max_length, signal)
                text2 = _document(rng, topics[second], min_length, max_length, signal)
                handle.write(f"{float(label)}\tA{doc_id:06d}\tA{doc_id + 1:06d}\t{text1}\t{text2}\n")
                doc_id += 2
