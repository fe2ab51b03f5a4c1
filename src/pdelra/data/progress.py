"""Progress on long loops: a tqdm bar when a person watches (stderr is a terminal), otherwise a log line
every `every` seconds, so Slurm and Snakemake logs show that a job is alive without a flood of bar redraws."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("pdelra.data")


def progress(items: Iterable[T], desc: str, total: int | None = None, every: float = 30.0) -> Iterator[T]:
    if sys.stderr.isatty():
        from tqdm import tqdm

        yield from tqdm(items, desc=desc, total=total, unit="it", leave=False)
        return
    last = time.monotonic()
    for done, item in enumerate(items, start=1):
        yield item
        now = time.monotonic()
        if now - last >= every:
            last = now
            log.info("%s: %d%s", desc, done, f"/{total}" if total else "")
