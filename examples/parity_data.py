"""Parity data (docs/add-a-task.md): `generate` writes {split}.tsv (label TAB bits), `read` the processed
arrays and the task's part of the manifest."""

import random

import numpy as np

from pdelra.data import store
from pdelra.data.hashing import inputs_hash

SPLITS = ("train", "val", "test")
# The token id filling each row past its example's length (the manifest's `pad_id`; which tokens are padding
# is said by the lengths, never by this value).
PAD_ID = 0


def generate(out, settings):
    """The raw files of every split into the folder `out` (`pdelra generate parity`)."""
    rng = random.Random(settings["seed"])
    for split in SPLITS:
        rows = [
            "".join(rng.choice("01") for _ in range(settings["length"]))
            for _ in range(settings[f"n_{split}"])
        ]
        (out / f"{split}.tsv").write_text("".join(f"{bits.count('1') % 2}\t{bits}\n" for bits in rows))


def read(raw, out, max_length, seed):
    """Each split as arrays (`pdelra preprocess parity`), and the manifest's task part."""
    counts, truncated, files = {}, {}, []
    for split in SPLITS:
        path = raw / f"{split}.tsv"
        files.append(path)
        rows = [line.split("\t") for line in path.read_text().splitlines()]
        tokens = np.full((len(rows), max_length), PAD_ID, np.uint8)
        lengths = np.zeros(len(rows), np.int32)
        for i, (_, bits) in enumerate(rows):
            kept = bits[:max_length]
            tokens[i, : len(kept)] = [1 + int(b) for b in kept]  # 0 is padding: the bits are 1 and 2
            lengths[i] = len(kept)
        labels = np.array([int(label) for label, _ in rows], np.int64)
        store.write_split(out, split, tokens, lengths, labels)
        counts[split] = len(rows)
        truncated[split] = sum(len(bits) > max_length for _, bits in rows)
    return {
        "vocab_size": 3,
        "vocab": ["<pad>", "0", "1"],
        "num_classes": 2,
        "counts": counts,
        "truncated": truncated,
        "skipped": {"count": 0, "items": []},
        "input_hash": inputs_hash(raw, files),  # the raw files' digest: the processed data's provenance
        "pad_id": PAD_ID,
        "notes": ["Generated bit strings; label = parity of the 1s."],
    }
