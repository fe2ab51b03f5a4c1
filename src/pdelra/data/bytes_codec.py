"""Byte-level tokenisation of LRA's text and retrieval tasks: id = byte + 1, so 0 stays free for padding."""

from __future__ import annotations

import numpy as np

VOCAB_SIZE = 257  # 256 byte values + padding
DTYPE = np.uint16


def encode_into(data: bytes, row: np.ndarray) -> tuple[int, bool]:
    """Write the byte ids of `data` into the zeroed `row`, cut to len(row); return (length, truncated)."""
    max_length = len(row)
    length = min(len(data), max_length)
    row[:length] = np.frombuffer(data, dtype=np.uint8, count=length)
    row[:length] += 1
    return length, len(data) > max_length
