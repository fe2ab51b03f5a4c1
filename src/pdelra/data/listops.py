"""ListOps (Nangia & Bowman 2018, as released in LRA): the expression language, its evaluation, and the
generator, a re-implementation of LRA's `listops.py` (lra_benchmarks/data/listops.py) with a seed.

Released form of one expression, fully parenthesised by left-associative pairing:
    MAX(2, MIN(9, 4))  ->  "( ( ( [MAX 2 ) ( ( ( [MIN 9 ) 4 ) ] ) ) ] )"
Tokenisation (as LRA) deletes the parentheses and splits on whitespace: "[MAX 2 [MIN 9 4 ] ]".
"""

from __future__ import annotations

import csv
import itertools
import mmap
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pdelra.data.errors import DataError
from pdelra.data.progress import progress

MIN, MAX, MED, SUM_MOD, END = "[MIN", "[MAX", "[MED", "[SM", "]"
OPERATORS = (MIN, MAX, MED, SUM_MOD)
VALUE_P = 0.25  # below max depth, a node is an operator with this probability (LRA's VALUE_P)
PAD = "<pad>"
# Token id 0 is padding; the 15 tokens of the language follow.
VOCAB = (PAD, *OPERATORS, END, *(str(v) for v in range(10)))
TOKEN_IDS = {token: i for i, token in enumerate(VOCAB)}
NUM_CLASSES = 10
HEADER = ("Source", "Target")
SPLIT_FILES = {"train": "basic_train.tsv", "val": "basic_val.tsv", "test": "basic_test.tsv"}

# A tree as LRA builds it: nested pairs (left, right), leaves are operator strings, END, or ints 0-9.
Tree = Any


def tokens(source: str) -> list[str]:
    """The LRA token sequence of a released expression: parentheses deleted, whitespace split."""
    return source.replace("(", " ").replace(")", " ").split()


def _apply(op: str, args: list[int]) -> int:
    if op == MIN:
        return min(args)
    if op == MAX:
        return max(args)
    if op == MED:
        # int(np.median(args)) without numpy: the mean of the middle pair, truncated.
        ordered = sorted(args)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else int((ordered[mid - 1] + ordered[mid]) / 2)
    return sum(args) % 10  # SUM_MOD


def evaluate(source: str) -> int:
    """Value (0-9) of a ListOps expression in its released string form; ValueError if it is malformed."""
    stack: list[tuple[str, list[int]]] = []
    result: int | None = None
    for token in tokens(source):
        if result is not None:
            raise ValueError(f"tokens after the end of the expression at {token!r}")
        if token in OPERATORS:
            stack.append((token, []))
        elif token == END:
            if not stack:
                raise ValueError("']' without an open operator")
            op, args = stack.pop()
            if not args:
                raise ValueError(f"{op} closed without arguments")
            value = _apply(op, args)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        elif token.isdigit() and len(token) == 1:
            if not stack:  # a bare value is a whole expression only if it stands alone
                result = int(token)
            else:
                stack[-1][1].append(int(token))
        else:
            raise ValueError(f"unknown token {token!r}")
    if stack or result is None:
        raise ValueError("unterminated expression")
    return result


# ------------------------------------------------------------------------------------------- generator


def generate_tree(rng: random.Random, depth: int, max_depth: int, max_args: int) -> tuple[Tree, int]:
    """LRA's generate_tree: returns (tree, length) where length counts 2 per operator, 1 per value."""
    r = rng.random() if depth < max_depth else 1.0
    if r > VALUE_P:
        return rng.choice(range(10)), 1
    length = 2
    values = []
    for _ in range(rng.randint(2, max_args)):
        sub_tree, sub_length = generate_tree(rng, depth + 1, max_depth, max_args)
        values.append(sub_tree)
        length += sub_length
    tree: Tree = (rng.choice(OPERATORS), values[0])
    for value in values[1:]:
        tree = (tree, value)
    return (tree, END), length


def to_string(tree: Tree) -> str:
    """LRA's to_string: every pair becomes '( left right )'."""
    if isinstance(tree, tuple):
        return f"( {to_string(tree[0])} {to_string(tree[1])} )"
    return str(tree)


