"""Archives built by hand in the real release layouts extract and preprocess to the expected arrays."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from archives import (
    CIFAR_RGB,
    PATHFINDER_LABELS,
    RELEASED,
    aclimdb_archive,
    cifar_binary_archive,
    lra_release_archive,
    pathfinder_grey,
    png_image,
)

from pdelra.data import listops
from pdelra.data.errors import DataError
from pdelra.data.extract import extract
from pdelra.data.preprocess import preprocess
from pdelra.data.store import load_split, read_manifest


def test_lra_release_extracts_and_preprocesses(tmp_path: Path) -> None:
    archive = tmp_path / "lra_release.gz"
    lra_release_archive(archive)
    kept = extract("lra_release", archive, tmp_path / "raw")
    assert kept == {"listops": 3, "retrieval": 3, "pathfinder": len(PATHFINDER_LABELS)}

    manifest = preprocess("listops", tmp_path / "raw/listops", tmp_path / "proc/listops", max_length=16)
    split = load_split(tmp_path / "proc/listops", "train")
    assert manifest["vocab"][:6] == ["<pad>", "[MIN", "[MAX", "[MED", "[SM", "]"]
    assert list(split.labels) == [6, 7, 4]
    third = [manifest["vocab"][i] for i in split.tokens[2, : split.lengths[2]]]
    assert third == ["[MAX", "3", "4", "3", "3", "]"]
    assert list(split.lengths) == [12, 8, 6] and manifest["truncated"]["train"] == 0

    preprocess("retrieval", tmp_path / "raw/retrieval", tmp_path / "proc/retrieval", max_length=2)
    pairs = load_split(tmp_path / "proc/retrieval", "val")
    assert pairs.tokens[0].tolist() == [ord("a") + 1, ord("b") + 1]
    assert pairs.tokens2[0].tolist() == [ord("a") + 1, ord("b") + 1] and pairs.lengths2.tolist() == [2]
    # The second row's text2 is empty: skipped and recorded by file and line, never stored with length 0.
    retrieval_manifest = read_manifest(tmp_path / "proc/retrieval")
    assert pairs.labels.tolist() == [1] and retrieval_manifest["truncated"]["val"] == 1
    assert {"file": "new_aan_pairs.eval.tsv", "line": "2", "reason": "empty document (text2)"} in (
        retrieval_manifest["skipped"]["items"]
    )

    manifest = preprocess("pathfinder", tmp_path / "raw/pathfinder", tmp_path / "proc/pathfinder")
    assert manifest["skipped"]["count"] == 1
    assert manifest["skipped"]["items"][0]["image"] == f"imgs/0/sample_{len(PATHFINDER_LABELS)}.png"
    splits = [load_split(tmp_path / "proc/pathfinder", s) for s in ("train", "val", "test")]
    assert all(len(s) for s in splits)
    rows = {int(s.tokens[i, 0]): int(s.labels[i]) for s in splits for i in range(len(s))}
    assert rows == {pathfinder_grey(n): label for n, label in PATHFINDER_LABELS.items()}


def test_unsafe_members_are_refused_by_name(tmp_path: Path) -> None:
    cases = [("../evil.txt", tarfile.REGTYPE), ("/etc/evil", tarfile.REGTYPE),
             ("lra_release/l", tarfile.SYMTYPE), ("lra_release/dev", tarfile.CHRTYPE)]  # fmt: skip
    for name, kind in cases:
        archive = tmp_path / "bad.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
            tar.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
        with pytest.raises(DataError, match=f"unsafe archive member '{name}'"):
            extract("lra_release", archive, tmp_path / "raw")
        assert not (tmp_path / "raw" / "listops").exists()


def test_truncated_archive_leaves_earlier_outputs(tmp_path: Path) -> None:
    archive = tmp_path / "lra_release.gz"
    lra_release_archive(archive)
    extract("lra_release", archive, tmp_path / "raw")
    before = (tmp_path / "raw/listops/basic_train.tsv").read_bytes()
    archive.write_bytes(archive.read_bytes()[:400])
    with pytest.raises(DataError, match="truncated or corrupt"):
        extract("lra_release", archive, tmp_path / "raw")
    assert (tmp_path / "raw/listops/basic_train.tsv").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == ["listops", "pathfinder", "retrieval"]


def test_aclimdb_tarball(tmp_path: Path) -> None:
    archive = tmp_path / "aclImdb_v1.tar.gz"
    aclimdb_archive(archive)
    assert extract("imdb", archive, tmp_path / "raw") == {"text": 22}
    manifest = preprocess("text", tmp_path / "raw/text", tmp_path / "proc/text", max_length=5)
    assert manifest["counts"] == {"train": 18, "val": 2, "test": 2}
    test = load_split(tmp_path / "proc/text", "test")
    assert test.labels.tolist() == [0, 1]  # neg first, then pos
    assert test.tokens[1].tolist() == [b + 1 for b in "caf\u00e9".encode()]
    assert any("validated on the test set" in note for note in manifest["notes"])


def test_cifar_binary_tarball(tmp_path: Path) -> None:
    archive = tmp_path / "cifar-10-binary.tar.gz"
    cifar_binary_archive(archive)
    extract("cifar10", archive, tmp_path / "raw")
    manifest = preprocess("image", tmp_path / "raw/image", tmp_path / "proc/image")
    assert manifest["counts"] == {"train": 18, "val": 2, "test": 1} and manifest["vocab_size"] == 256
    test = load_split(tmp_path / "proc/image", "test")
    # tf.image.rgb_to_grayscale: weighted sum of [0, 1] floats, then * 255.5 truncated
    r, g, b = (c / 255 for c in CIFAR_RGB)
    grey = int((0.2989 * r + 0.5870 * g + 0.1140 * b) * 255.5)
    assert test.tokens.dtype == np.uint8 and set(test.tokens[0].tolist()) == {grey}
    assert test.labels.tolist() == [9] and test.lengths.tolist() == [1024]


def test_bad_rows_name_file_and_line(tmp_path: Path) -> None:
    raw = tmp_path / "listops"
    raw.mkdir()
    for split in ("train", "val", "test"):
        (raw / f"basic_{split}.tsv").write_text("Source\tTarget\n( ( [MAX 1 ) ] )\t1\n")
    (raw / "basic_val.tsv").write_text("Source\tTarget\n( ( [MAX 1 ) ] )\t1\n( ( [MAX 1 ) ] )\t12\n")
    with pytest.raises(DataError, match=r"basic_val.tsv:3: target '12'"):
        preprocess("listops", raw, tmp_path / "out")
    (raw / "basic_val.tsv").write_text("Source\tTarget\n( ( [MAX 1 ) ] )\t1\n( ( [MUL 1 ) ] )\t1\n")
    with pytest.raises(DataError, match=r"basic_val.tsv:3: unknown ListOps token '\[MUL'"):
        preprocess("listops", raw, tmp_path / "out")
    assert not (tmp_path / "out/manifest.json").exists()


def test_released_labels_agree_with_evaluate() -> None:
    for source, target in RELEASED:
        assert listops.evaluate(source) == target
    with pytest.raises(ValueError):
        listops.evaluate("( ( [MAX 1 ) 2 )")


def _listops_tsv(path: Path, body: str, eol: str = "\n") -> Path:
    path.write_bytes(("Source\tTarget\n" + body).replace("\n", eol).encode())
    return path


def test_listops_vectorised_reader_matches_the_exact_reader(tmp_path: Path) -> None:
    from pdelra.data.preprocess import _listops_exact

    rows = "".join(f"{s}\t{t}\n" for s, t in RELEASED) + "\t3\n( ( [SM 1 ) ] )  \t0\n"
    cases = [("\n", rows), ("\r\n", rows), ("\n", rows.rstrip("\n")), ("\n", "")]
    for i, (eol, body) in enumerate(cases):
        path = _listops_tsv(tmp_path / f"{i}.tsv", body, eol)
        for max_length in (4, 16):
            fast = listops.encode_tsv(path, max_length)
            assert fast is not None, (eol, body)
            exact = _listops_exact(path, "train", max_length)
            assert fast[3] == exact[3] and all(
                np.array_equal(a, b) for a, b in zip(fast[:3], exact[:3], strict=True)
            )
    # Anything outside the released form goes to the exact reader (which accepts or names the line).
    for body in ('"( [MAX 1 ] )"\t1\n', "( [MAX 1 ]5 )\t1\n", "( [MA 1 ] )\t1\n", "( [SMAX 1 ] )\t1\n",
                 "( [MAX 1 ] )\t12\n", "( [MAX 1 ] )\t 1\n", "( [MAX 1 ] )\n", "( [MAX 1 ] )\t1\t2\n",
                 "\n", "( (5 [MAX 1 ] )\t1\n", "( [MAX 1 ] )\t1\r\r\n"):  # fmt: skip
        assert listops.encode_tsv(_listops_tsv(tmp_path / "bad.tsv", body), 16) is None, body


def _png_with_filter(pixels: np.ndarray, kind: int) -> bytes:
    """A PNG whose every row uses PNG filter `kind` (PIL picks filters itself)."""
    import struct
    import zlib

    def predict(x: int, y: int) -> int:
        left = int(pixels[y, x - 1]) if x else 0
        up = int(pixels[y - 1, x]) if y else 0
        corner = int(pixels[y - 1, x - 1]) if x and y else 0
        if kind < 3:
            return (0, left, up)[kind]
        if kind == 3:
            return (left + up) // 2
        p = left + up - corner
        pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
        return left if pa <= pb and pa <= pc else (up if pb <= pc else corner)

    rows = b"".join(bytes([kind, *((int(pixels[y, x]) - predict(x, y)) % 256 for x in range(32))])
                    for y in range(32))  # fmt: skip

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 32, 32, 8, 0, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def test_png_fast_decoder_matches_pil() -> None:
    from pdelra.data import pathfinder

    rng = np.random.default_rng(0)
    gradient = np.add.outer(np.arange(32), np.arange(32)) * 4 % 256
    images = [rng.integers(0, 256, (32, 32), dtype=np.uint8), gradient]
    pngs = [_png_with_filter(np.asarray(a, np.uint8), kind) for a in images for kind in range(5)]
    pngs += [png_image(value) for value in (0, 7, 255)]
    pngs += [png[:-30] for png in pngs[:3]] + [png[:40] + b"\0" + png[41:] for png in pngs[:3]] + [b""]
    collector = pathfinder.Collector()
    collector.BATCH = 4
    for n, png in enumerate(pngs):
        collector.labels[(0, n)] = n % 2
        collector.add_image((0, n), png, f"sample_{n}.png")
    images_out, labels, skipped = collector.finish()
    expected = [(n, pathfinder.decode_png(png, "x")) for n, png in enumerate(pngs)]
    kept = [(n, image) for n, image in expected if image is not None]
    assert len(images_out) == len(kept)
    assert all(np.array_equal(a, b) for a, (_, b) in zip(images_out, kept, strict=True))
    assert labels.tolist() == [n % 2 for n, _ in kept]
    assert len(skipped) == len(pngs) - len(kept) > 0
    assert sum(pathfinder.plain_png_rows(png) is not None for png in pngs) >= 13
