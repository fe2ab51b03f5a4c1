"""Archives in the real release layouts, built by hand (not with the project's generators), and a loopback
HTTP server that serves them. Shared by the data tests and the real-source workflow test."""

from __future__ import annotations

import functools
import http.server
import io
import json
import tarfile
import threading
import zipfile
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


# AG News rows as released: no header, every field quoted, a quote inside doubled, class 1-4.
AGNEWS_TRAIN = [
    '"3","Wall St. Bears Claw Back Into the Black (Reuters)","Reuters - Short-sellers, Wall Street\'s '
    'dwindling\\band of ultra-cynics, are seeing green again."',
    '"4","Google IPO Auction Off to Rocky Start","The auction for Google\'s ""IPO"" started."',
    '"1","Iraq Halts Oil Exports","Iraq halted oil exports from the main southern pipeline."',
    '"2","Phelps Wins Gold","Michael Phelps won the gold medal."',
]  # fmt: skip
AGNEWS_TEST = ['"2","Sharapova Wins","Maria Sharapova won, again."', '"1","Talks Fail","Peace talks failed."']


def agnews_archive(path: Path) -> None:
    """ag_news_csv.tgz: ag_news_csv/{train,test}.csv, classes.txt, readme.txt, as Xiang Zhang's release."""
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "ag_news_csv/train.csv", ("\n".join(AGNEWS_TRAIN) + "\n").encode())
        _add(tar, "ag_news_csv/test.csv", ("\n".join(AGNEWS_TEST) + "\n").encode())
        _add(tar, "ag_news_csv/classes.txt", b"World\nSports\nBusiness\nSci/Tech\n")
        _add(tar, "ag_news_csv/readme.txt", b"AG's News Topic Classification Dataset\n")


# SST-2 rows as GLUE releases them: `sentence<TAB>label`, PTB-tokenised, a trailing space before the tab.
SST2_TRAIN = [
    ("hide new secretions from the parental units ", 0),
    ("contains no wit , only labored gags ", 0),
    ("that loves its characters ", 1),
    ("it 's a charming and often affecting journey . ", 1),
]
SST2_DEV = [("unflinchingly bleak and desperate ", 0), ("the acting , costumes , music are all fine . ", 1)]


def sst2_archive(path: Path) -> None:
    """SST-2.zip: SST-2/{train,dev,test}.tsv with their headers, folder entries and SST-2/original/."""
    labeled = lambda rows: "sentence\tlabel\n" + "".join(f"{s}\t{label}\n" for s, label in rows)  # noqa: E731
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("SST-2/", b"")
        zf.writestr("SST-2/train.tsv", labeled(SST2_TRAIN))
        zf.writestr("SST-2/dev.tsv", labeled(SST2_DEV))
        zf.writestr("SST-2/test.tsv", "index\tsentence\n0\tuneasy mishmash of styles and genres .\n")
        zf.writestr("SST-2/original/README.txt", "Stanford Sentiment Treebank\n")


# WikiText-103 lines as released: " = Title = " headings, blank lines " ", paragraphs with @-@ and <unk>.
WIKITEXT_LINES = [" ", " = Valkyria Chronicles III = ", " ", " the cat sat on the mat . ", " ",
                  " = = Gameplay = = ", " ", " the dog sat @-@ on the <unk> . ", " "]  # fmt: skip


def wikitext_archive(path: Path) -> None:
    """wikitext-103-v1.zip: wikitext-103/wiki.{train,valid,test}.tokens, each the lines above."""
    text = "".join(f"{line}\n" for line in WIKITEXT_LINES)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("wikitext-103/", b"")
        for split in ("train", "valid", "test"):
            zf.writestr(f"wikitext-103/wiki.{split}.tokens", text)


# BERT's vocab.txt layout (one token a line, id = line index): [PAD] first, [unused] slots, the specials.
BERT_VOCAB = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
              ".", ",", "'", "s", "wall", "st", "##s", "a", "charming", "journey", "it", "phelps",
              "won"]  # fmt: skip


def bert_vocab_file(path: Path) -> None:
    path.write_text("".join(f"{token}\n" for token in BERT_VOCAB))


# A Llama-style tokenizer.json by hand (TinyLlama's layout: Prepend + Replace normalizer, no pre-tokenizer,
# BPE with byte fallback, <unk> <s> </s> = 0 1 2): the pieces of " the cat sat ." and a byte for "\n".
LLAMA_VOCAB = ["<unk>", "<s>", "</s>", "<0x0A>", "\u2581", "t", "h", "e", "c", "a", "s", ".", "\u2581t", "he",
               "\u2581the", "at", "\u2581c", "\u2581cat", "\u2581s", "\u2581sat"]  # fmt: skip
LLAMA_MERGES = ["\u2581 t", "h e", "\u2581t he", "a t", "\u2581 c", "\u2581c at", "\u2581 s", "\u2581s at"]


def llama_tokenizer_file(path: Path) -> None:
    def special(i: int, token: str) -> dict:
        flags = dict.fromkeys(("single_word", "lstrip", "rstrip", "normalized"), False)
        return {"id": i, "content": token, **flags, "special": True}

    begin = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    replace = lambda a, b: {"type": "Replace", "pattern": {"String": a}, "content": b}  # noqa: E731
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, replace(" ", "\u2581")],
        },
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [begin, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [begin, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [
                replace("\u2581", " "),
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "vocab": {token: i for i, token in enumerate(LLAMA_VOCAB)},
            "merges": LLAMA_MERGES,
        },
    }
    path.write_text(json.dumps(spec, ensure_ascii=False))


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
