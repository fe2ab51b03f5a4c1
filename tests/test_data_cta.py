"""The official CTA experiments' data: AG News, SST-2 and WikiText-103 fetched through DVC from a loopback
server in their release layouts, extracted, tokenised with the BERT WordPiece vocabulary and a Llama-style
tokenizer.json, packed, subset; and the offline generators' formats."""

from __future__ import annotations

import csv
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from archives import (
    AGNEWS_TRAIN,
    BERT_VOCAB,
    SST2_DEV,
    SST2_TRAIN,
    WIKITEXT_LINES,
    aclimdb_archive,
    agnews_archive,
    bert_vocab_file,
    llama_tokenizer_file,
    sst2_archive,
    wikitext_archive,
)
from test_data_fetch import project, server  # noqa: F401  (fixtures: a DVC project, a loopback server)

from pdelra.data import agnews, cta, sst2, tokenize, wikitext
from pdelra.data.errors import DataError
from pdelra.data.extract import extract
from pdelra.data.fetch import fetch
from pdelra.data.generate import generate
from pdelra.data.store import load_split, read_manifest

# Served name → (builder, download path under data/raw/downloads, checksum published upstream?)
SOURCES = {
    "ag_news_csv.tgz": (agnews_archive, "agnews.tar.gz", False),
    "SST-2.zip": (sst2_archive, "sst2.tar.gz", True),  # stored as .tar.gz like every workflow download
    "wikitext-103-v1.zip": (wikitext_archive, "wikitext103.tar.gz", True),
    "vocab.txt": (bert_vocab_file, "bert_uncased_vocab.txt", True),
    "tokenizer.json": (llama_tokenizer_file, "tinyllama_tokenizer.json", False),
}
ID = {token: i for i, token in enumerate(BERT_VOCAB)}


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def words(split, row: int) -> list[str]:
    return [BERT_VOCAB[i] for i in split.tokens[row, : split.lengths[row]]]


