"""`pdelra extract`: stream a downloaded archive once and keep only what the tasks use.

- `lra_release` (lra_release.gz, a gzipped tar): listops-1000/basic_*.tsv → RAW/listops,
  tsv_data/new_aan_pairs.*.tsv → RAW/retrieval, pathfinder32/curv_contour_length_14 → RAW/pathfinder as
  one packed array (PNGs decoded from the stream, never written as files). Any number of leading
  `lra_release/` folders is stripped (the release nests `lra_release/lra_release/` and repeats some
  folders at the top level); a file seen twice is kept once.
- `imdb` (aclImdb_v1.tar.gz): aclImdb/{train,test}/{pos,neg}/*.txt → RAW/text/aclImdb/...
- `cifar10` (cifar-10-binary.tar.gz): the 6 batches and batches.meta.txt → RAW/image/cifar-10-batches-bin/.
- `agnews` (ag_news_csv.tgz): ag_news_csv/{train,test}.csv, classes.txt, readme.txt → RAW/agnews/ag_news_csv/.
- `sst2` (GLUE SST-2.zip): SST-2/{train,dev,test}.tsv → RAW/sst2/SST-2/ (SST-2/original/ is not kept).
- `wikitext103` (wikitext-103-v1.zip): wikitext-103/wiki.{train,valid,test}.tokens →
  RAW/wikitext103/wikitext-103/.

Tar archives (plain, gzip, bzip2, xz) and zip archives are told apart by their first bytes, not their names
(the workflow stores every download as `{source}.tar.gz`).

Every member is checked before anything else: absolute paths, `..`, links and devices are refused with an
error naming the member. Each task folder is built beside its target and swapped in only when the whole
archive has been read, so a truncated or unsafe archive leaves earlier outputs untouched.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import logging
import lzma
import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from pdelra.atomic import atomic_dir
from pdelra.data import pathfinder, settings
from pdelra.data.errors import DataError
from pdelra.data.progress import progress

log = logging.getLogger("pdelra.data")

SOURCES = settings.EXTRACT_SOURCES
PATHFINDER_PREFIX = "pathfinder32/curv_contour_length_14/"
LRA_FILES = {
    "listops-1000/basic_train.tsv": "listops", "listops-1000/basic_val.tsv": "listops",
    "listops-1000/basic_test.tsv": "listops", "tsv_data/new_aan_pairs.train.tsv": "retrieval",
    "tsv_data/new_aan_pairs.eval.tsv": "retrieval", "tsv_data/new_aan_pairs.test.tsv": "retrieval",
}  # fmt: skip
IMDB_FILE = re.compile(r"^aclImdb/(train|test)/(pos|neg)/\d+_\d+\.txt$")
CIFAR_FILE = re.compile(r"^cifar-10-batches-bin/((data_batch_[1-5]|test_batch)\.bin|batches\.meta\.txt)$")
AGNEWS_FILE = re.compile(r"^ag_news_csv/(train\.csv|test\.csv|classes\.txt|readme\.txt)$")
SST2_FILE = re.compile(r"^SST-2/(train|dev|test)\.tsv$")
WIKITEXT_FILE = re.compile(r"^wikitext-103/wiki\.(train|valid|test)\.tokens$")
ZIP_MAGIC = b"PK\x03\x04"


_DRIVE = re.compile(r"^[A-Za-z]:")


def name_parts(name: str, archive: Path) -> list[str]:
    """The components of a member name ('' and '.' dropped); absolute names and '..' are refused."""
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        raise DataError(archive, f"unsafe archive member {name!r}: absolute path")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise DataError(archive, f"unsafe archive member {name!r}: '..' in path")
    return parts


def safe_parts(member: tarfile.TarInfo, archive: Path) -> list[str]:
    """The member's path components, normalised as PurePosixPath normalises them ('' and '.' dropped);
    refuse anything that could write outside the target. Plain string work: this runs for every member of
    archives with hundreds of thousands of them."""
    name = member.name
    parts = name_parts(name, archive)
    if member.issym() or member.islnk():
        raise DataError(archive, f"unsafe archive member {name!r}: link to {member.linkname!r}")
    if member.isdev() or not (member.isfile() or member.isdir()):
        raise DataError(archive, f"unsafe archive member {name!r}: not a regular file or folder")
    return parts


def safe_name(member: tarfile.TarInfo, archive: Path) -> PurePosixPath:
    """The member's normalised relative path; refuse anything that could write outside the target."""
    return PurePosixPath(*safe_parts(member, archive))


