"""Raw files of one task, as they sit in their source's layout → the processed arrays of `pdelra.data.store`.

One reader per task serves generated and real data alike. Each `read_{task}(raw, out, max_length, seed)`,
named by the task's registry record (pdelra.tasks, `reader`), writes its splits and returns the task-specific
part of the manifest; `preprocess` adds the common part and writes the manifest last.
"""

from __future__ import annotations

import argparse
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from pdelra import tasks
from pdelra.data import bytes_codec, image, listops, pathfinder, retrieval, store, text
from pdelra.data.errors import DataError
from pdelra.data.hashing import inputs_hash
from pdelra.data.progress import progress
from pdelra.importing import import_callable

log = logging.getLogger("pdelra.data")

TEXT_VAL_FRACTION = 0.1
PATHFINDER_FRACTIONS = (0.8, 0.1, 0.1)
CIFAR_TRAIN_FRACTION = 0.9
ROWS_PER_BLOCK = 1024  # rows tokenised together: large enough to vectorise, small enough for cache


def preprocess(
    task: str, raw: Path, out: Path, max_length: int | None = None, seed: int = 0
) -> dict[str, Any]:
    """Preprocess `task` from `raw` into `out`; returns the manifest it wrote."""
    if task not in tasks.TASKS:
        raise DataError(None, f"unknown task {task!r}; tasks are {', '.join(tasks.TASKS)}")
    if not raw.is_dir():
        raise DataError(raw, f"raw folder for {task} not found")
    if not any(raw.iterdir()):
        raise DataError(
            raw, f"raw folder for {task} is empty: rerun the step that fills it (fetch/extract or generate)"
        )
    max_length = tasks.TASKS[task].max_length if max_length is None else max_length
    if max_length < 1:
        raise DataError(None, f"--max-length must be positive, got {max_length}")
    created = not out.exists()
    store.begin_task(out)
    try:
        manifest = import_callable(tasks.TASKS[task].reader, f"task {task}'s reader")(
            raw, out, max_length, seed
        )
        empty = [split for split, count in manifest["counts"].items() if count == 0]
        if empty:  # training would report accuracy 0.0 on nothing, or fail on the empty split
            raise DataError(raw, f"{task}: split(s) {', '.join(empty)} have no rows ({manifest['counts']})")
        manifest = {"task": task, "max_length": max_length, "vocab": None, **manifest}
        store.write_manifest(out, manifest)
    except BaseException:
        if created:  # a failed first run leaves nothing behind (a rerun's folder still lacks its manifest)
            shutil.rmtree(out, ignore_errors=True)
        raise
    log.info("%s: wrote %s to %s", task, manifest["counts"], out)
    return manifest


# ---------------------------------------------------------------------------------------------- ListOps


def encode_listops(
    sources: list[str], max_length: int, where: tuple[Path, list[int]]
) -> tuple[np.ndarray, ...]:
    """Token ids of many released expressions at once, vectorised over all their characters.

    A per-token Python dict lookup costs ~1 minute per 100k real rows (1,000+ tokens each); here every token
    is found from its start offset and identified by its first four bytes, which also validates it exactly.
    Returns (tokens (N, max_length) uint8, lengths (N,), truncated (N,) bool).
    """
    # Deleting the parentheses first (bytes.translate, C speed) halves the tokens the array code touches.
    text = ("\n".join(sources) + "\n").encode("ascii", "replace").translate(None, b"()")
    blob = np.frombuffer(text, dtype=np.uint8)
    space = blob <= ord(" ")  # space, tab, newline
    starts = np.flatnonzero(~space[1:] & space[:-1]) + 1
    if len(blob) and not space[0]:
        starts = np.concatenate(([0], starts))
    ends = np.flatnonzero(~space[:-1] & space[1:]) + 1  # blob ends with "\n", so every token ends
    padded = np.concatenate((blob, np.zeros(4, dtype=np.uint8)))
    width = np.minimum(ends - starts, 5)  # a token longer than 4 bytes can never match
    grab = padded[starts[:, None] + np.arange(4)] * (np.arange(4) < width[:, None])
    keys = grab.astype(np.uint32) @ np.array([1 << 24, 1 << 16, 1 << 8, 1], dtype=np.uint32)
    ids = _LISTOPS_LOOKUP.get_ids(keys, width)
    row = np.searchsorted(np.flatnonzero(blob == ord("\n")), starts)
    bad = np.flatnonzero(ids <= 0)
    if len(bad):
        r = row[bad[0]]
        token = bytes(blob[starts[bad[0]] : ends[bad[0]]]).decode("ascii", "replace")
        raise DataError(where[0], f"unknown ListOps token {token!r}", where[1][r])
    lengths = np.bincount(row, minlength=len(sources))
    first = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    position = np.arange(len(ids)) - first[row]
    fits = position < max_length
    tokens = np.zeros((len(sources), max_length), dtype=np.uint8)
    tokens[row[fits], position[fits]] = ids[fits]
    return tokens, np.minimum(lengths, max_length), lengths > max_length


