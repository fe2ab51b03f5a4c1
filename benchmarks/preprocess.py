"""Preprocessing throughput benchmark; same as `pdelra bench preprocess`."""

import sys

from pdelra.bench.preprocess import main

if __name__ == "__main__":
    sys.exit(main())