def extract_and_preprocess(downloads: Path, work: Path) -> None:
    """Release-layout downloads (named as the workflow names them) → raw folders → processed arrays."""
    raw = work / "raw"
    assert extract("agnews", downloads / "agnews.tar.gz", raw) == {"agnews": 4}
    assert extract("sst2", downloads / "sst2.tar.gz", raw) == {"sst2": 3}
    assert extract("wikitext103", downloads / "wikitext103.tar.gz", raw) == {"wikitext103": 3}
    assert sorted(p.name for p in (raw / "sst2/SST-2").iterdir()) == ["dev.tsv", "test.tsv", "train.tsv"]

    vocab = downloads / "bert_uncased_vocab.txt"
    manifest = cta.preprocess_cta("agnews", raw / "agnews", vocab, work / "proc/agnews", max_length=8)
    assert manifest["counts"] == {"train": 4, "val": 2, "test": 2} and manifest["num_classes"] == 4
    assert manifest["tokenizer"]["md5"] == md5(vocab) and manifest["pad_id"] == 0
    train = load_split(work / "proc/agnews", "train")
    assert train.labels.tolist() == [2, 3, 0, 1]  # class 1-4 → 0-3
    # "Phelps Wins Gold Michael Phelps won the gold medal.": words outside the tiny vocab are [UNK]
    assert words(train, 3) == ["[CLS]", "phelps", "[UNK]", "[UNK]", "[UNK]", "phelps", "won", "[SEP]"]
    assert manifest["truncated"]["train"] == 4
    assert load_split(work / "proc/agnews", "val").labels.tolist() == [1, 0]  # val = test, as the authors

    manifest = cta.preprocess_cta("sst2", raw / "sst2", vocab, work / "proc/sst2")
    assert manifest["counts"] == {"train": 4, "val": 2, "test": 2} and manifest["max_length"] == 128
    train = load_split(work / "proc/sst2", "train")
    assert train.labels.tolist() == [label for _, label in SST2_TRAIN]
    expected = ["[CLS]", "it", "'", "s", "a", "charming", "[UNK]", "[UNK]", "[UNK]", "journey", ".", "[SEP]"]
    assert words(train, 3) == expected and train.tokens[3, len(expected) :].max() == ID["[PAD]"]
    assert load_split(work / "proc/sst2", "test").labels.tolist() == [label for _, label in SST2_DEV]

    tokenizer_file = downloads / "tinyllama_tokenizer.json"
    manifest = cta.preprocess_cta("wikitext103", raw / "wikitext103", tokenizer_file, work / "proc/wt", 4)
    from tokenizers import Tokenizer  # the library's own encoding of each non-blank line, then </s>

    library = Tokenizer.from_file(str(tokenizer_file))
    lines = [line + "\n" for line in WIKITEXT_LINES if line.strip()]
    stream = [i for line in lines for i in [*library.encode(line, add_special_tokens=False).ids, 2]]
    blocks = load_split(work / "proc/wt", "val")
    assert blocks.tokens.tolist() == np.reshape(stream[: len(stream) // 4 * 4], (-1, 4)).tolist()
    assert manifest["lm"]["dropped_tokens"]["val"] == len(stream) % 4 and (blocks.lengths == 4).all()
    assert manifest["tokenizer"]["eos_id"] == 2 and manifest["vocab_size"] == 20


def test_release_layouts_extract_and_preprocess(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    for build, target, _ in SOURCES.values():
        build(downloads / target)
    extract_and_preprocess(downloads, tmp_path)


@pytest.mark.slow  # five `dvc import-url` runs: 15-50 s on 2 shared cores
def test_fetch_real_layouts_from_loopback_through_dvc(server: tuple[str, Path], project: Path) -> None:  # noqa: F811
    base, served = server
    downloads = project / "data/raw/downloads"
    for name, (build, target, published) in SOURCES.items():
        build(served / name)
        checksum = md5(served / name)
        assert fetch(f"{base}/{name}", downloads / target, checksum if published else None) == checksum
        record = yaml.safe_load((downloads / f"{target}.dvc").read_text())
        assert record["deps"][0]["path"] == f"{base}/{name}" and record["outs"][0]["md5"] == checksum
    extract_and_preprocess(downloads, project)


def test_tokenizers_give_the_known_pieces_of_a_known_vocab(tmp_path: Path) -> None:
    bert_vocab_file(tmp_path / "vocab.txt")
    tokenizer, identity = tokenize.load_wordpiece(tmp_path / "vocab.txt", max_length=7)
    assert identity["special_ids"] == {"[PAD]": 0, "[UNK]": 2, "[CLS]": 3, "[SEP]": 4, "[MASK]": 5}
    texts = ["Wall St. walls", "The CAT sat on the mat .", "cat"]  # lower-cased; "walls" = "wall" "##s"
    tokens, lengths, truncated = tokenize.encode_padded(tokenizer, texts, 7, 0, np.dtype(np.uint16))
    assert tokens.tolist() == [[3, ID["wall"], ID["st"], ID["."], ID["wall"], ID["##s"], 4],
                               [3, ID["the"], ID["cat"], ID["sat"], ID["on"], ID["the"], 4],  # [SEP] kept
                               [3, ID["cat"], 4, 0, 0, 0, 0]]  # fmt: skip
    assert lengths.tolist() == [7, 7, 3] and truncated == 1  # only "... mat ." lost pieces

    llama_tokenizer_file(tmp_path / "tokenizer.json")
    lm, identity = tokenize.load_lm_tokenizer(tmp_path / "tokenizer.json")
    # " the cat sat . \n" → "▁▁the▁cat▁sat▁.▁\n": Llama's prefix "▁", the merges, "\n" by byte fallback
    assert tokenize.encode_lines(lm, [" the cat sat . \n"], identity["eos_id"]) == [
        [4, 14, 17, 19, 4, 11, 4, 3, 2]
    ]

    (tmp_path / "bad.txt").write_text("[PAD]\n[UNK]\nthe\n")
    with pytest.raises(
        DataError,
        match=r"bad\.txt: wordpiece vocabulary lacks the special token\(s\) \[CLS\], \[SEP\], \[MASK\]$",
    ):
        tokenize.load_wordpiece(tmp_path / "bad.txt", 8)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DataError, match=r"bad\.json: not a tokenizers tokenizer\.json"):
        tokenize.load_lm_tokenizer(tmp_path / "bad.json")


def test_lm_blocks_are_packed_per_map_batch_and_remember_their_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks, starts, dropped = cta.pack_blocks([[1, 2, 3], [4, 5], [6, 7, 8, 9]], [10, 12, 14], 4)
    assert blocks.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]] and starts.tolist() == [10, 12] and dropped == 1

    wikitext_archive(tmp_path / "wt.zip")
    extract("wikitext103", tmp_path / "wt.zip", tmp_path / "raw")
    llama_tokenizer_file(tmp_path / "tokenizer.json")
    whole = cta.preprocess_cta("wikitext103", tmp_path / "raw/wikitext103", tmp_path / "tokenizer.json",
                               tmp_path / "whole", max_length=4)  # fmt: skip
    monkeypatch.setattr(cta, "HF_MAP_BATCH", 1)  # each line its own batch: every line's remainder dropped
    apart = cta.preprocess_cta("wikitext103", tmp_path / "raw/wikitext103", tmp_path / "tokenizer.json",
                               tmp_path / "apart", max_length=4)  # fmt: skip
    assert apart["counts"]["train"] < whole["counts"]["train"]
    assert apart["lm"]["dropped_tokens"]["train"] > whole["lm"]["dropped_tokens"]["train"]
    starts = load_split(tmp_path / "apart", "train").labels.tolist()
    assert set(starts) <= {2, 4, 6, 8} and starts == sorted(starts)  # file lines of the non-blank lines


