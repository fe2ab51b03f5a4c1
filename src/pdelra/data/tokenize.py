"""The two tokenizers of the official CTA experiments, read with Hugging Face's `tokenizers` library.

- WordPiece (classification, Table 1): the BERT uncased vocabulary `vocab.txt` (30,522 entries). The official
  code calls `AutoTokenizer.from_pretrained("bert-base-uncased")(texts, truncation=True,
  padding="max_length", max_length=L)`: lower-cased, accents stripped, "[CLS] text [SEP]" cut so that the
  whole row, specials included, is at most L tokens, padded with [PAD]. `tokenizers.BertWordPieceTokenizer`
  over the same vocab.txt with `lowercase=True` is that pipeline (BertNormalizer, BertPreTokenizer,
  WordPiece with "##", the [CLS]/[SEP] template); truncation is the library's own.
- The TinyLlama tokenizer (WikiText-103 LM): its `tokenizer.json` (Llama's 32,000-piece SentencePiece BPE),
  read with `Tokenizer.from_file`; the official code encodes each line with `add_special_tokens=False` and
  appends the end-of-sequence token `</s>`.

Offline stand-ins come from generated text: a small vocab.txt with BERT's special tokens (built from the
words the library's BERT pre-tokenizer finds) and a small SentencePiece-style BPE tokenizer.json with Llama's
`<unk> <s> </s>`, trained with the library's own BPE trainer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from pdelra.data.errors import DataError
from pdelra.data.hashing import file_digest

WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
LLAMA_SPECIALS = ("<unk>", "<s>", "</s>")
EOS_TOKEN = "</s>"
ENCODE_BATCH = 4096  # texts handed to the library at once (it encodes a batch on all cores)


def _identity(path: Path, kind: str, tokenizer: Any, specials: Iterable[str]) -> dict[str, Any]:
    """What the manifest records of a tokenizer: its file's name and md5, its size and special ids."""
    ids = {}
    for token in specials:
        ids[token] = tokenizer.token_to_id(token)
        if ids[token] is None:
            raise DataError(path, f"{kind} vocabulary has no {token} token")
    return {"kind": kind, "file": path.name, "md5": file_digest(path, "md5"),
            "vocab_size": tokenizer.get_vocab_size(with_added_tokens=True), "special_ids": ids}  # fmt: skip


def load_wordpiece(vocab_file: Path, max_length: int) -> tuple[Any, dict[str, Any]]:
    """The BERT uncased pipeline over `vocab_file`, truncating rows to `max_length` tokens with [CLS] and
    [SEP] kept; returns (tokenizer, identity for the manifest)."""
    from tokenizers import BertWordPieceTokenizer

    if not vocab_file.is_file():
        raise DataError(
            vocab_file, "WordPiece vocabulary not found (fetch it or `pdelra generate wordpiece`)"
        )
    if max_length < 2:
        raise DataError(None, f"max length {max_length} leaves no room for [CLS] and [SEP]")
    entries = set(vocab_file.read_text(encoding="utf-8", errors="replace").splitlines())
    missing = [token for token in WORDPIECE_SPECIALS if token not in entries]
    if missing:  # checked here: the library's own message does not name the file
        raise DataError(vocab_file, f"wordpiece vocabulary lacks the special token(s) {', '.join(missing)}")
    try:
        tokenizer = BertWordPieceTokenizer(str(vocab_file), lowercase=True)
    except Exception as err:  # the library raises plain Exception for an unreadable vocabulary
        raise DataError(vocab_file, f"not a WordPiece vocab.txt ({err})") from err
    identity = _identity(vocab_file, "wordpiece", tokenizer, WORDPIECE_SPECIALS)
    tokenizer.enable_truncation(max_length)
    return tokenizer, {**identity, "lowercase": True, "template": "[CLS] $A [SEP]"}


def load_lm_tokenizer(tokenizer_file: Path) -> tuple[Any, dict[str, Any]]:
    """A `tokenizer.json` (TinyLlama's or the generated one); returns (tokenizer, identity)."""
    from tokenizers import Tokenizer

    if not tokenizer_file.is_file():
        raise DataError(tokenizer_file, "tokenizer.json not found (fetch it or `pdelra generate bpe`)")
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as err:
        raise DataError(tokenizer_file, f"not a tokenizers tokenizer.json ({err})") from err
    identity = _identity(tokenizer_file, "tokenizer.json", tokenizer, (EOS_TOKEN,))
    return tokenizer, {**identity, "eos_id": identity["special_ids"][EOS_TOKEN]}


def encode_padded(
    tokenizer: Any, texts: list[str], max_length: int, pad_id: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, int]:
    """(tokens (N, max_length) padded with pad_id, lengths (N,), rows truncated) of a truncating tokenizer."""
    tokens = np.full((len(texts), max_length), pad_id, dtype=dtype)
    lengths = np.zeros(len(texts), dtype=np.int32)
    truncated = 0
    for start in range(0, len(texts), ENCODE_BATCH):
        for i, encoding in enumerate(tokenizer.encode_batch(texts[start : start + ENCODE_BATCH]), start):
            ids = encoding.ids
            tokens[i, : len(ids)] = ids
            lengths[i] = len(ids)
            truncated += bool(encoding.overflowing)
    return tokens, lengths, truncated


def encode_lines(tokenizer: Any, lines: list[str], eos_id: int | None) -> list[list[int]]:
    """Token ids of each line without special tokens, `eos_id` appended when given (the official add_eos)."""
    encoded = tokenizer.encode_batch(lines, add_special_tokens=False)
    tail = [] if eos_id is None else [eos_id]
    return [encoding.ids + tail for encoding in encoded]


def build_wordpiece_vocab(texts: Iterable[str], out_dir: Path, split_longer_than: int) -> Path:
    """Write out_dir/vocab.txt: BERT's special tokens, every character alone and as "##c", then every word of
    `texts` (split by BERT's own normalizer and pre-tokenizer), a word longer than `split_longer_than` only as
    its head plus a "##" tail, so that continuation pieces are exercised. Built, not trained: the library's
    WordPiece trainer breaks frequency ties differently from run to run, and a generated input must have
    the same bytes every time (its md5 is the tokenizer's identity in the manifest)."""
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    normalizer, pre_tokenizer = BertNormalizer(lowercase=True), BertPreTokenizer()
    words: set[str] = set()
    for text in texts:
        words.update(word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({c for word in words for c in word})
    pieces: set[str] = set()
    for word in words:
        long = len(word) > split_longer_than
        pieces.update((word[:split_longer_than], "##" + word[split_longer_than:]) if long else (word,))
    vocab = dict.fromkeys([*WORDPIECE_SPECIALS, *chars, *(f"##{c}" for c in chars), *sorted(pieces)])
    path = out_dir / "vocab.txt"
    path.write_text("".join(f"{token}\n" for token in vocab), encoding="utf-8")
    return path


def train_bpe(texts: Iterable[str], out_dir: Path, vocab_size: int) -> Path:
    """Train a SentencePiece-style BPE (Llama's family) with `<unk> <s> </s>` = 0, 1, 2; write
    out_dir/tokenizer.json."""
    from tokenizers import SentencePieceBPETokenizer

    tokenizer = SentencePieceBPETokenizer(unk_token=LLAMA_SPECIALS[0])
    tokenizer.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=1,
                                  special_tokens=list(LLAMA_SPECIALS), show_progress=False)  # fmt: skip
    path = out_dir / "tokenizer.json"
    tokenizer.save(str(path))
    return path
