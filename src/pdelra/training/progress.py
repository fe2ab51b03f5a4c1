"""Training progress: a tqdm bar at a terminal, periodic log lines in batch jobs (cluster logs)."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

log = logging.getLogger("pdelra.training")

# In batch jobs: one line at the first step, then at most one line per interval. Snakemake/Slurm logs of
# hundreds of runs stay readable while a hung or slow job is still visible within a minute.
LOG_INTERVAL_S = 60.0


class Progress:
    def __init__(self, total_steps: int, start_step: int, interactive: bool | None = None) -> None:
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self._bar: Any = None
        if self.interactive:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True)
        self._last_time = time.monotonic()
        self._last_step = start_step
        self._logged_once = False

    def step(self, step: int, loss: float, lr: float) -> None:
        if self._bar is not None:
            self._bar.update(step - self._bar.n)
            self._bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}", refresh=False)
            return
        now = time.monotonic()
        if self._logged_once and now - self._last_time < LOG_INTERVAL_S:
            return
        rate = (step - self._last_step) / max(now - self._last_time, 1e-9)
        log.info("step %d  loss %.4f  lr %.3e  %.2f steps/s", step, loss, lr, rate)
        self._last_time, self._last_step, self._logged_once = now, step, True

    def epoch(self, epoch: int, entry: dict[str, Any], best_val: float | None) -> None:
        message = (
            f"epoch {epoch}: train loss {entry['train_loss']:.4f} acc {entry['train_accuracy']:.4f}  "
            f"val loss {entry['val_loss']:.4f} acc {entry['val_accuracy']:.4f}  (best {best_val:.4f})"
        )
        if self._bar is not None:
            self._bar.write(message)
        else:
            log.info(message)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