def test_subset_keeps_a_seeded_fraction_of_train(tmp_path: Path) -> None:
    generate("sst2", tmp_path / "raw", {"n_train": 200, "n_val": 20, "n_test": 5})
    generate("wordpiece", tmp_path / "vocab", {"n_texts": 50})
    cta.preprocess_cta("sst2", tmp_path / "raw", tmp_path / "vocab/vocab.txt", tmp_path / "full")
    a = cta.subset(tmp_path / "full", tmp_path / "a", 0.05, seed=1)
    cta.subset(tmp_path / "full", tmp_path / "b", 0.05, seed=1)
    c = cta.subset(tmp_path / "full", tmp_path / "c", 0.05, seed=2)
    assert a["counts"] == {"train": 10, "val": 20, "test": 20} == c["counts"]  # int(200 * 0.05)
    rows = lambda name: load_split(tmp_path / name, "train").tokens.tolist()  # noqa: E731
    full = rows("full")
    assert rows("a") == rows("b") != rows("c") and all(row in full for row in rows("a"))
    assert (
        load_split(tmp_path / "a", "val").tokens.tolist()
        == load_split(tmp_path / "full", "val").tokens.tolist()
    )
    assert a["subset_of"]["rows_of"] == 200 and a["subset_of"]["fraction"] == 0.05
    with pytest.raises(DataError, match=r"0\.001 of 200 training rows is no row"):
        cta.subset(tmp_path / "full", tmp_path / "d", 0.001, seed=0)
    assert not (tmp_path / "d").exists()


def test_character_level_imdb_builds_the_official_vocabulary(tmp_path: Path) -> None:
    aclimdb_archive(tmp_path / "imdb.tgz")  # train: 10 x "bad film" (neg, read first), 10 x "good"
    extract("imdb", tmp_path / "imdb.tgz", tmp_path / "raw")
    manifest = cta.preprocess_cta("imdb_char", tmp_path / "raw/text", None, tmp_path / "out", max_length=3)
    # counts d 20, o 20, then 10 each in order of first appearance; "c", "n", "é" are unknown (<UNK> = 1)
    assert manifest["vocab"] == ["<PAD>", "<UNK>", "d", "o", "b", "a", " ", "f", "i", "l", "m", "g"]
    test = load_split(tmp_path / "out", "test")  # neg "no", pos "café"
    assert test.tokens.tolist() == [[1, 3, 0], [1, 5, 7]] and test.lengths.tolist() == [2, 3]
    assert test.labels.tolist() == [0, 1] and manifest["truncated"]["test"] == 1
    with pytest.raises(DataError, match="imdb needs --tokenizer"):
        cta.preprocess_cta("imdb", tmp_path / "raw/text", None, tmp_path / "wp")


