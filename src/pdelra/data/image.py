"""CIFAR-10 in its binary distribution (cifar-10-binary.tar.gz → cifar-10-batches-bin/): each record is
1 label byte followed by 3072 bytes of 32×32 R, G and B planes. No pickle is ever loaded.

LRA's Image task reads the images in grayscale through `tf.image.rgb_to_grayscale`, which `to_grayscale`
reproduces bit for bit. The generator writes batches of the same format whose classes differ in their
image statistics (a class-specific oriented grating and brightness), visible in grayscale.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pdelra.data.errors import DataError

FOLDER = "cifar-10-batches-bin"
TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILES = ("test_batch.bin",)
META_FILE = "batches.meta.txt"
CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
NUM_CLASSES = 10
SIDE = 32
RECORD = 1 + 3 * SIDE * SIDE
GRAY_WEIGHTS = np.array([0.2989, 0.5870, 0.1140], dtype=np.float32)  # tf.image.rgb_to_grayscale


def to_grayscale(rgb: np.ndarray) -> np.ndarray:
    """(N, 3, 32, 32) uint8 planes → (N, 32, 32) uint8 exactly as tf.image.rgb_to_grayscale on uint8 images:
    convert to float in [0, 1], weighted sum in float32, convert back by scaling with 255.5 and truncating."""
    flt = rgb.astype(np.float32) / np.float32(255.0)
    gray = np.tensordot(GRAY_WEIGHTS, flt, axes=([0], [1]))
    return np.clip(gray * np.float32(255.5), 0, 255).astype(np.uint8)


def read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 3, 32, 32) uint8, labels (N,) int64) of one binary batch, memory-mapped."""
    if not path.is_file():
        raise DataError(
            path, f"not found: expected the {FOLDER} layout ({', '.join(TRAIN_FILES + TEST_FILES)})"
        )
    size = path.stat().st_size
    if size == 0 or size % RECORD:
        raise DataError(
            path, f"size {size} is not a multiple of the {RECORD}-byte CIFAR-10 record (truncated?)"
        )
    records = np.memmap(path, dtype=np.uint8, mode="r").reshape(-1, RECORD)
    labels = records[:, 0].astype(np.int64)
    bad = np.flatnonzero(labels >= NUM_CLASSES)
    if len(bad):
        raise DataError(path, f"record {bad[0]} has label {labels[bad[0]]}, outside the classes 0-9")
    return records[:, 1:].reshape(-1, 3, SIDE, SIDE), labels


def generate(out: Path, *, n_train: int, n_test: int, seed: int, noise: float) -> None:
    """Write out/cifar-10-batches-bin/: n_train images over the 5 data batches, n_test in test_batch."""
    rng = np.random.default_rng(seed)
    folder = out / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    (folder / META_FILE).write_text("\n".join(CLASS_NAMES) + "\n")
    yy, xx = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32) / SIDE
    chunks = np.array_split(np.arange(n_train), len(TRAIN_FILES))
    for name, count in [*zip(TRAIN_FILES, map(len, chunks), strict=True), (TEST_FILES[0], n_test)]:
        labels = rng.integers(0, NUM_CLASSES, size=count)
        angle = labels[:, None, None] * (np.pi / NUM_CLASSES)  # class → grating orientation …
        frequency = 2.0 + (labels[:, None, None] % 3)  # … frequency …
        phase = rng.uniform(0, 2 * np.pi, size=(count, 1, 1))
        grating = np.sin(2 * np.pi * frequency * (np.cos(angle) * xx + np.sin(angle) * yy) + phase)
        brightness = 60 + 12 * labels[:, None, None]  # … and mean brightness
        base = brightness + 50 * grating
        tint = rng.uniform(0.8, 1.2, size=(count, 3, 1, 1))
        pixels = base[:, None] * tint + rng.normal(0, noise, size=(count, 3, SIDE, SIDE))
        records = np.empty((count, RECORD), dtype=np.uint8)
        records[:, 0] = labels
        records[:, 1:] = np.clip(pixels, 0, 255).astype(np.uint8).reshape(count, -1)
        (folder / name).write_bytes(records.tobytes())