def strip_release_prefix(path: PurePosixPath | list[str]) -> str:
    """'lra_release/lra_release/listops-1000/x' and 'lra_release/listops-1000/x' → 'listops-1000/x'."""
    parts = list(path.parts) if isinstance(path, PurePosixPath) else path
    start = 0
    while start < len(parts) and parts[start] == "lra_release":
        start += 1
    return "/".join(parts[start:])


_DECOMPRESSORS: dict[bytes, Callable[..., BinaryIO]] = {
    b"\x1f\x8b": gzip.open,
    b"BZh": bz2.open,
    b"\xfd7zXZ": lzma.open,
}


def _stream(archive: Path) -> tarfile.TarFile:
    if not archive.is_file():
        raise DataError(archive, "archive not found (run `pdelra fetch` first)")
    # Decompress with gzip/bz2/lzma's own readers rather than tarfile's "r|*": those raise EOFError on a
    # truncated stream, where tarfile's streaming decompressor can end quietly with the files read so far.
    with open(archive, "rb") as handle:
        magic = handle.read(6)
    opener = next((o for prefix, o in _DECOMPRESSORS.items() if magic.startswith(prefix)), open)
    try:
        return tarfile.open(fileobj=opener(archive, "rb"), mode="r|")  # streaming: one pass, no seeking
    except tarfile.TarError as err:
        raise DataError(archive, f"not a readable tar archive ({err})") from err


def _members(tar: tarfile.TarFile, archive: Path, desc: str) -> Iterator[tuple[tarfile.TarInfo, list[str]]]:
    for member in progress(tar, desc):
        yield member, safe_parts(member, archive)


