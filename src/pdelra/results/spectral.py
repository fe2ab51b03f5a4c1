"""The diffusion layer in the frequency domain (paper §3.4, eq. 6 and eq. 11, Table 16, Fig. 2).

One Euler step u ← u + Σ_k α_k w_k Δ_{h_k} u acts on a Fourier mode e^{iωn} (ω in radians per token) by

    H(ω) = 1 − 4 Σ_k α_k w_k sin²(ω h_k / 2),

with w_k = 1 for `stencil_scaling: unit` (eq. 6, the default) and w_k = 1/h_k² for `inverse_h2` (eq. 11).
The paper's Table 16 gives band energies without defining the bands or the normalisation; ours are the mean
of |H(ω)|² over four equal bands of [0, π] (Low = [0, π/4], …, High = [3π/4, π]), so 1 = the band passes
unchanged. This module imports no torch; `pdelra.nn.ops` defines the same stencil weights and initial α
(tests/test_report_spectral.py keeps them in step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

SCALES: dict[str, tuple[int, ...]] = {"h1": (1,), "h2": (2,), "h4": (4,), "multi": (1, 2, 4)}
PAPER_INIT_RATIO = (1.0, 0.6, 0.3)
BANDS = {"low": (0.0, 0.25), "mid_low": (0.25, 0.5), "mid_high": (0.5, 0.75), "high": (0.75, 1.0)}


def stencil_weights(scales: Sequence[int], stencil_scaling: str = "unit") -> tuple[float, ...]:
    if stencil_scaling not in ("unit", "inverse_h2"):
        raise ValueError(f"unknown stencil_scaling {stencil_scaling!r}; choose unit or inverse_h2")
    return tuple(1.0 if stencil_scaling == "unit" else 1.0 / (h * h) for h in scales)


def initial_alphas(scales: Sequence[int], alpha_init: float, multiscale_init: str = "paper") -> list[float]:
    """α at initialisation: alpha_init for one scale; × (1, 0.6, 0.3) ("paper") or those ratios scaled to
    sum to 1 ("normalised") for several."""
    if multiscale_init not in ("paper", "normalised"):
        raise ValueError(f"unknown multiscale_init {multiscale_init!r}; choose paper or normalised")
    if len(scales) == 1:
        return [alpha_init]
    ratio = list(PAPER_INIT_RATIO[: len(scales)])
    if multiscale_init == "normalised":
        ratio = [r / sum(ratio) for r in ratio]
    return [alpha_init * r for r in ratio]


def transfer(
    omega: np.ndarray, alphas: Sequence[float], scales: Sequence[int], stencil_scaling: str = "unit"
) -> np.ndarray:
    """H(ω) of one Euler step with step sizes `alphas` at `scales`."""
    omega = np.asarray(omega, dtype=float)
    weights = stencil_weights(scales, stencil_scaling)
    out = np.ones_like(omega)
    for a, w, h in zip(alphas, weights, scales, strict=True):
        out -= 4.0 * a * w * np.sin(omega * h / 2.0) ** 2
    return out


def band_energy(
    alphas: Sequence[float], scales: Sequence[int], stencil_scaling: str = "unit", points: int = 4001
) -> dict[str, float]:
    """Mean |H(ω)|² over each of the four bands (fractions of [0, π])."""
    result = {}
    for name, (lo, hi) in BANDS.items():
        omega = np.linspace(lo * math.pi, hi * math.pi, points)
        result[name] = float(np.mean(transfer(omega, alphas, scales, stencil_scaling) ** 2))
    return result
