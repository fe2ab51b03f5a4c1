"""`pdelra preprocess-cta` and `pdelra subset`: the official CTA experiments' data, as its code prepares it,
into the processed-array store (`pdelra.data.store`).

Classification (Table 1; WordPiece, BERT uncased): `agnews` (max length 256), `sst2` (128), `imdb` (256, the
aclImdb raw folder of the `text` task). Each row is "[CLS] text [SEP]" cut to the max length, padded with
[PAD]. `imdb_char` (Table 2, LRA-style, 2048): the same reviews as character ids over a vocabulary of the
training texts' characters (no tokenizer file), as the official `char_level.py`.

The official code trains on the release's train split and reports the best accuracy over epochs on its
evaluation split (AG News and IMDb: test; SST-2: dev, GLUE's test having no labels). By default the store
follows it: `val` and `test` are both that evaluation split (the manifest says so under `val_split`). With
`val_fraction` a seeded fraction of train becomes `val` instead, keeping test unseen (a deviation from the
authors, named in the manifest).

Language modelling (`wikitext103`, Tables 3-5; the TinyLlama tokenizer): the non-blank lines of
wiki.{train,valid,test}.tokens, each encoded without special tokens and followed by `</s>`; as the official
code's `datasets.map(batched=True)` does, every batch of 1,000 lines is concatenated and cut into blocks of
`block_size` tokens, the batch's remainder dropped. Rows are those blocks (lengths all block_size; the model
predicts tokens 1..L-1 of a block from the ones before), labels the file line the block starts in.

`subset` (the data-size ablation, run_ablation_datasize.py: fractions 0.001, 0.01, 0.05, 0.1 of the training
rows): a seeded random `int(N * fraction)` of train rows, val and test copied unchanged. The rows are
`subset_rows(N, fraction, seed)`, which the WikiText-103 trainer (pdelra.cta_official.lm,
`train.data_fraction`) applies in memory with each run's seed; the workflow uses that, no copy per fraction.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pdelra import tasks
from pdelra.data import agnews, settings, sst2, store, text, tokenize, wikitext
from pdelra.data.errors import DataError
from pdelra.data.hashing import inputs_hash

log = logging.getLogger("pdelra.data")

CLASSIFICATION_TASKS = settings.CTA_CLASSIFICATION_TASKS
LM_TASKS = settings.CTA_LM_TASKS
TASKS = settings.CTA_TASKS
DEFAULT_MAX_LENGTH = settings.CTA_DEFAULT_MAX_LENGTH
CHAR_MIN_FREQ = 1  # configs/char_level_imdb.yaml
HF_MAP_BATCH = 1000  # `datasets.Dataset.map(batched=True)`'s default batch size: the LM grouping unit
ABLATION_FRACTIONS = settings.ABLATION_FRACTIONS  # the official data-size ablation's fractions

Rows = tuple[list[str], list[int], list[Path]]  # texts, labels, the files they came from


def _agnews(raw: Path) -> tuple[dict[str, Rows], list[str], str]:
    splits = {}
    for split, name in agnews.SPLIT_FILES.items():
        path = raw / agnews.FOLDER / name
        rows = list(agnews.read_rows(path))
        splits[split] = ([text for _, text, _ in rows], [label for _, _, label in rows], [path])
    return splits, list(agnews.CLASSES), "test"


def _sst2(raw: Path) -> tuple[dict[str, Rows], list[str], str]:
    splits = {}
    for split in ("train", "dev"):
        path = raw / sst2.FOLDER / sst2.SPLIT_FILES[split]
        rows = list(sst2.read_labeled(path))
        splits[split] = ([text for _, text, _ in rows], [label for _, _, label in rows], [path])
    return splits, list(sst2.CLASSES), "dev"


def _imdb(raw: Path) -> tuple[dict[str, Rows], list[str], str]:
    splits = {}
    for split in text.RELEASE_SPLITS:
        files = text.review_files(raw / "aclImdb", split)
        texts = [path.read_bytes().decode("utf-8") for path, _ in files]  # as HF's loader: no newline mapping
        splits[split] = (texts, [label for _, label in files], [path for path, _ in files])
    return splits, list(text.CLASSES), "test"


READERS: dict[str, Callable[[Path], tuple[dict[str, Rows], list[str], str]]] = {
    "agnews": _agnews, "sst2": _sst2, "imdb": _imdb,
}  # fmt: skip


def preprocess_cta(
    task: str,
    raw: Path,
    tokenizer_file: Path | None,
    out: Path,
    max_length: int | None = None,
    seed: int = 0,
    val_fraction: float | None = None,
) -> dict[str, Any]:
    """Preprocess one CTA task from `raw` with the tokenizer file (none for imdb_char) into `out`; returns
    the manifest."""
    if task not in TASKS:
        raise DataError(None, f"unknown CTA task {task!r}; tasks are {list(TASKS)}")
    if not raw.is_dir():
        raise DataError(raw, f"raw folder for {task} not found (run extract or generate first)")
    max_length = DEFAULT_MAX_LENGTH[task] if max_length is None else max_length
    if max_length < 2:
        raise DataError(None, f"--max-length must be at least 2, got {max_length}")
    if val_fraction is not None and not 0 < val_fraction < 1:
        raise DataError(None, f"--val-fraction must be in (0, 1), got {val_fraction}")
    if task in LM_TASKS and val_fraction is not None:
        raise DataError(None, "--val-fraction is for classification; WikiText-103 has its own valid split")
    created = not out.exists()
    store.begin_task(out)
    try:
        if task in LM_TASKS:
            if tokenizer_file is None:
                raise DataError(None, f"{task} needs --tokenizer (a tokenizer.json)")
            manifest = _language_model(raw, tokenizer_file, out, max_length)
        else:
            manifest = _classification(task, raw, tokenizer_file, out, max_length, seed, val_fraction)
        empty = [split for split, count in manifest["counts"].items() if count == 0]
        if empty:
            raise DataError(raw, f"{task}: split(s) {', '.join(empty)} have no rows ({manifest['counts']})")
        store.write_manifest(out, {"task": task, "max_length": max_length, "vocab": None, **manifest})
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    log.info("%s: wrote %s to %s", task, manifest["counts"], out)
    return store.read_manifest(out)


def _parts(
    release: dict[str, Rows], evaluation: str, seed: int, val_fraction: float | None
) -> tuple[dict, str]:
    """train/val/test (texts, labels): the authors' (val = test = the evaluation split) or val carved."""
    train_texts, train_labels, _ = release["train"]
    eval_texts, eval_labels, _ = release[evaluation]
    if val_fraction is None:
        note = f"val = test = the release's {evaluation} split, as the official code evaluates (best epoch)"
        return {
            "train": release["train"][:2],
            "val": (eval_texts, eval_labels),
            "test": (eval_texts, eval_labels),
        }, note
    order = np.random.default_rng(seed).permutation(len(train_texts))
    n_val = round(val_fraction * len(train_texts))
    pick = lambda idx: ([train_texts[i] for i in idx], [train_labels[i] for i in idx])  # noqa: E731
    note = (f"val = {val_fraction:.0%} of train drawn with seed {seed}; test = the release's {evaluation} "
            "split (a deviation: the official code selects its epoch on that split)")  # fmt: skip
    return {"train": pick(np.sort(order[n_val:])), "val": pick(np.sort(order[:n_val])),
            "test": (eval_texts, eval_labels)}, note  # fmt: skip


