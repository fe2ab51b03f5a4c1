"""Byte-level language-modelling data for PhysQK-AD's own experiment, from text the pipeline already has.

Documents: every IMDb review (`{raw}/aclImdb/{train,test}/{pos,neg}/*.txt`, corpus `text`) or every
distinct AAN document (`{raw}/new_aan_pairs.{train,eval,test}.tsv`, corpus `retrieval`), in a fixed order.
They are split BY DOCUMENT into train/val/test (a seeded shuffle of documents; no document straddles two
splits), each split's documents are concatenated with a separator token, and the stream is cut into windows
of `window + 1` tokens that overlap by one (inputs = window[:-1], targets = window[1:]), so every token of the
stream except the first is predicted exactly once. The tail shorter than a window is dropped (counted in
the manifest).

Tokens: byte + 1 (1…256, as the text task), 0 = end of document. Stored with `pdelra.data.store` as the
other tasks: `{split}_tokens.npy` (N, window + 1) uint16, `{split}_lengths.npy` (all window + 1),
`{split}_labels.npy` = index of the document the window starts in; `manifest.json` last.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pdelra.data import retrieval, store, text
from pdelra.data.errors import DataError

log = logging.getLogger(__name__)

CORPORA = ("text", "retrieval")
SEPARATOR = 0  # end of document
VOCAB_SIZE = 257  # separator + 256 byte values
SPLITS = ("train", "val", "test")


def lm_task(corpus: str) -> str:
    """The task name of the language model on `corpus` (processed folder, run identity): lm_text, ..."""
    return f"lm_{corpus}"


def read_documents(corpus: str, raw: Path) -> Iterator[tuple[str, bytes]]:
    """(source, bytes) of every document of a raw corpus folder, in a fixed order."""
    if corpus == "text":
        root = raw / "aclImdb"
        for split in text.RELEASE_SPLITS:
            for path, _label in text.review_files(root, split):
                yield str(path.relative_to(raw)), path.read_bytes()
    elif corpus == "retrieval":
        seen: set[bytes] = set()  # AAN pairs repeat documents: each distinct text once
        for name in retrieval.SPLIT_FILES.values():
            path = raw / name
            if not path.is_file():
                raise DataError(path, "not found: expected the LRA AAN layout new_aan_pairs.*.tsv")
            for line, _label, text1, text2 in retrieval.read_pairs(path):
                for document in (text1, text2):
                    digest = hashlib.sha1(document).digest()
                    if digest not in seen:
                        seen.add(digest)
                        yield f"{name}:{line}", document
    else:
        raise ValueError(f"unknown LM corpus {corpus!r}; choose one of {', '.join(CORPORA)}")


def split_documents(n: int, val_fraction: float, test_fraction: float, seed: int) -> dict[str, np.ndarray]:
    """Document indices per split: a seeded permutation cut by the fractions (each split ≥ 1 document)."""
    if n < 3:
        raise ValueError(f"need at least 3 documents to split into train/val/test, got {n}")
    if not (0 < val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(f"val/test fractions {val_fraction}/{test_fraction} must be in (0, 1), sum < 1")
    order = np.random.default_rng(seed).permutation(n)
    n_val = max(1, round(n * val_fraction))
    n_test = max(1, round(n * test_fraction))
    return {
        "val": np.sort(order[:n_val]),
        "test": np.sort(order[n_val : n_val + n_test]),
        "train": np.sort(order[n_val + n_test :]),
    }


def pack(documents: list[bytes], window: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(windows (N, window + 1) uint16, starting document of each window, tokens dropped at the tail)."""
    pieces, owner = [], []
    for i, doc in enumerate(documents):
        tokens = np.frombuffer(doc, dtype=np.uint8).astype(np.uint16) + 1
        pieces.append(np.append(tokens, np.uint16(SEPARATOR)))
        owner.append(np.full(len(tokens) + 1, i, dtype=np.int64))
    stream = np.concatenate(pieces) if pieces else np.zeros(0, np.uint16)
    doc_of = np.concatenate(owner) if owner else np.zeros(0, np.int64)
    n = max(0, (len(stream) - 1) // window)  # windows of window+1 tokens, consecutive ones share one token
    starts = np.arange(n) * window
    windows = stream[starts[:, None] + np.arange(window + 1)] if n else np.zeros((0, window + 1), np.uint16)
    dropped = len(stream) - (n * window + 1) if n else len(stream)
    return windows, doc_of[starts], dropped


def prepare(
    corpus: str,
    raw: Path,
    out: Path,
    *,
    window: int = 128,
    val_fraction: float = 0.05,
    test_fraction: float = 0.05,
    seed: int = 0,
    max_documents: int | None = None,
) -> dict[str, Any]:
    """Write the packed LM task folder `out` (arrays + manifest.json last); returns the manifest."""
    if window < 2:
        raise ValueError(f"window must be ≥ 2, got {window}")
    sources, documents = [], []
    for source, doc in read_documents(corpus, Path(raw)):
        if max_documents is not None and len(documents) >= max_documents:
            break
        sources.append(source)
        documents.append(doc)
    digest = hashlib.sha256()
    for source, doc in zip(sources, documents, strict=True):
        digest.update(source.encode() + b"\0" + hashlib.sha256(doc).digest())
    parts = split_documents(len(documents), val_fraction, test_fraction, seed)
    task_dir = store.begin_task(out)
    counts, dropped, n_bytes, n_docs = {}, {}, {}, {}
    for split in SPLITS:
        docs = [documents[i] for i in parts[split]]
        windows, starts, dropped[split] = pack(docs, window)
        if len(windows) == 0:
            raise DataError(Path(raw), f"the {split} split has fewer than {window + 1} tokens; add documents")
        store.write_split(task_dir, split, windows, np.full(len(windows), window + 1), parts[split][starts])
        counts[split], n_docs[split] = len(windows), len(docs)
        n_bytes[split] = int(sum(len(d) for d in docs))
    manifest = {
        "task": lm_task(corpus),
        "vocab_size": VOCAB_SIZE,
        "vocab": None,
        "num_classes": VOCAB_SIZE,
        "max_length": window + 1,
        "counts": counts,
        "truncated": {split: 0 for split in SPLITS},
        "skipped": {"count": 0, "items": []},
        "input_hash": digest.hexdigest(),
        "notes": (
            f"byte-level LM on corpus {corpus!r}: tokens byte+1, {SEPARATOR} = end of document; documents "
            f"split by document (seed {seed}, val {val_fraction}, test {test_fraction}); windows of "
            f"{window} inputs + 1 target overlapping by one token; labels = starting document index"
        ),
        "lm": {
            "corpus": corpus,
            "window": window,
            "documents": n_docs,
            "bytes": n_bytes,
            "tail_tokens_dropped": dropped,
            "seed": seed,
            "max_documents": max_documents,
        },
    }
    store.write_manifest(task_dir, manifest)
    log.info("LM %s: %s windows of %d from %s documents", corpus, counts, window, n_docs)
    return manifest


def prepare_command(args: argparse.Namespace) -> int:
    """`pdelra lm prepare CORPUS --raw DIR --out DIR` (pdelra.lm.cli)."""
    prepare(
        args.corpus,
        args.raw,
        args.out,
        window=args.window,
        val_fraction=args.val_fraction,
        test_fraction=args.test_fraction,
        seed=args.seed,
        max_documents=args.max_documents,
    )
    return 0