class _TokenLookup:
    """Maps the packed first four bytes of a token to its id; unknown (or padding) → -1."""

    def __init__(self, vocab: dict[str, int]) -> None:
        table = {t: i for t, i in vocab.items() if i > 0}
        packed = {self._pack(t): (i, len(t)) for t, i in table.items()}
        self.keys = np.array(sorted(packed), dtype=np.uint32)
        self.ids = np.array([packed[k][0] for k in self.keys], dtype=np.int64)
        self.widths = np.array([packed[k][1] for k in self.keys], dtype=np.int64)

    @staticmethod
    def _pack(token: str) -> int:
        raw = token.encode().ljust(4, b"\0")
        return int.from_bytes(raw, "big")

    def get_ids(self, keys: np.ndarray, widths: np.ndarray) -> np.ndarray:
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = (self.keys[at] == keys) & (self.widths[at] == widths)
        return np.where(found, self.ids[at], -1)


_LISTOPS_LOOKUP = _TokenLookup(listops.TOKEN_IDS)


def _listops_exact(path: Path, split: str, max_length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(tokens, lengths, labels, rows truncated) of one TSV read line by line with the csv module: the
    reference semantics, and the path that reports a bad row with its file and line."""
    rows = list(listops.read_tsv(path))
    labels = np.array([target for _, _, target in rows], dtype=np.int64)
    tokens, lengths, cut = [], [], []
    for start in progress(range(0, len(rows), ROWS_PER_BLOCK), f"listops {split}"):
        block = rows[start : start + ROWS_PER_BLOCK]
        t, n, c = encode_listops([s for _, s, _ in block], max_length, (path, [ln for ln, _, _ in block]))
        tokens.append(t), lengths.append(n), cut.append(c)
    empty = np.zeros((0, max_length), np.uint8)
    lengths_all = np.concatenate(lengths) if lengths else np.zeros(0, np.int32)
    tokens_all = np.concatenate(tokens) if tokens else empty
    return tokens_all, lengths_all, labels, int(sum(c.sum() for c in cut))


def read_listops(raw: Path, out: Path, max_length: int, seed: int) -> dict[str, Any]:
    counts, truncated, files = {}, {}, []
    for split, name in listops.SPLIT_FILES.items():
        path = raw / name
        if not path.is_file():
            raise DataError(
                path, f"not found: ListOps needs {', '.join(listops.SPLIT_FILES.values())} in {raw}"
            )
        files.append(path)
        # The vectorised reader takes files in the released form; anything else (and every error, which
        # must name its line) goes through the exact per-line path, which gives the same arrays.
        encoded = listops.encode_tsv(path, max_length) or _listops_exact(path, split, max_length)
        tokens, lengths, labels, cut = encoded
        store.write_split(out, split, tokens, lengths, labels)
        counts[split], truncated[split] = len(labels), cut
    return {
        "vocab_size": len(listops.VOCAB), "vocab": list(listops.VOCAB), "num_classes": listops.NUM_CLASSES,
        "counts": counts, "truncated": truncated, "skipped": {"count": 0, "items": []},
        "input_hash": inputs_hash(raw, files), "pad_id": 0,
        "notes": ["Splits as released (basic_train/val/test). Parentheses deleted, ']' kept as a token."],
    }  # fmt: skip


# ------------------------------------------------------------------------------------------------- Text


def read_text(raw: Path, out: Path, max_length: int, seed: int) -> dict[str, Any]:
    root = raw / "aclImdb"
    listed = {split: text.review_files(root, split) for split in text.RELEASE_SPLITS}
    train = listed["train"]
    order = np.random.default_rng(seed).permutation(len(train))
    n_val = round(TEXT_VAL_FRACTION * len(train))
    splits = {
        "train": [train[i] for i in np.sort(order[n_val:])],
        "val": [train[i] for i in np.sort(order[:n_val])],
        "test": listed["test"],
    }
    counts, truncated = {}, {}
    for split, files in splits.items():
        tokens = np.zeros((len(files), max_length), dtype=bytes_codec.DTYPE)
        lengths = np.zeros(len(files), dtype=np.int32)
        cut = 0
        for i, (path, _) in enumerate(progress(files, f"text {split}", total=len(files))):
            lengths[i], was_cut = bytes_codec.encode_into(path.read_bytes(), tokens[i])
            cut += was_cut
        labels = np.array([label for _, label in files], dtype=np.int64)
        store.write_split(out, split, tokens, lengths, labels)
        counts[split], truncated[split] = len(files), cut
    return {
        "vocab_size": bytes_codec.VOCAB_SIZE, "num_classes": len(text.CLASSES), "counts": counts,
        "truncated": truncated, "skipped": {"count": 0, "items": []}, "pad_id": 0,
        "input_hash": inputs_hash(raw, [p for files in listed.values() for p, _ in files]),
        "notes": [
            "Byte-level: token = byte + 1, 0 = padding. Labels: 0 = neg, 1 = pos.",
            f"Validation = {TEXT_VAL_FRACTION:.0%} of aclImdb train drawn with seed {seed}; "
            "test = aclImdb test. LRA itself validated on the test set; "
            "this pipeline keeps test unseen until the final evaluation.",
        ],
    }  # fmt: skip


# -------------------------------------------------------------------------------------------- Retrieval


def read_retrieval(raw: Path, out: Path, max_length: int, seed: int) -> dict[str, Any]:
    counts, truncated, files = {}, {}, []
    skipped: list[dict[str, str]] = []
    for split, name in retrieval.SPLIT_FILES.items():
        path = raw / name
        if not path.is_file():
            raise DataError(
                path, f"not found: retrieval needs {', '.join(retrieval.SPLIT_FILES.values())} in {raw}"
            )
        files.append(path)
        capacity = retrieval.count_rows(path)
        cut = 0
        writers = {
            field: store.ArrayWriter(
                store.array_path(out, split, field), capacity, (max_length,), bytes_codec.DTYPE
            )
            for field in ("tokens", "tokens2")
        }
        try:
            labels = np.zeros(capacity, dtype=np.int64)
            lengths = np.zeros((2, capacity), dtype=np.int32)
            block = np.zeros((2, ROWS_PER_BLOCK, max_length), dtype=bytes_codec.DTYPE)
            filled, row = 0, 0
            for line, label, text1, text2 in progress(
                retrieval.read_pairs(path), f"retrieval {split}", capacity
            ):
                if not text1 or not text2:  # no tokens to attend to: skipped, named by file and line
                    which = " and ".join(n for n, t in (("text1", text1), ("text2", text2)) if not t)
                    skipped.append({"file": name, "line": str(line), "reason": f"empty document ({which})"})
                    log.warning("%s:%d: empty document (%s): row skipped", path, line, which)
                    continue
                for doc, data in enumerate((text1, text2)):
                    lengths[doc, row], was_cut = bytes_codec.encode_into(data, block[doc, filled])
                    cut += was_cut
                labels[row] = label
                row, filled = row + 1, filled + 1
                if filled == ROWS_PER_BLOCK:
                    writers["tokens"].append(block[0]), writers["tokens2"].append(block[1])
                    block[:] = 0
                    filled = 0
            writers["tokens"].append(block[0, :filled]), writers["tokens2"].append(block[1, :filled])
            for writer in writers.values():
                writer.close()
        except BaseException:
            for writer in writers.values():
                writer.abort()
            raise
        for field, array in (
            ("labels", labels[:row]),
            ("lengths", lengths[0, :row]),
            ("lengths2", lengths[1, :row]),
        ):
            store.save_array(store.array_path(out, split, field), array)
        counts[split], truncated[split] = row, cut
    return {
        "vocab_size": bytes_codec.VOCAB_SIZE, "num_classes": retrieval.NUM_CLASSES, "counts": counts,
        "truncated": truncated, "skipped": {"count": len(skipped), "items": skipped}, "pad_id": 0,
        "input_hash": inputs_hash(raw, files),
        "notes": ["Byte-level per document: token = byte + 1, 0 = padding. Splits as released "
                  "(train / eval → val / test). `truncated` counts documents (either of a pair)."],
    }  # fmt: skip


# ------------------------------------------------------------------------------------ Pathfinder, Image


def _pixels_manifest(counts: dict[str, int], skipped: list[dict[str, str]], hash_: str, note: str,
                     num_classes: int) -> dict[str, Any]:  # fmt: skip
    return {
        "vocab_size": 256, "num_classes": num_classes, "counts": counts,
        "truncated": dict.fromkeys(counts, 0), "skipped": {"count": len(skipped), "items": skipped},
        "input_hash": hash_, "pad_id": None,
        "notes": ["Tokens are grey levels 0-255 stored as they are (uint8, no offset): 0 is a black pixel, "
                  "not padding. Every row is 1024 pixels long: lengths are all 1024.", note],
    }  # fmt: skip


def _check_pixels(task: str, max_length: int) -> None:
    if max_length != 1024:
        raise DataError(
            None, f"{task} images are 32×32 = 1024 pixels; --max-length {max_length} would cut them"
        )


def _write_pixels(out: Path, split: str, images: np.ndarray, labels: np.ndarray) -> None:
    tokens = np.ascontiguousarray(images).reshape(len(images), images.shape[1] * images.shape[2])
    store.write_split(out, split, tokens, np.full(len(images), tokens.shape[1], np.int32), labels)


def read_pathfinder(raw: Path, out: Path, max_length: int, seed: int) -> dict[str, Any]:
    _check_pixels("pathfinder", max_length)
    images, labels, skipped = pathfinder.read(raw)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_train = round(PATHFINDER_FRACTIONS[0] * len(labels))
    n_val = round(PATHFINDER_FRACTIONS[1] * len(labels))
    parts = {
        "train": order[:n_train],
        "val": order[n_train : n_train + n_val],
        "test": order[n_train + n_val :],
    }
    for split, index in parts.items():
        index = np.sort(index)  # sorted reads from the memory map; the trainer shuffles anyway
        _write_pixels(out, split, images[index], labels[index])
    packed = (raw / pathfinder.PACKED_INDEX).is_file()
    files = ([raw / n for n in (pathfinder.PACKED_IMAGES, pathfinder.PACKED_LABELS, pathfinder.PACKED_INDEX)]
             if packed else [*raw.glob("metadata/*.npy"), *raw.glob("imgs/*/*.png")])  # fmt: skip
    note = f"Split 80/10/10 of the {len(labels)} decodable images by a permutation with seed {seed}."
    return _pixels_manifest({s: len(i) for s, i in parts.items()}, skipped, inputs_hash(raw, files), note, 2)


def read_image(raw: Path, out: Path, max_length: int, seed: int) -> dict[str, Any]:
    _check_pixels("image", max_length)
    folder = raw / image.FOLDER

    def load(names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        batches = [image.read_batch(folder / name) for name in names]
        rgb = np.concatenate([b[0] for b in batches])
        return image.to_grayscale(rgb), np.concatenate([b[1] for b in batches])

    train_images, train_labels = load(image.TRAIN_FILES)
    test_images, test_labels = load(image.TEST_FILES)
    n_train = round(CIFAR_TRAIN_FRACTION * len(train_labels))
    _write_pixels(out, "train", train_images[:n_train], train_labels[:n_train])
    _write_pixels(out, "val", train_images[n_train:], train_labels[n_train:])
    _write_pixels(out, "test", test_images, test_labels)
    counts = {"train": n_train, "val": len(train_labels) - n_train, "test": len(test_labels)}
    note = ("Grey = tf.image.rgb_to_grayscale (0.2989 R + 0.5870 G + 0.1140 B). Train = first 90% of "
            "data_batch_1-5 in file order, val = last 10%, test = test_batch.")  # fmt: skip
    files = [folder / name for name in image.TRAIN_FILES + image.TEST_FILES]
    return _pixels_manifest(counts, [], inputs_hash(raw, files), note, image.NUM_CLASSES)


def preprocess_command(args: argparse.Namespace) -> int:
    """`pdelra preprocess TASK --raw DIR --out DIR` (pdelra.data.cli)."""
    preprocess(args.task, Path(args.raw), Path(args.out), args.max_length, args.seed)
    return 0