def test_val_fraction_carves_val_from_train(tmp_path: Path) -> None:
    agnews_archive(tmp_path / "ag.tgz")
    extract("agnews", tmp_path / "ag.tgz", tmp_path / "raw")
    bert_vocab_file(tmp_path / "vocab.txt")
    manifest = cta.preprocess_cta("agnews", tmp_path / "raw/agnews", tmp_path / "vocab.txt", tmp_path / "out",
                                  val_fraction=0.25)  # fmt: skip
    assert manifest["counts"] == {"train": 3, "val": 1, "test": 2} and "deviation" in manifest["val_split"]


def test_generators_write_the_release_formats_with_signal(tmp_path: Path) -> None:
    generate("agnews", tmp_path / "ag", {"n_train": 380, "n_val": 20, "n_test": 40})
    frame = pd.read_csv(
        tmp_path / "ag/ag_news_csv/train.csv", header=None, names=["class", "title", "description"]
    )
    assert len(frame) == 400 and frame["class"].value_counts().to_dict() == {1: 100, 2: 100, 3: 100, 4: 100}
    assert frame["description"].str.contains('"').any()  # quoted phrases survive the release's quoting
    assert (tmp_path / "ag/ag_news_csv/classes.txt").read_text().split() == [
        "World",
        "Sports",
        "Business",
        "Sci/Tech",
    ]
    rows = list(agnews.read_rows(tmp_path / "ag/ag_news_csv/train.csv"))
    topic = {w: k for k, ws in enumerate(agnews.TOPIC_WORDS) for w in ws}

    def guess(text: str) -> int:
        return np.bincount([topic[w] for w in text.lower().split() if w in topic], minlength=4).argmax()

    assert (
        np.mean([guess(text.replace(",", " ").replace('"', " ")) == label for _, text, label in rows]) > 0.8
    )

    generate("sst2", tmp_path / "sst", {"n_train": 200, "n_val": 30, "n_test": 10})
    train = pd.read_csv(tmp_path / "sst/SST-2/train.tsv", sep="\t", quoting=csv.QUOTE_NONE)
    test = pd.read_csv(tmp_path / "sst/SST-2/test.tsv", sep="\t", quoting=csv.QUOTE_NONE)
    assert list(train.columns) == ["sentence", "label"] and list(test.columns) == ["index", "sentence"]
    assert len(train) == 200 and set(train["label"]) == {0, 1} and len(test) == 10
    score = lambda s: sum(w in sst2.POSITIVE for w in s.split()) - sum(w in sst2.NEGATIVE for w in s.split())  # noqa: E731
    decided = [
        (score(s) > 0) == bool(label)
        for s, label in zip(train["sentence"], train["label"], strict=True)
        if score(s)
    ]
    assert np.mean(decided) > 0.8

    generate("wikitext103", tmp_path / "wt", {"n_train": 3, "n_val": 1, "n_test": 1})
    lines = (tmp_path / "wt/wikitext-103/wiki.train.tokens").read_text().split("\n")[:-1]
    assert lines[0] == " " and lines[1].startswith(" = ") and lines[1].endswith(" = ") and lines[2] == " "
    assert sum(line.startswith(" = = ") for line in lines) == 3
    assert all(line.startswith(" ") and line.endswith(" ") for line in lines)


@pytest.mark.parametrize("source", ["agnews", "sst2", "wikitext103", "wordpiece", "bpe"])
def test_generated_sources_and_tokenizers_are_deterministic(source: str, tmp_path: Path) -> None:
    params = {"n_texts": 2} if source in ("wordpiece", "bpe") else {"n_train": 20, "n_val": 4, "n_test": 4}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        generate(source, tmp_path / name, {**params, "seed": seed})
    digest = lambda name: [md5(p) for p in sorted((tmp_path / name).rglob("*")) if p.is_file()]  # noqa: E731
    assert digest("a") == digest("b") != digest("c")