def _copy(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    assert source is not None  # regular files always have content
    with source, open(target, "wb") as handle:
        shutil.copyfileobj(source, handle, 1 << 20)


def extract(source: str, archive: Path, out: Path) -> dict[str, int]:
    """Extract `source` from `archive` into task folders under `out`; returns items kept per task."""
    if source not in _EXTRACTORS:
        raise DataError(None, f"unknown source {source!r}; sources are {list(SOURCES)}")
    try:
        return _EXTRACTORS[source](archive, out)
    except (
        tarfile.TarError,
        zipfile.BadZipFile,
        EOFError,
        zlib.error,
        gzip.BadGzipFile,
        lzma.LZMAError,
    ) as err:
        raise DataError(
            archive, f"archive is truncated or corrupt ({err}); earlier outputs left as they were"
        ) from err


def _extract_lra(archive: Path, out: Path) -> dict[str, int]:
    kept = {"listops": 0, "retrieval": 0, "pathfinder": 0}
    collector = pathfinder.Collector()
    duplicates = 0
    with ExitStack() as stack:
        tmp = {task: stack.enter_context(atomic_dir(out / task)) for task in kept}
        seen: set[str] = set()
        where = str(archive)
        with _stream(archive) as tar:
            for member, parts in _members(tar, archive, "lra_release"):
                if not member.isfile():
                    continue
                name = strip_release_prefix(parts)
                if name in seen:
                    duplicates += 1
                    continue
                if name in LRA_FILES:
                    task = LRA_FILES[name]
                    _copy(tar, member, tmp[task] / PurePosixPath(name).name)
                elif name.startswith(PATHFINDER_PREFIX):
                    relative = name[len(PATHFINDER_PREFIX) :]
                    key = pathfinder.image_key(relative)
                    if key is not None:
                        collector.add_image(key, _read(tar, member), f"{where}:{member.name}")
                    elif pathfinder.METADATA_NAME.match(relative):
                        collector.add_metadata(_read(tar, member).decode(), f"{where}:{member.name}")
                    else:
                        continue
                else:
                    continue
                seen.add(name)
        images, labels, skipped = collector.finish()
        _require(archive, tmp, {"listops": 3, "retrieval": 3})
        if len(labels) == 0:
            raise DataError(archive, f"no Pathfinder images under {PATHFINDER_PREFIX}")
        pathfinder.write_packed(tmp["pathfinder"], images, labels, skipped, source=archive.name)
        kept = {"listops": 3, "retrieval": 3, "pathfinder": len(labels)}
    if skipped:
        log.warning("pathfinder: skipped %d images (%s)", len(skipped), skipped[:3])
    log.info("lra_release: kept %s, ignored %d duplicate members", kept, duplicates)
    return kept


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    if member.isreg() and not member.issparse():
        # What tarfile's own reader does for a plain member, without building a file object per member
        # (a noticeable cost at 200k Pathfinder PNGs): seek to its data in the stream and read it whole.
        tar.fileobj.seek(member.offset_data)
        data = tar.fileobj.read(member.size)
        if len(data) != member.size:
            raise tarfile.ReadError("unexpected end of data")
        return data
    handle = tar.extractfile(member)
    assert handle is not None
    with handle:
        return handle.read()


def _require(archive: Path, folders: dict[str, Path], files: dict[str, int]) -> None:
    for task, count in files.items():
        found = sorted(p.name for p in folders[task].iterdir())
        if len(found) != count:
            raise DataError(archive, f"expected {count} {task} files in the archive, found {found}")


def _zip_members(archive: Path, desc: str) -> Iterator[tuple[str, Callable[[], BinaryIO]]]:
    """(normalised name, opener) of every regular file of a zip, refusing unsafe names as the tar path does
    (a zip marks a symlink only in the Unix mode bits of its external attributes)."""
    with zipfile.ZipFile(archive) as zf:
        for info in progress(zf.infolist(), desc):
            parts = name_parts(info.filename, archive)
            if stat.S_ISLNK(info.external_attr >> 16):
                raise DataError(archive, f"unsafe archive member {info.filename!r}: link")
            if not info.is_dir():
                yield "/".join(parts), lambda info=info: zf.open(info)


def _is_zip(archive: Path) -> bool:
    if not archive.is_file():
        raise DataError(archive, "archive not found (run `pdelra fetch` first)")
    with open(archive, "rb") as handle:
        return handle.read(4) == ZIP_MAGIC


def _files(archive: Path, desc: str) -> Iterator[tuple[str, Callable[[], BinaryIO]]]:
    """(name, opener) of every regular file of a tar or zip archive, streamed, unsafe members refused."""
    if _is_zip(archive):
        yield from _zip_members(archive, desc)
        return
    with _stream(archive) as tar:
        for member, parts in _members(tar, archive, desc):
            if member.isfile():
                yield "/".join(parts), lambda member=member: tar.extractfile(member)


def _extract_matching(
    pattern: re.Pattern[str], task: str, expected: int | None
) -> Callable[[Path, Path], dict]:
    def run(archive: Path, out: Path) -> dict[str, int]:
        count = 0
        with atomic_dir(out / task) as tmp:
            for name, opener in _files(archive, task):
                if pattern.match(name):
                    target = tmp / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with opener() as source, open(target, "wb") as handle:
                        shutil.copyfileobj(source, handle, 1 << 20)
                    count += 1
            if count == 0 or (expected is not None and count != expected):
                raise DataError(archive, f"found {count} {task} files matching {pattern.pattern}")
        log.info("%s: kept %d files", task, count)
        return {task: count}

    return run


_EXTRACTORS = {
    "lra_release": _extract_lra,
    "imdb": _extract_matching(IMDB_FILE, "text", None),
    "cifar10": _extract_matching(CIFAR_FILE, "image", 7),
    "agnews": _extract_matching(AGNEWS_FILE, "agnews", 4),
    "sst2": _extract_matching(SST2_FILE, "sst2", 3),
    "wikitext103": _extract_matching(WIKITEXT_FILE, "wikitext103", 3),
}


def extract_command(args: argparse.Namespace) -> int:
    """`pdelra extract SOURCE --archive ARCHIVE --out DIR` (pdelra.data.cli)."""
    extract(args.source, Path(args.archive), Path(args.out))
    return 0
