"""The claims engine's time per table: `pdelra.results.claims.evaluate` on tables shaped like the paper's
(tests/test_claims_failures.py's draws: every grid at 5 seeds, the real tasks' n_test), verdicts only
(`power=False`, what the simulations of the test suite run) and with the seeds each claim needs (`power=True`,
what `pdelra aggregate` runs), as medians over the tables:

    .venv/bin/python benchmarks/claims_speed.py

A few seconds. To compare two versions of the code, run it with PYTHONPATH=OTHER_CHECKOUT/src alternately.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np
import test_claims_failures as failures

from pdelra.results import claims
from pdelra.results.catalogue.paper import paper_claims

TABLES = 12


def main() -> None:
    rng = np.random.default_rng(7)
    no_failure = ("", 1.0)
    tables = [
        failures.draw_runs(failures.paper_truth, rng, 5, failures.RUN_SD, False, no_failure, ())
        for _ in range(TABLES)
    ]
    paper = paper_claims()
    claims.evaluate(tables[0], claims=paper, power=True)  # the first call fills the engine's caches
    print(f"claims engine: {claims.__file__}")
    for power in (False, True):
        seconds = []
        for runs in tables:
            started = time.perf_counter()
            claims.evaluate(runs, claims=paper, power=power)
            seconds.append(time.perf_counter() - started)
        print(f"power={power}: median {statistics.median(seconds):.4f} s per table ({TABLES} tables)")


if __name__ == "__main__":
    main()