def reachable_lengths(max_depth: int, max_args: int, below: int, stop_above: int | None = None) -> set[int]:
    """Every length < `below` that generate_tree can return (not every length is: 2 and 3 never are).

    An indicator array per depth, from the leaves up: a value has length 1; an operator adds 2 to the summed
    lengths of its 2…max_args operands (a sumset: a convolution of indicators, by FFT). Capped at `below`,
    so LRA's unbounded depth-10 lengths stay cheap to enumerate. With `stop_above`, the lengths of the
    first (shallowest) level that reaches beyond it: enough to ask whether any length there is reachable.
    """
    size = 1 << max(2 * below - 1, 1).bit_length()  # no wrap-around of sums below `below`
    lengths = np.zeros(below, dtype=bool)
    lengths[1:2] = True  # at max_depth a node is always a value
    for _ in range(max_depth - 1):
        spectrum = np.fft.rfft(lengths, size)
        operands = np.zeros(below, dtype=bool)
        operands[0] = True  # the sum of no operands
        sums = np.zeros(below, dtype=bool)
        for count in range(1, max_args + 1):
            # The convolution counts ways to reach each sum: integers, so 0.5 separates "none" from "some".
            operands = np.fft.irfft(np.fft.rfft(operands, size) * spectrum, size)[:below] > 0.5
            if count >= 2:
                sums |= operands
        lengths = np.zeros(below, dtype=bool)
        lengths[1:2] = True
        lengths[2:] |= sums[: max(below - 2, 0)]
        if stop_above is not None and lengths[stop_above + 1 :].any():
            break
    return set(np.flatnonzero(lengths).tolist())


def bounds_problem(min_length: int, max_length: int, max_depth: int, max_args: int) -> str | None:
    """Why no expression can satisfy min_length < length < max_length at this depth and width, or None."""
    if max_args < 2 or max_depth < 1:
        return f"max_depth={max_depth} and max_args={max_args}: need max_depth >= 1 and max_args >= 2"
    if max_length - min_length < 2:
        return (
            f"min_length={min_length} and max_length={max_length} leave no length strictly between them: "
            "raise max_length to at least min_length + 2"
        )
    longest = 1
    for _ in range(max_depth - 1):  # every operator at full width, down to max_depth
        longest = 2 + max_args * longest
    where = f"strictly between min_length={min_length} and max_length={max_length}"
    if longest <= min_length:
        advice = f"the longest has {longest} tokens: raise max_depth or max_args, or lower min_length"
        return (
            f"no expression with max_depth={max_depth} and max_args={max_args} has a length {where}: {advice}"
        )
    # Reachable lengths are dense above a few small gaps: look just above min_length first (cheap at any
    # length), and through the whole window only when that finds none.
    for below in dict.fromkeys((min(max_length, min_length + 64), max_length)):
        if any(n > min_length for n in reachable_lengths(max_depth, max_args, below, min_length)):
            return None
    advice = "raise max_length or lower min_length (lengths 2 and 3 never occur)"
    return f"no expression with max_depth={max_depth} and max_args={max_args} has a length {where}: {advice}"


def generate_rows(
    n: int, *, seed: int, min_length: int, max_length: int, max_depth: int, max_args: int
) -> list[tuple[str, int]]:
    """`n` distinct (source, target) rows with min_length < length < max_length, as LRA's main() keeps them.

    LRA deduplicates through a Python set, whose order depends on the process's hash seed; a dict keeps the
    same deduplication with a reproducible order. Bounds no tree can meet are refused up front by
    `pdelra.data.generate.resolve_params` (bounds_problem); rare ones end after many draws with advice.
    """
    rng = random.Random(seed)
    trees: dict[Tree, None] = {}
    attempts = short = long = 0
    limit = 1000 * n + 10_000
    while len(trees) < n:
        attempts += 1
        # At the limit, or sooner where the rate so far would not reach even half of n by then.
        hopeless = attempts % 10_000 == 0 and len(trees) * limit / attempts < n / 2
        if attempts > limit or hopeless:
            raise DataError(None, _too_rare(n, len(trees), attempts, short, long, min_length, max_length))
        tree, length = generate_tree(rng, 1, max_depth, max_args)
        if min_length < length < max_length:
            trees[tree] = None
        elif length <= min_length:
            short += 1
        else:
            long += 1
    rows = []
    for tree in trees:
        source = to_string(tree)
        rows.append((source, evaluate(source)))
    return rows


