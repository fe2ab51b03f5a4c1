"""Reference matrices built from the definitions, independent of the project's code (shared by tests)."""

from __future__ import annotations

import numpy as np


def dense_laplacian(length: int, h: int, valid: int | None = None) -> np.ndarray:
    """Δ_h as a (length × length) matrix on the first `valid` positions (default: all), zero elsewhere.

    Half-sample symmetric extension at both ends of the valid block: reflected indices with period 2·valid.
    """
    valid = length if valid is None else valid
    matrix = np.zeros((length, length))
    for i in range(valid):
        matrix[i, i] -= 2
        for j in (i + h, i - h):
            m = j % (2 * valid)
            matrix[i, m if m < valid else 2 * valid - 1 - m] += 1
    return matrix
