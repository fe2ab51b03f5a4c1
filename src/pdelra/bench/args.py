"""Argument types of the bench commands: a bad number is refused by argparse, naming the flag and the value.

Without them `--rounds -3` reaches `statistics.median([])` and ends in a StatisticsError traceback.
"""

from __future__ import annotations

import argparse


def _integer(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer ≥ 1 (rounds, sizes, counts, threads)."""
    return _integer(text, 1, "a positive integer (>= 1)")


def non_negative_int(text: str) -> int:
    """An integer ≥ 0 (warm-up rounds, seeds)."""
    return _integer(text, 0, "an integer >= 0")


def bxld_shape(text: str) -> tuple[int, int, int]:
    """A tensor shape written BxLxD (batch, length, width), e.g. 4x1024x128."""
    try:
        b, n, d = (int(v) for v in text.lower().split("x"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"shape must be BxLxD, e.g. 4x1024x128; got {text!r}") from exc
    if min(b, n, d) < 1:
        raise argparse.ArgumentTypeError(f"shape BxLxD needs positive sizes, got {text!r}")
    return b, n, d
