"""Pathfinder-32 (LRA's "Pathfinder": pathfinder32/curv_contour_length_14) on disk, in two layouts:

- release layout: `imgs/<k>/sample_<n>.png` (32×32 grayscale) and TEXT files `metadata/<k>.npy` whose lines
  read `imgs/<k> sample_<n>.png <idx> <label> ...` (label in column 3). The generator writes this layout.
- packed layout, written by `pdelra extract` straight from the release's tar stream, because 200k PNGs must
  never be unpacked as files: `images.npy` (N, 32, 32) uint8, `labels.npy` (N,) int64 and `packed.json`
  (`{"count": N, "skipped": [{"image": ..., "reason": ...}], "source": ...}`).

Both layouts keep the images in the same order, sorted by (k, n), and skip empty or undecodable PNGs
(the release has at least one empty file), recording each skip.
"""

from __future__ import annotations

import io
import json
import re
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pdelra.atomic import write_bytes_atomic
from pdelra.data.errors import DataError
from pdelra.data.store import save_array

SIDE = 32
NUM_CLASSES = 2
PACKED_IMAGES, PACKED_LABELS, PACKED_INDEX = "images.npy", "labels.npy", "packed.json"
IMAGE_NAME = re.compile(r"^imgs/(\d+)/sample_(\d+)\.png$")
METADATA_NAME = re.compile(r"^metadata/(\d+)\.npy$")


def image_key(relative: str) -> tuple[int, int] | None:
    """(k, n) of 'imgs/<k>/sample_<n>.png', None for any other path."""
    match = IMAGE_NAME.match(relative)
    return (int(match[1]), int(match[2])) if match else None


def decode_png(data: bytes, name: str) -> np.ndarray | None:
    """A 32×32 uint8 image, or None when the PNG is empty or undecodable (to be skipped and counted)."""
    from PIL import Image, UnidentifiedImageError

    if not data:
        return None
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            if image.size != (SIDE, SIDE):
                raise DataError(
                    name, f"image is {image.size[0]}×{image.size[1]}, Pathfinder-32 needs {SIDE}×{SIDE}"
                )
            return np.asarray(image if image.mode == "L" else image.convert("L"))
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        if isinstance(err, DataError):
            raise
        return None


def parse_metadata(text: str, name: str) -> Iterable[tuple[tuple[int, int], int]]:
    """((k, n), label) for each line of one metadata file."""
    for line_number, line in enumerate(text.splitlines(), start=1):
        columns = line.split()
        if not columns:
            continue
        key = image_key(f"{columns[0]}/{columns[1]}") if len(columns) >= 4 else None
        if key is None:
            raise DataError(name, f"expected 'imgs/<k> sample_<n>.png <idx> <label> ...', got {line[:80]!r}",
                            line_number)  # fmt: skip
        if columns[3] not in ("0", "1"):
            raise DataError(name, f"label {columns[3]!r} is not 0 or 1", line_number)
        yield key, int(columns[3])


# ------------------------------------------------------------------------------ fast path for plain PNGs
#
# PIL costs ~50 µs per 32×32 image, mostly in its Python-level plumbing; the release has 200k of them. A
# PNG in the plain form every PNG writer produces for an 8-bit grey image (signature, IHDR 32×32 8-bit
# grey non-interlaced, IDAT chunks, IEND, every CRC correct, one complete zlib stream of exactly 32 filtered
# rows) is decoded here instead: `plain_png_rows` inflates it right away (so anything unusual is handed to
# PIL at the same point as before), and `unfilter` undoes the PNG row filters for many images at once with
# numpy. Everything else goes through `decode_png`, so results (and errors) are those of PIL.


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


# Signature + IHDR (32×32, 8-bit, grey, no interlace) and IEND are the same bytes in every plain PNG.
_PLAIN_HEAD = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", SIDE, SIDE, 8, 0, 0, 0, 0))
_PLAIN_TAIL = _chunk(b"IEND", b"")
_ROW = SIDE + 1  # filter-type byte + 32 pixels
_CHUNK_HEAD = struct.Struct(">I4s")