def _too_rare(n: int, found: int, attempts: int, short: int, long: int, low: int, high: int) -> str:
    """The message when the draws rarely land in the bounds: which bound to relax, from where they fell."""
    in_range = attempts - short - long
    if in_range >= 10 * n:  # plenty in range, but repeating: the bounds hold too few distinct trees
        advice = f"the bounds hold fewer distinct trees: widen min_length/max_length or draw fewer than {n}"
    elif short >= long:
        advice = "most were too short: lower min_length, or raise max_depth or max_args"
    else:
        advice = "most were too long: raise max_length, or lower max_depth or max_args"
    return (
        "generation setting for listops (--params, or data.generate.listops in the config): "
        f"only {found} of {n} distinct expressions with {low} < length < {high} "
        f"in {attempts} draws ({short} too short, {long} too long, {in_range} in range); {advice}"
    )


def write_tsv(path: Path, rows: list[tuple[str, int]]) -> None:
    """Write rows exactly as LRA's write_to_file: csv.writer, tab delimiter, header Source/Target."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(HEADER)
        writer.writerows(rows)


# ------------------------------------------------------------------------------------------ raw reader


def read_tsv(path: Path) -> Iterator[tuple[int, str, int]]:
    """Yield (line_number, source, target) from a released ListOps TSV; stops at the first bad row."""
    with open(path, newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        header = next(reader, None)
        if header is None or tuple(header) != HEADER:
            raise DataError(path, f"header {header!r}, expected {'	'.join(HEADER)!r}", line=1)
        for row in reader:
            line = reader.line_num
            if len(row) != 2:
                raise DataError(
                    path, f"expected 2 tab-separated fields (Source, Target), got {len(row)}", line
                )
            source, target = row
            if not (target.isdigit() and 0 <= int(target) < NUM_CLASSES):
                raise DataError(path, f"target {target!r} is not a class 0-{NUM_CLASSES - 1}", line)
            yield line, source, int(target)


# ------------------------------------------------------------------------------------ vectorised reader
#
# A released TSV is hundreds of MB (100k rows of ~1,000 tokens, every pair wrapped in "( … )"), so the csv
# module and per-token Python work are far too slow. `encode_tsv` works on the raw bytes instead, in chunks
# of whole lines, with two C-speed `bytes.translate` passes and a few numpy passes per chunk:
#
# 1. Validation. Every byte is mapped to a code whose low nibble says which rules it is subject to as the
#    current byte and whose high nibble says which rules it breaks as the byte before; a chunk is accepted
#    only when no adjacent pair has `cur & (prev >> 4)`, no byte is outside the alphabet (code 0xFF), and
#    every '[' starts exactly "[MAX" / "[MIN" / "[MED" / "[SM" followed by a non-letter. Together with the
#    line checks of step 2 this accepts only files in the released form, which the exact path reads the same
#    way: every token starts after whitespace, every letter belongs to an operator, and each line is
#    "<source>\t<one digit>" ending in "\n" or "\r\n".
# 2. Tokens. One translate deletes spaces and parentheses (the '[' check of step 1 runs on what is left);
#    a second deletes '[' and the letters that do not identify an operator, and maps what is left to ids:
#    each operator becomes one byte (its distinguishing letter), and ']' and the digits become their ids,
#    so every row's token ids sit contiguously between its newline and tab markers.
#
# Anything else (quotes, stray characters, bad labels, a missing tab, "(5" written without a space, lines
# longer than the csv field limit) makes `encode_tsv` return None, and the caller takes the exact per-line
# path, which yields the same arrays or raises the error naming file and line.

_CHUNK = 4 << 20  # bytes of whole lines per chunk: intermediate arrays stay in cache
_DIGITS = b"0123456789"
_LETTERS = b"MAXINEDS"
_ALPHABET = b" \t\r\n()[]" + _DIGITS + _LETTERS
_TAB_ID, _NL_ID, _CR_ID = 16, 17, 18  # markers in the translated stream, above the 15 token ids
# Each operator's letter that no other operator has; its other letters and the '[' are deleted.
_OPERATOR_LETTER = {MIN: "I", MAX: "A", MED: "E", SUM_MOD: "S"}
_OPERATOR_KEY = {op: int.from_bytes(op[1:4].encode().ljust(3, b"\0"), "big") for op in OPERATORS}


def _code_table() -> bytes:
    """Per-byte validation codes: bit k set when the byte is subject to rule k as the current byte, bit k+4
    when it violates rule k as the byte before."""
    non_digit = bytes(b for b in _ALPHABET if b not in _DIGITS)
    rules = (  # (current bytes, bytes that may not precede them)
        (b"[]" + _DIGITS, b"()[]" + _DIGITS + _LETTERS),  # a token starts after whitespace
        (_LETTERS, bytes(b for b in _ALPHABET if b not in b"[" + _LETTERS)),  # letters follow '[' or a letter
        (non_digit, b"\t"),  # the tab is followed by the one-digit target …
        (b"\r\n", bytes(b for b in non_digit if b != ord("\r"))),  # … and the target by the line end
    )
    table = bytearray([0xFF] * 256)
    for byte in _ALPHABET:
        table[byte] = 0
        for bit, (current, before) in enumerate(rules):
            table[byte] |= (byte in current) << bit | (byte in before) << (bit + 4)
    assert 0xFF not in (table[b] for b in _ALPHABET)
    return bytes(table)


def _id_table() -> tuple[bytes, bytes]:
    table = bytearray(256)
    for token in (END, *(str(v) for v in range(10))):
        table[ord(token)] = TOKEN_IDS[token]
    for op, letter in _OPERATOR_LETTER.items():
        assert [o for o in OPERATORS if letter in o] == [op]
        table[ord(letter)] = TOKEN_IDS[op]
    table[ord("\t")], table[ord("\n")], table[ord("\r")] = _TAB_ID, _NL_ID, _CR_ID
    kept = set(_OPERATOR_LETTER.values()) | {END, *"0123456789\t\n\r"}
    return bytes(table), bytes(b for b in _ALPHABET if chr(b) not in kept)


_CODES = _code_table()
_IDS, _DELETED = _id_table()
_IS_LETTER = np.zeros(256, dtype=bool)
_IS_LETTER[list(_LETTERS)] = True


def _clashes(codes: bytes) -> bool:
    """Whether any adjacent pair of codes breaks a rule: `cur & (prev >> 4)`, 8 pairs per uint64 word."""
    words = (len(codes) - 1) // 8
    prev = np.frombuffer(codes, dtype="<u8", count=words)
    cur = np.frombuffer(codes, dtype="<u8", count=words, offset=1)
    clash = prev >> 4  # in each byte: its high nibble (the low nibble of the next byte is masked off)
    clash &= cur
    clash &= 0x0F0F0F0F0F0F0F0F
    tail = np.frombuffer(codes, dtype=np.uint8, offset=8 * words)
    return bool(np.count_nonzero(clash) or np.count_nonzero((tail[:-1] >> 4) & tail[1:]))


def _operators_canonical(chunk: bytes) -> bool:
    """Every '[' in the chunk (spaces and parentheses deleted) starts a whole operator token: "[MAX",
    "[MIN", "[MED" or "[SM", not followed by another letter. The code rules already require whitespace
    before the '[' and a '[' or a letter before every letter, so no space or parenthesis was deleted from
    inside an operator, nor between an operator and a letter after it."""
    raw = np.frombuffer(chunk, dtype=np.uint8)
    opens = np.flatnonzero(raw == ord("["))
    if not len(opens):
        return True
    if opens[-1] + 5 > len(raw):  # too close to the end for the 4 bytes after it: cannot be well formed
        return False
    # The 4 bytes after each '[' as one big-endian word, read through an overlapping view of the chunk.
    words = np.ndarray((len(raw) - 3,), dtype=">u4", buffer=chunk, strides=(1,))[opens + 1]
    key = words >> 8
    long_op = (key == _OPERATOR_KEY[MIN]) | (key == _OPERATOR_KEY[MAX]) | (key == _OPERATOR_KEY[MED])
    short_op = (words >> 16) == _OPERATOR_KEY[SUM_MOD] >> 8
    after = np.where(long_op, words & 0xFF, (words >> 8) & 0xFF)  # the byte after the operator's letters
    return bool(np.all((long_op | short_op) & ~_IS_LETTER[after]))


def _lines_fit_csv(data: mmap.mmap, start: int) -> bool:
    """No line is longer than the csv module's field limit (it would raise; the exact path reports that)."""
    limit = csv.field_size_limit()
    while len(data) - start > limit:
        newline = data.rfind(b"\n", start, start + limit + 1)
        if newline < 0:
            return False
        start = newline + 1
    return True


