"""Archives in the real release layouts, built by hand (not with the project's generators), and a loopback
HTTP server that serves them. Shared by the data tests and the real-source workflow test."""

from __future__ import annotations

import functools
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from PIL import Image

# Rows as released in LRA's basic_*.tsv (Source<TAB>Target).
RELEASED = [
    ("( ( ( ( ( [MAX ( ( ( ( ( ( [MED 4 ) 6 ) 6 ) 0 ) 8 ) ] ) ) 6 ) 6 ) 0 ) ] )", 6),
    ("( ( ( ( [SM ( ( ( [MED 6 ) 5 ) ] ) ) 1 ) 1 ) ] )", 7),
    ("( ( ( ( ( [MAX 3 ) 4 ) 3 ) 3 ) ] )", 4),
]


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def png_image(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((32, 32), value, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


# Pathfinder-32 images of the release archive: sample n has label n % 2 and a uniform grey level of its own.
# Twenty, so that the 80/10/10 split leaves no split empty (preprocess refuses empty splits).
PATHFINDER_LABELS = {n: n % 2 for n in range(20)}


def pathfinder_grey(n: int) -> int:
    return 5 + 12 * n


def lra_release_archive(path: Path) -> None:
    """lra_release.gz: nested + duplicate layout, 3 ListOps rows per split, 2 AAN pairs (one with an empty
    document), 21 Pathfinder-32 images (the last one empty, as in the real release) and decoys from other
    folders."""
    tsv = "Source\tTarget\n" + "".join(f"{s}\t{t}\n" for s, t in RELEASED)
    aan = "1.0\tA1\tA2\tab\tabc\n0.0\tA3\tA4\tx\t\n"
    with tarfile.open(path, "w:gz") as tar:
        for top in ("lra_release/lra_release/", "lra_release/"):  # nested layout + duplicate top level
            for split in ("train", "val", "test"):
                _add(tar, f"{top}listops-1000/basic_{split}.tsv", tsv.encode())
        for split in ("train", "eval", "test"):
            _add(tar, f"lra_release/lra_release/tsv_data/new_aan_pairs.{split}.tsv", aan.encode())
        base = "lra_release/lra_release/pathfinder32/curv_contour_length_14/"
        rows = [f"imgs/0 sample_{n}.png {n} {label} 14\n" for n, label in PATHFINDER_LABELS.items()]
        empty = len(PATHFINDER_LABELS)
        rows.append(f"imgs/0 sample_{empty}.png {empty} 1 14\n")
        _add(tar, base + "metadata/0.npy", "".join(rows).encode())
        for n in reversed(PATHFINDER_LABELS):  # images arrive out of order
            _add(tar, base + f"imgs/0/sample_{n}.png", png_image(pathfinder_grey(n)))
        _add(tar, base + f"imgs/0/sample_{empty}.png", b"")  # empty, as in the real release
        _add(tar, "lra_release/lra_release/pathfinder32/curv_baseline/imgs/0/sample_172.png", b"")
        _add(tar, "lra_release/pathfinder128/curv_baseline/imgs/0/sample_0.png", png_image(1))


def aclimdb_archive(path: Path) -> None:
    """aclImdb_v1.tar.gz: 10 pos + 10 neg train reviews, one of each in test, and parts LRA does not use."""
    with tarfile.open(path, "w:gz") as tar:
        for i in range(10):
            _add(tar, f"aclImdb/train/pos/{i}_9.txt", b"good")
            _add(tar, f"aclImdb/train/neg/{i}_2.txt", b"bad film")
        _add(tar, "aclImdb/test/pos/0_10.txt", "caf\u00e9".encode())
        _add(tar, "aclImdb/test/neg/0_1.txt", b"no")
        _add(tar, "aclImdb/train/unsup/0_0.txt", b"unused")
        _add(tar, "aclImdb/imdb.vocab", b"unused")


CIFAR_RGB = (255, 128, 10)  # every pixel of every image in cifar_binary_archive


def cifar_binary_archive(path: Path) -> None:
    """cifar-10-binary.tar.gz: 5 data batches of 4 records (labels 0-3) and a test batch of one (label 9)."""
    rgb = np.zeros((3, 32, 32), np.uint8)
    rgb[0], rgb[1], rgb[2] = CIFAR_RGB
    record = lambda label: bytes([label]) + rgb.tobytes()  # noqa: E731
    with tarfile.open(path, "w:gz") as tar:
        for i in range(1, 6):
            _add(tar, f"cifar-10-batches-bin/data_batch_{i}.bin", b"".join(record(j % 10) for j in range(4)))
        _add(tar, "cifar-10-batches-bin/test_batch.bin", record(9))
        _add(tar, "cifar-10-batches-bin/batches.meta.txt", b"airplane\n")
        _add(tar, "cifar-10-batches-bin/readme.html", b"")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # no access log in the test output
        pass


@contextmanager
def serve_directory(directory: Path) -> Iterator[str]:
    """Serve `directory` over HTTP on 127.0.0.1 (a free port) while the block runs; yields the base URL."""
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(directory))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