def plain_png_rows(data: bytes) -> bytes | None:
    """The inflated, still filtered scanlines (32 × 33 bytes) of a plain 32×32 grey PNG, else None."""
    if not (data.startswith(_PLAIN_HEAD) and data.endswith(_PLAIN_TAIL)):
        return None
    pos, end, idat = len(_PLAIN_HEAD), len(data) - len(_PLAIN_TAIL), []
    while pos < end:  # the IDAT chunks, each with a correct CRC, and nothing else
        if pos + 12 > end:
            return None
        length, kind = _CHUNK_HEAD.unpack_from(data, pos)
        body_end = pos + 8 + length
        if kind != b"IDAT" or body_end + 4 > end:
            return None
        crc = int.from_bytes(data[body_end : body_end + 4], "big")
        if zlib.crc32(memoryview(data)[pos + 4 : body_end]) != crc:
            return None
        idat.append(data[pos + 8 : body_end])
        pos = body_end + 4
    inflate = zlib.decompressobj()
    try:
        rows = inflate.decompress(idat[0] if len(idat) == 1 else b"".join(idat), SIDE * _ROW + 1)
    except zlib.error:
        return None
    if len(rows) != SIDE * _ROW or not inflate.eof or inflate.unused_data or max(rows[::_ROW]) > 4:
        return None
    return rows


def unfilter(filtered: np.ndarray) -> np.ndarray:
    """Undo PNG scanline filters (None, Sub, Up, Average, Paeth; 1 byte per pixel) of (B, 32, 33) rows."""
    count = len(filtered)
    kinds, raw = filtered[:, :, 0], filtered[:, :, 1:]
    out = np.zeros((count, SIDE, SIDE), dtype=np.uint8)
    above = np.zeros((count, SIDE), dtype=np.uint8)
    for y in range(SIDE):
        row, kind = raw[:, y], kinds[:, y]
        line = out[:, y]
        line[:] = row
        if not kind.any():
            above = line
            continue
        sub = kind == 1
        if sub.any():
            line[sub] = np.cumsum(row[sub], axis=1, dtype=np.uint8)
        up = kind == 2
        if up.any():
            line[up] = row[up] + above[up]
        for kind_id in (3, 4):
            which = np.flatnonzero(kind == kind_id)
            if not len(which):
                continue
            x, b = row[which].astype(np.int16), above[which].astype(np.int16)
            done = np.zeros(len(which), dtype=np.int16)  # the reconstructed byte to the left
            c = np.zeros(len(which), dtype=np.int16)  # the byte above that one
            for i in range(SIDE):
                if kind_id == 3:
                    predictor = (done + b[:, i]) >> 1
                else:
                    p = done + b[:, i] - c
                    pa, pb, pc = np.abs(p - done), np.abs(p - b[:, i]), np.abs(p - c)
                    predictor = np.where((pa <= pb) & (pa <= pc), done, np.where(pb <= pc, b[:, i], c))
                done = (x[:, i] + predictor) & 0xFF
                x[:, i] = done
                c = b[:, i]
            line[which] = x.astype(np.uint8)
        above = line
    return out