def encode_tsv(path: Path, max_length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """(tokens (N, max_length) uint8, lengths (N,) int64, labels (N,) int64, rows truncated) of a released
    ListOps TSV, or None when the file is not entirely in the well-formed released form."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return None
        # Mapped rather than read: only one chunk at a time is copied out of the page cache.
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _encode_mapped(data, path.name, max_length)


def _encode_mapped(
    data: mmap.mmap, name: str, max_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    header = "\t".join(HEADER).encode()
    for ending in (b"\n", b"\r\n"):
        if data[: len(header) + len(ending)] == header + ending:
            body = len(header) + len(ending)
            break
    else:
        return None
    if not _lines_fit_csv(data, body):
        return None
    flat_parts: list[tuple[bytes, list[int], list[int]]] = []
    lengths_parts, labels_parts = [], []
    boundaries = [body]
    while boundaries[-1] < len(data):
        end = data.find(b"\n", boundaries[-1] + _CHUNK)
        boundaries.append(len(data) if end < 0 else end + 1)
    for start, end in progress(itertools.pairwise(boundaries), f"listops {name}"):
        chunk = data[start - 1 : end]  # from the newline before its first line: lines start after "\n"
        if not chunk.endswith(b"\n"):
            chunk += b"\n"  # a last line without a newline, which the csv module accepts
        codes = chunk.translate(_CODES)
        if b"\xff" in codes:
            return None
        if _clashes(codes):
            return None
        inked = chunk.translate(None, b" ()")  # ~4× shorter; the rules keep each operator contiguous
        if not _operators_canonical(inked):
            return None
        ids_bytes = inked.translate(_IDS, _DELETED)
        ids = np.frombuffer(ids_bytes, dtype=np.uint8)
        newlines = np.flatnonzero(ids == _NL_ID)  # the first is the newline before the chunk
        ends = newlines[1:] - (ids[newlines[1:] - 1] == _CR_ID)  # where "\r\n" or "\n" starts
        if (
            np.count_nonzero(ids[ends - 2] != _TAB_ID)
            or np.count_nonzero(ids == _TAB_ID) != len(ends)
            or np.count_nonzero(ids == _CR_ID) != np.count_nonzero(ends != newlines[1:])
        ):
            return None
        targets = ids[ends - 1].astype(np.int64) - TOKEN_IDS["0"]
        if np.count_nonzero((targets < 0) | (targets >= NUM_CLASSES)):
            return None
        lengths_parts.append(ends - 2 - (newlines[:-1] + 1))
        labels_parts.append(targets)
        flat_parts.append((ids_bytes, (newlines[:-1] + 1).tolist(), lengths_parts[-1].tolist()))
    lengths = np.concatenate(lengths_parts) if lengths_parts else np.zeros(0, np.int64)
    labels = np.concatenate(labels_parts) if labels_parts else np.zeros(0, np.int64)
    tokens = np.zeros((len(labels), max_length), dtype=np.uint8)
    out = memoryview(tokens.reshape(-1))
    offset = 0
    for ids_bytes, firsts, counts in flat_parts:
        source = memoryview(ids_bytes)
        for first, count in zip(firsts, counts, strict=True):
            count = min(count, max_length)
            out[offset : offset + count] = source[first : first + count]
            offset += max_length
    return tokens, np.minimum(lengths, max_length), labels, int(np.count_nonzero(lengths > max_length))
