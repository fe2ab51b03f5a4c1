"""Preprocessing throughput: ListOps rows, Pathfinder PNGs decoded from a tar stream, AAN byte tokenisation.

What it measures and its options: PREPROCESS_DESCRIPTION and add_preprocess_arguments in pdelra.bench.cli
(`pdelra bench preprocess --help`).
"""

from __future__ import annotations

import argparse
import io
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from pdelra.bench.cli import PREPROCESS_DESCRIPTION, add_preprocess_arguments
from pdelra.data import listops, retrieval
from pdelra.data.extract import extract
from pdelra.data.preprocess import preprocess
from pdelra.data.snakes import SnakeParams, draw_sample


def _listops(tmp: Path, rows: int) -> str:
    # A few thousand distinct released-length rows, repeated: generation is not what is measured.
    pool = listops.generate_rows(2000, seed=0, min_length=500, max_length=2000, max_depth=10, max_args=10)
    raw = tmp / "listops"
    raw.mkdir()
    for name, count in (("basic_train.tsv", rows), ("basic_val.tsv", 100), ("basic_test.tsv", 100)):
        listops.write_tsv(raw / name, [pool[i % len(pool)] for i in range(count)])
    start = time.perf_counter()
    preprocess("listops", raw, tmp / "listops_out")
    seconds = time.perf_counter() - start
    return f"ListOps: {rows + 200} rows in {seconds:.2f} s (goal < 10 s for 100k)"


def _pathfinder(tmp: Path, images: int) -> str:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    pngs = []
    for label in (0, 1) * 16:
        image = None
        while image is None:  # draw_sample gives None when the snakes did not fit
            image = draw_sample(rng, label, SnakeParams())
        buffer = io.BytesIO()
        Image.fromarray(image, mode="L").save(buffer, format="PNG")
        pngs.append(buffer.getvalue())
    archive = tmp / "lra_release.gz"
    with tarfile.open(archive, "w:gz") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"lra_release/lra_release/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        for name in (
            "listops-1000/basic_train.tsv",
            "listops-1000/basic_val.tsv",
            "listops-1000/basic_test.tsv",
        ):
            add(name, b"Source\tTarget\n")
        for split in ("train", "eval", "test"):
            add(f"tsv_data/new_aan_pairs.{split}.tsv", b"")
        base = "pathfinder32/curv_contour_length_14/"
        folders = (images + 999) // 1000
        for k in range(folders):
            lines = [
                f"imgs/{k} sample_{n}.png {n} {n % 2} 14"
                for n in range(k * 1000, min(images, k * 1000 + 1000))
            ]
            add(f"{base}metadata/{k}.npy", ("\n".join(lines) + "\n").encode())
        for n in range(images):
            add(f"{base}imgs/{n // 1000}/sample_{n}.png", pngs[n % len(pngs)])
    start = time.perf_counter()
    extract("lra_release", archive, tmp / "raw")
    seconds = time.perf_counter() - start
    rate = images / seconds
    return f"Pathfinder: {images} PNGs from a gzipped tar, {seconds:.2f} s = {rate:,.0f} images/s (goal 10k)"


def _aan(tmp: Path, megabytes: int) -> str:
    raw = tmp / "retrieval"
    retrieval.generate(
        raw, n_train=300, n_val=10, n_test=10, seed=0, min_length=20_000, max_length=40_000, n_topics=5
    )
    train = raw / retrieval.SPLIT_FILES["train"]
    block = train.read_bytes()
    with open(train, "ab") as handle:  # grow by repetition to the requested size
        while train.stat().st_size < megabytes * 1_000_000:
            handle.write(block)
    size = sum(p.stat().st_size for p in raw.iterdir())
    start = time.perf_counter()
    preprocess("retrieval", raw, tmp / "retrieval_out")
    seconds = time.perf_counter() - start
    rate = size / 1e6 / seconds
    return f"AAN: {size / 1e6:.0f} MB tokenised in {seconds:.2f} s = {rate:.0f} MB/s (goal >= 50 MB/s)"


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="pdelra-bench-") as name:
        tmp = Path(name)
        for line in (
            _listops(tmp, args.listops_rows),
            _pathfinder(tmp, args.pathfinder_images),
            _aan(tmp, args.aan_mb),
        ):
            print(line, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/preprocess.py", description=PREPROCESS_DESCRIPTION)
    add_preprocess_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
