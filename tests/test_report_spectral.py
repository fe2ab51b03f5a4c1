"""The report's spectral view: H(ω) of the layer as built, in step with pdelra.nn.ops and the trained
model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pdelra.nn import ops
from pdelra.nn.model import LRAClassifier, ModelConfig
from pdelra.results import spectral


def test_transfer_function_matches_the_eigenvalues_of_the_laplacian() -> None:
    # Δ_h on a long periodic-free signal: H(ω) = 1 − 4 α sin²(ω h / 2); at ω = π/h the step is 1 − 4α.
    assert spectral.transfer(np.array([0.0]), [0.1], (1,))[0] == pytest.approx(1.0)
    assert spectral.transfer(np.array([math.pi]), [0.1], (1,))[0] == pytest.approx(0.6)
    assert spectral.transfer(np.array([math.pi / 2]), [0.1], (2,))[0] == pytest.approx(0.6)
    assert spectral.transfer(np.array([math.pi / 2]), [0.1], (2,), "inverse_h2")[0] == pytest.approx(0.9)
    # the operator itself: one step on a cosine mode of the DCT-II basis multiplies it by H
    n, k = 64, 5
    omega = math.pi * k / n
    x = torch.cos(omega * (torch.arange(n, dtype=torch.float64) + 0.5))[None, :, None]
    alphas = torch.tensor([[0.1]], dtype=torch.float64)
    y = ops.diffusion_step(x, alphas, (1,))
    assert torch.allclose(y, x * spectral.transfer(np.array([omega]), [0.1], (1,))[0], atol=1e-10)


def test_band_energy_of_the_identity_is_one_and_diffusion_damps_high_bands_most() -> None:
    flat = spectral.band_energy([0.0], (1,))
    assert all(v == pytest.approx(1.0) for v in flat.values())
    e = spectral.band_energy([0.1], (1,))
    assert e["low"] > e["mid_low"] > e["mid_high"] > e["high"]


def test_initial_alphas_and_stencil_weights_agree_with_the_layer() -> None:
    for init in ("paper", "normalised"):
        for scales in ((1,), (1, 2, 4)):
            assert spectral.initial_alphas(scales, 0.1, init) == pytest.approx(
                ops.initial_alphas(scales, 0.1, multiscale_init=init)
            )
    for scaling in ("unit", "inverse_h2"):
        assert spectral.stencil_weights((1, 2, 4), scaling) == pytest.approx(
            ops.stencil_weights((1, 2, 4), scaling)
        )
    assert sum(spectral.initial_alphas((1, 2, 4), 0.1, "normalised")) == pytest.approx(0.1)


def test_alpha_summary_reports_alpha_per_scale_for_the_report() -> None:
    sizes = {"d_model": 16, "n_layers": 2, "n_heads": 2, "d_mlp": 32}
    cfg = ModelConfig(vocab_size=16, num_classes=2, max_length=32, **sizes,
                      variant="after_embedding", scale="multi")  # fmt: skip
    summary = LRAClassifier(cfg).alpha_summary()["encoder.embedding"]
    assert summary["scales"] == [1, 2, 4]
    assert summary["per_scale"] == pytest.approx(spectral.initial_alphas((1, 2, 4), 0.1), rel=1e-5)
