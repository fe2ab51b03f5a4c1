"""WikiText-103 (word-level, `wikitext-103-v1.zip`): wikitext-103/wiki.{train,valid,test}.tokens.

The official CTA code loads Hugging Face's `wikitext-103-v1` config (the tokenised files, not the `-raw`
ones), whose rows are the files' lines as they are: " = Title = \\n" headings (" = = Section = = \\n" below
them), paragraph lines that start with a space and end with " \\n", and blank lines " \\n" between them.
Rare words are `<unk>`, and numbers are split with `@,@` `@.@` `@-@`. 1,801,350 / 3,760 / 4,358 lines.

The generator writes articles in the same format; each topic's words follow each other in a fixed cycle
with some noise, so a causal language model has something to learn.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from pdelra.data.errors import DataError

FOLDER = "wikitext-103"
SPLIT_FILES = {"train": "wiki.train.tokens", "val": "wiki.valid.tokens", "test": "wiki.test.tokens"}

TOPICS = (
    ("the", "river", "flows", "through", "the", "valley", "near", "the", "old", "mill", "and", "town"),
    ("the", "album", "was", "released", "in", "1998", "by", "the", "band", "on", "a", "label"),
    ("the", "ship", "was", "launched", "in", "the", "harbour", "and", "served", "in", "the", "navy"),
    ("the", "species", "is", "found", "in", "forests", "of", "the", "northern", "region", "in", "spring"),
)
NAMES = ("Valkyria", "Tower", "Castle", "Hurricane", "Kingdom", "Battle", "Station", "Island")
EXTRAS = ("<unk>", "@-@", "@,@", "@.@", ",", "(", ")", ";", '"')


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every non-blank line of a .tokens file, the text kept as released (with "\\n"): the
    rows HF's wikitext loader yields, less the blank ones the official code filters out."""
    if not path.is_file():
        raise DataError(path, f"not found: expected the {FOLDER} layout {', '.join(SPLIT_FILES.values())}")
    with open(path, encoding="utf-8") as handle:
        try:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, line
        except UnicodeDecodeError as err:
            raise DataError(path, f"not UTF-8 text ({err.reason})") from err


def _sentence(rng: random.Random, noise: float) -> str:
    words = TOPICS[rng.randrange(len(TOPICS))]
    start, length = rng.randrange(len(words)), rng.randint(6, 20)
    out = [
        rng.choice(EXTRAS) if rng.random() < noise else words[(start + i) % len(words)] for i in range(length)
    ]
    return " ".join(out) + " ."


def make_article(rng: random.Random, noise: float) -> list[str]:
    """The lines of one article: title, then two sections of paragraphs, blank lines between, as released."""
    title = f"{rng.choice(NAMES)} {rng.choice(NAMES)} {rng.randint(1, 9)}"
    lines = [" \n", f" = {title} = \n", " \n"]
    for section in range(2):
        if section:
            lines += [f" = = {rng.choice(NAMES)} = = \n", " \n"]
        for _ in range(rng.randint(1, 3)):
            lines += [" " + " ".join(_sentence(rng, noise) for _ in range(rng.randint(2, 5))) + " \n", " \n"]
    return lines


def generate(out: Path, *, n_train: int, n_val: int, n_test: int, seed: int, noise: float) -> None:
    """Write out/wikitext-103/wiki.{train,valid,test}.tokens with n_* articles each."""
    rng = random.Random(seed)
    folder = out / FOLDER
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("val", n_val), ("test", n_test)):
        lines = [line for _ in range(n) for line in make_article(rng, noise)]
        (folder / SPLIT_FILES[split]).write_text("".join(lines), encoding="utf-8")