@dataclass
class Collector:
    """Gathers decoded images and metadata labels in any order (a tar stream interleaves them), then pairs
    them up sorted by (k, n).

    Pixels go into one growing (capacity, 32, 32) array, in the order images are added. A plain PNG is
    inflated when it is added (anything unusual goes to PIL right there, as before) and waits in `_pending`
    until `BATCH` of them are unfiltered together. (A worker process for the decoding was tried: with the
    tar stream already costing more than the decoding, it was slower on 2 busy cores.)"""

    BATCH = 4096

    images: dict[tuple[int, int], int | None] = field(default_factory=dict)  # key → row in `_pixels`
    labels: dict[tuple[int, int], int] = field(default_factory=dict)
    _pixels: np.ndarray = field(default_factory=lambda: np.empty((1024, SIDE, SIDE), np.uint8))
    _count: int = 0
    _pending: list[bytes] = field(default_factory=list)
    _pending_rows: list[int] = field(default_factory=list)

    def _next_row(self) -> int:
        if self._count == len(self._pixels):
            grown = np.empty((2 * len(self._pixels), SIDE, SIDE), np.uint8)
            grown[: self._count] = self._pixels
            self._pixels = grown
        self._count += 1
        return self._count - 1

    def add_image(self, key: tuple[int, int], data: bytes, name: str) -> None:
        rows = plain_png_rows(data)
        if rows is None:
            image = decode_png(data, name)
            if image is None:
                self.images[key] = None
                return
            row = self._next_row()
            self._pixels[row] = image
        else:
            row = self._next_row()
            self._pending.append(rows)
            self._pending_rows.append(row)
            if len(self._pending) >= self.BATCH:
                self._flush()
        self.images[key] = row

    def _flush(self) -> None:
        if self._pending:
            filtered = np.frombuffer(b"".join(self._pending), np.uint8).reshape(-1, SIDE, _ROW)
            self._pixels[self._pending_rows] = unfilter(filtered)
            self._pending, self._pending_rows = [], []

    def add_metadata(self, text: str, name: str) -> None:
        self.labels.update(parse_metadata(text, name))

    def finish(self) -> tuple[np.ndarray, np.ndarray, list[dict[str, str]]]:
        self._flush()
        skipped: list[dict[str, str]] = []
        keep: list[tuple[int, int]] = []
        for key in sorted(self.labels.keys() | self.images.keys()):
            name = f"imgs/{key[0]}/sample_{key[1]}.png"
            if key not in self.labels:
                skipped.append({"image": name, "reason": "no metadata line"})
            elif key not in self.images:
                skipped.append({"image": name, "reason": "listed in metadata but missing"})
            elif self.images[key] is None:
                skipped.append({"image": name, "reason": "empty or undecodable PNG"})
            else:
                keep.append(key)
        images = self._pixels[np.array([self.images[key] for key in keep], dtype=np.int64)]
        labels = np.array([self.labels[key] for key in keep], dtype=np.int64)
        return images, labels, skipped


def read_release_layout(root: Path) -> tuple[np.ndarray, np.ndarray, list[dict[str, str]]]:
    """Images, labels and skips of an unpacked `imgs/` + `metadata/` folder (what the generator writes)."""
    metadata = root / "metadata"
    if not metadata.is_dir():
        raise DataError(metadata, "not found: expected imgs/<k>/sample_<n>.png + metadata/<k>.npy")
    collector = Collector()
    for path in sorted(metadata.glob("*.npy")):
        collector.add_metadata(path.read_text(), str(path))
    for key in collector.labels:
        path = root / "imgs" / str(key[0]) / f"sample_{key[1]}.png"
        if path.is_file():
            collector.add_image(key, path.read_bytes(), str(path))
    return collector.finish()


def write_packed(folder: Path, images: np.ndarray, labels: np.ndarray, skipped: list[dict[str, str]],
                 source: str) -> None:  # fmt: skip
    save_array(folder / PACKED_IMAGES, images)
    save_array(folder / PACKED_LABELS, labels)
    index = {"count": len(labels), "skipped": skipped, "source": source}
    write_bytes_atomic(folder / PACKED_INDEX, (json.dumps(index, indent=1) + "\n").encode())


def read(root: Path) -> tuple[np.ndarray, np.ndarray, list[dict[str, str]]]:
    """Images, labels and skips of a raw Pathfinder folder in either layout."""
    index_path = root / PACKED_INDEX
    if not index_path.is_file():
        return read_release_layout(root)
    index = json.loads(index_path.read_text())
    images = np.load(root / PACKED_IMAGES, mmap_mode="r")
    labels = np.load(root / PACKED_LABELS)
    if images.shape[1:] != (SIDE, SIDE) or len(images) != len(labels) or len(labels) != index["count"]:
        raise DataError(root, f"packed arrays disagree: images {images.shape}, labels {labels.shape}, "
                              f"{PACKED_INDEX} count {index['count']}")  # fmt: skip
    bad = np.flatnonzero((labels < 0) | (labels >= NUM_CLASSES))
    if len(bad):
        raise DataError(root / PACKED_LABELS, f"row {bad[0]} has label {labels[bad[0]]}, not 0 or 1")
    return images, labels, index["skipped"]