class CharVocabulary:
    """The official character-level IMDb vocabulary (`build_char_vocab`): <PAD> = 0, <UNK> = 1, then every
    character of the training texts by falling count (ties in order of first appearance)."""

    def __init__(self, texts: list[str], min_freq: int = CHAR_MIN_FREQ) -> None:
        counts = Counter(c for text in texts for c in text)
        self.vocab = ["<PAD>", "<UNK>", *(c for c, n in counts.most_common() if n >= min_freq)]
        code_points = np.array([ord(c) for c in self.vocab[2:]], dtype=np.int64)
        self._order = np.argsort(code_points)
        self._sorted = code_points[self._order]

    def encode(self, texts: list[str], max_length: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(ids (N, max_length) padded with 0, lengths, texts cut): `text[:max_length]`, unknown → <UNK>."""
        tokens = np.zeros((len(texts), max_length), dtype=store.token_dtype(len(self.vocab)))
        lengths = np.zeros(len(texts), dtype=np.int32)
        for i, row in enumerate(texts):
            points = np.frombuffer(row[:max_length].encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
            at = np.minimum(np.searchsorted(self._sorted, points), len(self._sorted) - 1)
            known = self._sorted[at] == points
            tokens[i, : len(points)] = np.where(known, self._order[at] + 2, 1)
            lengths[i] = len(points)
        return tokens, lengths, sum(len(row) > max_length for row in texts)


def _classification(task: str, raw: Path, tokenizer_file: Path | None, out: Path, max_length: int, seed: int,
                    val_fraction: float | None) -> dict[str, Any]:  # fmt: skip
    release, classes, evaluation = READERS["imdb" if task == "imdb_char" else task](raw)
    parts, val_note = _parts(release, evaluation, seed, val_fraction)
    if task == "imdb_char":
        chars = CharVocabulary(parts["train"][0])
        encode = lambda texts: chars.encode(texts, max_length)  # noqa: E731
        pad_id, identity = (
            0,
            {"kind": "characters", "min_freq": CHAR_MIN_FREQ, "vocab_size": len(chars.vocab)},
        )
        vocab: list[str] | None = chars.vocab
        note = (f"Character ids (vocabulary of the training texts, <PAD> = 0, <UNK> = 1, by falling count), "
                f"text[:{max_length}], padded with 0.")  # fmt: skip
    else:
        if tokenizer_file is None:
            raise DataError(None, f"{task} needs --tokenizer (the WordPiece vocab.txt)")
        tokenizer, identity = tokenize.load_wordpiece(tokenizer_file, max_length)
        pad_id, vocab = identity["special_ids"]["[PAD]"], None
        dtype = store.token_dtype(identity["vocab_size"])
        encode = lambda texts: tokenize.encode_padded(tokenizer, texts, max_length, pad_id, dtype)  # noqa: E731
        note = (f"WordPiece ids of '[CLS] text [SEP]' (BERT uncased pipeline over {identity['file']}), "
                f"cut to {max_length} tokens, [CLS]/[SEP] kept, padded with [PAD] = {pad_id}.")  # fmt: skip
    counts, truncated = {}, {}
    for split, (texts, labels) in parts.items():
        tokens, lengths, cut = encode(texts)
        store.write_split(out, split, tokens, lengths, np.asarray(labels, dtype=np.int64))
        counts[split], truncated[split] = len(labels), cut
    return {
        "vocab_size": identity["vocab_size"], "vocab": vocab, "num_classes": len(classes),
        "label_names": classes, "counts": counts, "truncated": truncated, "pad_id": pad_id,
        "skipped": {"count": 0, "items": []}, "tokenizer": identity, "val_split": val_note,
        "input_hash": inputs_hash(raw, [path for *_, paths in release.values() for path in paths]),
        "notes": [note, val_note],
    }  # fmt: skip


def pack_blocks(
    pieces: list[list[int]], lines: list[int], block_size: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """One map batch: concatenate the lines' ids, cut into blocks, drop the remainder (the official
    `_group_texts`). Returns (blocks (N, block_size) int64, the line each block starts in, tokens dropped)."""
    stream = np.fromiter((t for ids in pieces for t in ids), dtype=np.int64)
    owner = np.repeat(np.asarray(lines, dtype=np.int64), [len(ids) for ids in pieces])
    n = len(stream) // block_size
    return (
        stream[: n * block_size].reshape(n, block_size),
        owner[: n * block_size : block_size],
        len(stream) - n * block_size,
    )


def _language_model(raw: Path, tokenizer_file: Path, out: Path, block_size: int) -> dict[str, Any]:
    tokenizer, identity = tokenize.load_lm_tokenizer(tokenizer_file)
    dtype = store.token_dtype(identity["vocab_size"])
    counts, dropped, files = {}, {}, []
    for split, name in wikitext.SPLIT_FILES.items():
        path = raw / wikitext.FOLDER / name
        files.append(path)
        blocks, starts, dropped[split] = [], [], 0
        lines = wikitext.read_lines(path)  # streamed: wiki.train.tokens is 0.5 GB of text
        while batch := list(itertools.islice(lines, HF_MAP_BATCH)):
            pieces = tokenize.encode_lines(tokenizer, [text for _, text in batch], identity["eos_id"])
            b, s, d = pack_blocks(pieces, [line for line, _ in batch], block_size)
            blocks.append(b.astype(dtype)), starts.append(s)
            dropped[split] += d
        tokens = np.concatenate(blocks) if blocks else np.zeros((0, block_size), dtype)
        labels = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        store.write_split(out, split, tokens, np.full(len(tokens), block_size), labels)
        counts[split] = len(tokens)
    return {
        "vocab_size": identity["vocab_size"], "num_classes": identity["vocab_size"], "counts": counts,
        "truncated": dict.fromkeys(counts, 0), "skipped": {"count": 0, "items": []}, "pad_id": None,
        "tokenizer": identity, "input_hash": inputs_hash(raw, files),
        "lm": {"block_size": block_size, "add_eos": True, "eos_id": identity["eos_id"],
               "group_lines": HF_MAP_BATCH, "dropped_tokens": dropped},
        "notes": [f"Causal LM blocks of {block_size} token ids ({identity['file']}, no special tokens, "
                  f"</s> = {identity['eos_id']} after every non-blank line); each batch of {HF_MAP_BATCH} "
                  "lines packed on its own, its remainder dropped (`dropped_tokens`). Labels = file line a "
                  "block starts in. Splits: wiki.train / wiki.valid / wiki.test."],
    }  # fmt: skip


def subset_rows(n: int, fraction: float, seed: int) -> np.ndarray:
    """The data-size ablation's training rows: `int(n * fraction)` of range(n) (the ablation script's
    num_samples), drawn by a permutation seeded with `seed`, in increasing order. A pure function of its
    arguments, so `subset` and the official LM trainer (pdelra.cta_official.lm) draw the same rows; the
    rows for a smaller fraction are not nested in a larger one's (the official script draws each anew)."""
    if not 0 < fraction <= 1:
        raise DataError(None, f"data fraction must be in (0, 1], got {fraction}")
    return np.sort(np.random.default_rng(seed).permutation(n)[: int(n * fraction)])


