"""`pdelra generate`: offline stand-ins for the sources, written in the real on-disk formats.

The five LRA tasks; the official CTA experiments' AG News, SST-2 and WikiText-103 (pdelra.data.agnews,
sst2, wikitext); and the two tokenizer files (`wordpiece` → vocab.txt, `bpe` → tokenizer.json).

Settings come from config as a flat mapping; every source takes n_train, n_val, n_test and seed (the
tokenizers: seed and n_texts), plus the keys in DEFAULTS. Where the real layout has no validation split
(aclImdb, AG News, CIFAR-10) or no split at all (Pathfinder), the generator writes n_train + n_val (+ n_test
for Pathfinder) items and preprocessing carves the splits with its fixed fractions (text 90/10, image 90/10,
pathfinder 80/10/10). SST-2's n_val rows are dev.tsv and its n_test rows the unlabeled test.tsv.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pdelra import tasks
from pdelra.atomic import atomic_dir
from pdelra.data import agnews, image, listops, retrieval, settings, snakes, sst2, text, tokenize, wikitext
from pdelra.data.errors import DataError
from pdelra.importing import import_callable

log = logging.getLogger("pdelra.data")

COMMON = settings.COMMON


def resolve_params(task: str, params: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with `params`; an unknown key or a wrongly typed value is an error naming it."""
    defaults = settings.generate_defaults()
    if task not in defaults:
        raise DataError(None, f"unknown task {task!r}; tasks are {sorted(defaults)}")
    allowed = defaults[task]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise DataError(
            None, f"unknown generation setting(s) {unknown} for {task}; allowed: {sorted(allowed)}"
        )
    resolved = dict(allowed)
    where = f"generation setting for {task} (--params, or data.generate.{task} in the config)"
    for key, value in params.items():
        kind = type(allowed[key])
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise DataError(None, f"{where}: {key}={value!r} must be a {kind.__name__}")
        resolved[key] = value
    for key in ("n_train", "n_val", "n_test", "n_texts"):
        if resolved.get(key, 0) < 0:
            raise DataError(None, f"{where}: {key} must be >= 0, got {resolved[key]}")
    if "min_length" in resolved and not 0 < resolved["min_length"] <= resolved["max_length"]:
        raise DataError(
            None,
            f"{where}: need 0 < min_length <= max_length, got min_length={resolved['min_length']}, "
            f"max_length={resolved['max_length']}",
        )
    if task == "listops":
        keys = ("min_length", "max_length", "max_depth", "max_args")
        problem = listops.bounds_problem(*(resolved[key] for key in keys))
        if problem:
            raise DataError(None, f"{where}: {problem}")
    return resolved


def generate(task: str, out: Path, params: dict[str, Any]) -> dict[str, Any]:
    """Write a generated raw source for `task` into `out` (replaced as a whole); returns the settings used."""
    p = resolve_params(task, params)
    with atomic_dir(out) as tmp:
        _writer(task)(tmp, p)
    log.info("generated %s into %s with %s", task, out, p)
    return p


def _writer(task: str) -> Callable[[Path, dict[str, Any]], None]:
    if task in tasks.TASKS:
        return import_callable(tasks.TASKS[task].generator, f"task {task}'s generator")
    return _WRITERS[task]


def generate_command(args: argparse.Namespace) -> int:
    """`pdelra generate TASK --out DIR --params JSON` (pdelra.data.cli)."""
    try:
        params = json.loads(args.params)
    except json.JSONDecodeError as err:
        raise DataError(None, f"--params is not valid JSON ({err})") from err
    if not isinstance(params, dict):
        raise DataError(None, "--params must be a JSON object of settings")
    generate(args.task, Path(args.out), params)
    return 0


def write_listops(out: Path, p: dict[str, Any]) -> None:
    n = {"train": p["n_train"], "val": p["n_val"], "test": p["n_test"]}
    rows = listops.generate_rows(
        sum(n.values()),
        seed=p["seed"],
        min_length=p["min_length"],
        max_length=p["max_length"],
        max_depth=p["max_depth"],
        max_args=p["max_args"],
    )
    start = 0
    for split, count in n.items():  # LRA's order: train, then val, then test from one deduplicated pool
        listops.write_tsv(out / listops.SPLIT_FILES[split], rows[start : start + count])
        start += count


def write_text(out: Path, p: dict[str, Any]) -> None:
    text.generate(
        out,
        n_train=p["n_train"] + p["n_val"],
        n_test=p["n_test"],
        seed=p["seed"],
        min_length=p["min_length"],
        max_length=p["max_length"],
        signal=p["signal"],
    )


def write_retrieval(out: Path, p: dict[str, Any]) -> None:
    retrieval.generate(
        out,
        n_train=p["n_train"],
        n_val=p["n_val"],
        n_test=p["n_test"],
        seed=p["seed"],
        min_length=p["min_length"],
        max_length=p["max_length"],
        n_topics=p["n_topics"],
        signal=p["signal"],
    )


def write_pathfinder(out: Path, p: dict[str, Any]) -> None:
    params = snakes.SnakeParams(
        contour_length=p["contour_length"], distractors=p["distractors"], marker_radius=p["marker_radius"]
    )
    snakes.generate(
        out,
        n=p["n_train"] + p["n_val"] + p["n_test"],
        seed=p["seed"],
        per_folder=p["per_folder"],
        params=params,
    )


def write_image(out: Path, p: dict[str, Any]) -> None:
    image.generate(
        out, n_train=p["n_train"] + p["n_val"], n_test=p["n_test"], seed=p["seed"], noise=p["noise"]
    )


def _agnews(out: Path, p: dict[str, Any]) -> None:
    agnews.generate(
        out, n_train=p["n_train"] + p["n_val"], n_test=p["n_test"], seed=p["seed"], signal=p["signal"]
    )


def _sst2(out: Path, p: dict[str, Any]) -> None:
    sst2.generate(out, n_train=p["n_train"], n_val=p["n_val"], n_test=p["n_test"], seed=p["seed"],
                  signal=p["signal"])  # fmt: skip


def _wikitext103(out: Path, p: dict[str, Any]) -> None:
    wikitext.generate(out, n_train=p["n_train"], n_val=p["n_val"], n_test=p["n_test"], seed=p["seed"],
                      noise=p["noise"])  # fmt: skip


def _classification_texts(n: int, seed: int) -> list[str]:
    """Texts as the AG News, SST-2 and IMDb generators write them (the WordPiece stand-in's corpus)."""
    rng = random.Random(seed)
    rows = [" ".join(agnews.make_row(rng, i % len(agnews.CLASSES), 0.5)[1:]) for i in range(n)]
    rows += [sst2.make_sentence(rng, i % 2, 0.5) for i in range(n)]
    return rows + [text.make_review(rng, i % 2, 50, 300, 0.5) for i in range(n)]


def _wordpiece(out: Path, p: dict[str, Any]) -> None:
    texts = _classification_texts(p["n_texts"], p["seed"])
    tokenize.build_wordpiece_vocab(texts, out, p["split_longer_than"])


def _bpe(out: Path, p: dict[str, Any]) -> None:
    rng = random.Random(p["seed"])
    lines = [line for _ in range(p["n_texts"]) for line in wikitext.make_article(rng, 0.05)]
    tokenize.train_bpe(lines, out, p["vocab_size"])


# The other sources' writers; the tasks' are their registry records' `generator` (pdelra.tasks).
_WRITERS = {
    "agnews": _agnews,
    "sst2": _sst2,
    "wikitext103": _wikitext103,
    "wordpiece": _wordpiece,
    "bpe": _bpe,
}
