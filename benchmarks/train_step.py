"""Time a ListOps train step with each diffusion position against the baseline.

Usage: `python benchmarks/train_step.py --help`.

Same as `pdelra bench train-step`; see src/pdelra/bench/train_step.py.
"""

import sys

from pdelra.bench.train_step import main

if __name__ == "__main__":
    sys.exit(main())
