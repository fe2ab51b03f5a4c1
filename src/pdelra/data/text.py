"""IMDb reviews in the Stanford `aclImdb_v1` layout: aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt.

The generator writes reviews of the same layout whose sentiment is carried by the balance of positive and
negative words in them, so that a byte-level model can learn it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

from pdelra.data.errors import DataError

RELEASE_SPLITS = ("train", "test")  # aclImdb has no validation split; preprocessing carves one from train
CLASSES = ("neg", "pos")  # label 0 = neg, 1 = pos (tfds imdb_reviews uses the same order)
FILE_NAME = re.compile(r"^(\d+)_(\d+)\.txt$")

POSITIVE = ("great", "wonderful", "brilliant", "moving", "superb", "delightful", "charming", "masterful",
            "touching", "gripping", "beautiful", "hilarious", "excellent", "fine", "memorable")  # fmt: skip
NEGATIVE = ("awful", "boring", "dull", "terrible", "clumsy", "tedious", "weak", "poor", "bland", "lazy",
            "forgettable", "painful", "messy", "hollow", "annoying")  # fmt: skip
NEUTRAL = ("the", "film", "movie", "story", "actor", "plot", "scene", "director", "and", "was", "a", "with",
           "of", "it", "this", "cast", "music", "ending", "character", "script", "camera", "in", "to",
           "score", "dialogue", "pace", "is", "about", "some", "very", "quite", "rather")  # fmt: skip


def review_files(root: Path, split: str) -> list[tuple[Path, int]]:
    """(path, label) of every review of `split` under an `aclImdb` folder, in a fixed (sorted) order."""
    files = []
    for label, name in enumerate(CLASSES):
        folder = root / split / name
        if not folder.is_dir():
            raise DataError(folder, "not found: expected the aclImdb layout {train,test}/{pos,neg}/*.txt")
        for path in sorted(folder.glob("*.txt")):
            if not FILE_NAME.match(path.name):
                raise DataError(path, "file name is not <id>_<rating>.txt as in aclImdb")
            files.append((path, label))
    return files


def read_reviews(root: Path, split: str) -> Iterator[tuple[Path, bytes, int]]:
    for path, label in review_files(root, split):
        yield path, path.read_bytes(), label


def make_review(rng: random.Random, label: int, min_length: int, max_length: int, signal: float) -> str:
    """A review of min_length-max_length characters; each sentiment word agrees with `label` w.p. `signal`."""
    target = rng.randint(min_length, max_length)
    agree, disagree = (POSITIVE, NEGATIVE) if label == 1 else (NEGATIVE, POSITIVE)
    words: list[str] = []
    size = 0
    while size < target:
        if rng.random() < 0.2:
            word = rng.choice(agree if rng.random() < signal else disagree)
        else:
            word = rng.choice(NEUTRAL)
        words.append(word)
        size += len(word) + 1
    text = " ".join(words).capitalize()
    return text[: max(min_length, min(len(text), max_length))] + "."


def generate(out: Path, *, n_train: int, n_test: int, seed: int, min_length: int, max_length: int,
             signal: float) -> None:  # fmt: skip
    """Write n_train + n_test balanced reviews as out/aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt."""
    rng = random.Random(seed)
    for split, n in (("train", n_train), ("test", n_test)):
        for name in CLASSES:
            (out / "aclImdb" / split / name).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            label = i % 2
            rating = rng.randint(7, 10) if label == 1 else rng.randint(1, 4)  # aclImdb: pos >= 7, neg <= 4
            text = make_review(rng, label, min_length, max_length, signal)
            (out / "aclImdb" / split / CLASSES[label] / f"{i // 2}_{rating}.txt").write_text(text)