def test_generated_text_needs_no_unknown_pieces(tmp_path: Path) -> None:
    generate("agnews", tmp_path / "ag", {"n_train": 40, "n_val": 0, "n_test": 8, "seed": 5})
    generate("wordpiece", tmp_path / "vocab", {"seed": 0})
    manifest = cta.preprocess_cta("agnews", tmp_path / "ag", tmp_path / "vocab/vocab.txt", tmp_path / "out")
    tokens = np.asarray(load_split(tmp_path / "out", "train").tokens)
    assert not (tokens == manifest["tokenizer"]["special_ids"]["[UNK]"]).any()
    assert any(piece.startswith("##") for piece in (tmp_path / "vocab/vocab.txt").read_text().split())

    generate("wikitext103", tmp_path / "wt", {"n_train": 4, "n_val": 2, "n_test": 2, "seed": 5})
    generate("bpe", tmp_path / "bpe", {"seed": 0})
    manifest = cta.preprocess_cta("wikitext103", tmp_path / "wt", tmp_path / "bpe/tokenizer.json",
                                  tmp_path / "lm", max_length=16)  # fmt: skip
    assert (
        manifest["tokenizer"]["special_ids"] == {"</s>": 2}
        and read_manifest(tmp_path / "lm")["counts"]["val"]
    )


def _zip_with(path: Path, name: str, data: bytes = b"x", mode: int | None = None) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo(name)
        if mode is not None:
            info.external_attr = mode << 16
        zf.writestr(info, data)


def test_zip_extraction_refuses_unsafe_truncated_and_raw_layouts(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    sst2_archive(tmp_path / "good.zip")
    extract("sst2", tmp_path / "good.zip", raw)
    before = (raw / "sst2/SST-2/train.tsv").read_bytes()
    for name, mode in (("../evil.tsv", None), ("/etc/evil", None), ("SST-2/link", 0o120777)):
        _zip_with(tmp_path / "bad.zip", name, mode=mode)
        with pytest.raises(DataError, match=f"unsafe archive member '{name}'"):
            extract("sst2", tmp_path / "bad.zip", raw)
    data = (tmp_path / "good.zip").read_bytes()
    (tmp_path / "cut.zip").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="truncated or corrupt"):
        extract("sst2", tmp_path / "cut.zip", raw)
    assert (raw / "sst2/SST-2/train.tsv").read_bytes() == before  # earlier output untouched

    _zip_with(tmp_path / "raw.zip", "wikitext-103-raw/wiki.train.raw")  # the -raw release: not what CTA uses
    with pytest.raises(DataError, match="found 0 wikitext103 files"):
        extract("wikitext103", tmp_path / "raw.zip", raw)


def test_malformed_release_rows_are_named_by_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text(AGNEWS_TRAIN[0] + '\n"5","title","text"\n')
    with pytest.raises(DataError, match=r"train\.csv:2: class '5' is not 1-4"):
        list(agnews.read_rows(tmp_path / "train.csv"))
    (tmp_path / "dev.tsv").write_text("sentence\tlabel\ngood film \tpositive\n")
    with pytest.raises(DataError, match=r"dev\.tsv:2: expected `sentence<TAB>label`"):
        list(sst2.read_labeled(tmp_path / "dev.tsv"))
    (tmp_path / "wiki.tokens").write_bytes(b" = T = \n \xff\n")
    with pytest.raises(DataError, match=r"wiki\.tokens: not UTF-8"):
        list(wikitext.read_lines(tmp_path / "wiki.tokens"))
    tar = tmp_path / "ag.tgz"
    with tarfile.open(tar, "w:gz") as handle:
        info = tarfile.TarInfo("ag_news_csv/train.csv")
        info.size = 1
        handle.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(DataError, match="found 1 agnews files"):
        extract("agnews", tar, tmp_path / "raw")