def subset(source: Path, out: Path, fraction: float, seed: int) -> dict[str, Any]:
    """Write `out`: a seeded `int(N * fraction)` of `source`'s train rows, its val and test as they are."""
    if not 0 < fraction <= 1:
        raise DataError(None, f"--fraction must be in (0, 1], got {fraction}")
    if out.resolve() == source.resolve():
        raise DataError(out, "--out must differ from --processed (the subset is written beside it)")
    manifest = store.read_manifest(source)
    if tasks.is_two_tower(manifest["task"]):
        raise DataError(
            source, f"subset copies single-document rows; {manifest['task']}'s pairs are not supported"
        )
    n = manifest["counts"]["train"]
    rows = subset_rows(n, fraction, seed)
    keep = len(rows)
    if keep == 0:
        raise DataError(source / store.MANIFEST_NAME, f"{fraction} of {n} training rows is no row")
    created = not out.exists()
    store.begin_task(out)
    try:
        for split in manifest["counts"]:
            data = store.load_split(source, split)
            pick = rows if split == "train" else slice(None)
            store.write_split(out, split, data.tokens[pick], data.lengths[pick], data.labels[pick])
        subset_of = {
            "manifest_hash": store.manifest_hash(source),
            "fraction": fraction,
            "seed": seed,
            "rows_of": n,
        }
        note = (f"Data-size subset: {keep} of {n} train rows (fraction {fraction}, seed {seed}); val/test "
                "unchanged; `truncated` counts the full splits.")  # fmt: skip
        written = {**manifest, "counts": {**manifest["counts"], "train": keep}, "subset_of": subset_of,
                   "notes": [*manifest["notes"], note]}  # fmt: skip
        written.pop("format_version")
        store.write_manifest(out, written)
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    return store.read_manifest(out)


def preprocess_cta_command(args: argparse.Namespace) -> int:
    """`pdelra preprocess-cta TASK --raw DIR [--tokenizer FILE] --out DIR` (pdelra.data.cli)."""
    raw, out = Path(args.raw), Path(args.out)
    tokenizer = Path(args.tokenizer) if args.tokenizer else None
    preprocess_cta(args.task, raw, tokenizer, out, args.max_length, args.seed, args.val_fraction)
    return 0


def subset_command(args: argparse.Namespace) -> int:
    """`pdelra subset --processed DIR --out DIR --fraction F` (pdelra.data.cli)."""
    subset(Path(args.processed), Path(args.out), args.fraction, args.seed)
    return 0
