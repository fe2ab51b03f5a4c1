"""Graceful interruption: SIGTERM (Slurm preemption/time-out, Snakemake) and SIGUSR1 (`--signal=USR1@T`).

The handler only records the signal; the training loop checks it after every optimizer step, writes a
checkpoint and exits with EXIT_INTERRUPTED. Stopping between steps, not inside one, is what makes the
checkpoint exact.
"""

from __future__ import annotations

import logging
import signal
from types import FrameType, TracebackType

log = logging.getLogger(__name__)

# EX_TEMPFAIL from sysexits.h: "temporary failure, try again" - the run checkpointed and can be resumed.
EXIT_INTERRUPTED = 75
HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class InterruptFlag:
    """Context manager that turns SIGTERM/SIGUSR1 into a flag and restores the previous handlers on exit."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, object] = {}

    def __bool__(self) -> bool:
        return self.received is not None

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum)
            log.warning("received %s: stopping after the current step with a checkpoint", self.received.name)

    def __enter__(self) -> InterruptFlag:
        for sig in HANDLED_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
