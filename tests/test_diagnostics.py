"""The diagnostics of pdelra.nn.diagnostics on constructed cases whose answers are known."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import scipy.fft
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from reference import dense_laplacian

from pdelra.nn.diagnostics import (
    EulerStep,
    commutator,
    dirichlet_energy,
    perturbation,
    relative_roughness,
    roughness_gain,
)
from pdelra.nn.ops import DiffusionLayer, diffusion_step

SCALE_SETS = [(1,), (2,), (4,), (1, 2, 4), (2, 4)]
SCALINGS = ["unit", "inverse_h2"]
FAST = settings(max_examples=40, deadline=None)


def _alphas(draw: st.DrawFn, num_scales: int, channels: int) -> torch.Tensor:
    """α_k ≥ 0 with Σ_k α_k ≤ ½ per channel, boundary included."""
    raw = torch.tensor(
        draw(st.lists(st.floats(0, 1), min_size=num_scales * channels, max_size=num_scales * channels)),
        dtype=torch.float64,
    ).view(num_scales, channels)
    total = torch.tensor(draw(st.lists(st.floats(0, 0.5), min_size=channels, max_size=channels)))
    return raw / raw.sum(0).clamp_min(1e-12) * total.to(torch.float64)


def _dct_mode(n: int, j: int) -> torch.Tensor:
    """The j-th orthonormal DCT-II basis vector of length n, (n,)."""
    return torch.from_numpy(scipy.fft.idct(np.eye(n)[:, j], type=2, norm="ortho"))


def _with_garbage(x: torch.Tensor, lengths: torch.Tensor, value: float) -> torch.Tensor:
    pad = torch.arange(x.shape[1])[None, :, None] >= lengths[:, None, None]
    return torch.where(pad, torch.full_like(x, value), x)


# ----------------------------------------------------------------------------------------------------------
# Roughness


@FAST
@given(data=st.data(), length=st.integers(1, 20), channels=st.integers(1, 4))
def test_dirichlet_energy_is_the_sum_of_squared_differences_and_the_laplacian_form(
    data: st.DataObject, length: int, channels: int
) -> None:
    lengths = torch.tensor(data.draw(st.lists(st.integers(1, length), min_size=1, max_size=3)))
    x = torch.randn(len(lengths), length, channels, dtype=torch.float64)
    energy = dirichlet_energy(x, lengths)
    for b, n in enumerate(lengths.tolist()):
        u = x[b, :n].numpy()
        by_definition = sum(float(np.sum((u[i + 1] - u[i]) ** 2)) for i in range(n - 1))
        quadratic = float(np.einsum("ic,ij,jc->", u, -dense_laplacian(n, 1), u))  # uᵀ(−Δ₁)u, Neumann
        assert energy[b].item() == pytest.approx(by_definition, rel=1e-12, abs=1e-12)
        assert energy[b].item() == pytest.approx(quadratic, rel=1e-10, abs=1e-10)


def test_roughness_ignores_padding_even_when_it_holds_nan_and_inf() -> None:
    x = torch.randn(3, 9, 4, dtype=torch.float64)
    lengths = torch.tensor([9, 4, 1])
    clean = _with_garbage(x, lengths, 0.0)
    for garbage in (math.nan, math.inf, 1e6):
        dirty = _with_garbage(x, lengths, garbage)
        torch.testing.assert_close(dirichlet_energy(dirty, lengths), dirichlet_energy(clean, lengths))
        torch.testing.assert_close(relative_roughness(dirty, lengths), relative_roughness(clean, lengths))
    assert dirichlet_energy(x, lengths)[2] == 0  # one token: nothing to differ from
    constant = torch.ones(1, 6, 2, dtype=torch.float64)
    assert relative_roughness(constant)[0] == 0


def test_relative_roughness_of_the_alternating_sequence_approaches_four() -> None:
    n = 64
    alternating = torch.tensor([(-1.0) ** i for i in range(n)], dtype=torch.float64)[None, :, None]
    assert relative_roughness(alternating).item() == pytest.approx(4 * (n - 1) / n)


# ----------------------------------------------------------------------------------------------------------
# Perturbation bound


@FAST
@given(
    data=st.data(),
    length=st.integers(1, 24),
    scales=st.sampled_from(SCALE_SETS),
    scaling=st.sampled_from(SCALINGS),
)
def test_bound_holds_on_random_inputs_with_padding(
    data: st.DataObject, length: int, scales: tuple[int, ...], scaling: str
) -> None:
    channels = data.draw(st.integers(1, 3))
    lengths = torch.tensor(data.draw(st.lists(st.integers(1, length), min_size=1, max_size=3)))
    x = torch.randn(len(lengths), length, channels, dtype=torch.float64) * data.draw(st.floats(1e-3, 1e3))
    step = EulerStep(_alphas(data.draw, len(scales), channels), scales, scaling)
    result = perturbation(step, _with_garbage(x, lengths, math.nan), lengths)
    assert torch.all(result.norm <= result.bound * (1 + 1e-9) + 1e-12)
    assert torch.all(result.bound <= result.closed_form * (1 + 1e-9) + 1e-12)
    # The perturbation is the step's own effect on the valid block, as pdelra.nn.ops computes it.
    for b, n in enumerate(lengths.tolist()):
        alone = step(x[b : b + 1, :n])
        assert result.norm[b].item() == pytest.approx((alone - x[b : b + 1, :n]).norm().item(), abs=1e-10)


@FAST
@given(
    values=arrays(
        np.float64, st.tuples(st.integers(1, 16), st.integers(1, 2)), elements=st.floats(-1e6, 1e6)
    ),
    scales=st.sampled_from(SCALE_SETS),
    scaling=st.sampled_from(SCALINGS),
    total=st.floats(0, 0.5),
)
def test_bound_holds_on_adversarial_values(
    values: np.ndarray, scales: tuple[int, ...], scaling: str, total: float
) -> None:
    # Hypothesis shrinks towards spikes, steps, alternations and extreme magnitudes.
    x = torch.from_numpy(values)[None]
    alphas = torch.full((len(scales),), total / len(scales), dtype=torch.float64)
    result = perturbation(EulerStep(alphas, scales, scaling), x)
    assert result.norm.item() <= result.bound.item() * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("scales", SCALE_SETS)
@pytest.mark.parametrize("n", [2, 3, 7, 16, 33])
def test_bound_constant_is_the_worst_case_over_all_inputs(
    n: int, scales: tuple[int, ...], scaling: str
) -> None:
    # The sharp constant β² is the largest generalised eigenvalue of ‖(D − I)u‖² against E(u) on the
    # non-constant vectors, computed here from dense matrices built from the definitions.
    weights = torch.tensor([0.31, 0.12, 0.05][: len(scales)], dtype=torch.float64)
    step = EulerStep(weights, scales, scaling)
    w = step.weights()[:, 0].numpy()
    step_minus_identity = sum(wk * dense_laplacian(n, h) for wk, h in zip(w, scales, strict=True))
    energy_form = -dense_laplacian(n, 1)
    basis = scipy.linalg.null_space(np.ones((1, n)))  # orthonormal complement of the constants
    a = basis.T @ step_minus_identity.T @ step_minus_identity @ basis
    e = basis.T @ energy_form @ basis
    worst = scipy.linalg.eigh(a, e, eigvals_only=True).max()
    assert roughness_gain(step, n).item() ** 2 == pytest.approx(worst, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("n", [2, 5, 16, 100])
def test_bound_is_tight_on_the_highest_frequency_mode(n: int) -> None:
    # One scale h = 1, a different α per channel: every channel on the top DCT mode attains the bound.
    alphas = torch.tensor([[0.5, 0.25, 0.01]], dtype=torch.float64)  # (K=1, C=3)
    mode = _dct_mode(n, n - 1)
    x = torch.stack([mode, -2 * mode, 7 * mode], dim=1)[None]  # (1, n, 3)
    result = perturbation(EulerStep(alphas, (1,)), x)
    assert result.norm.item() == pytest.approx(result.bound.item(), rel=1e-10)
    energy = dirichlet_energy(x)
    expected = torch.sqrt(
        (alphas[0] ** 2 * 4 * math.sin(math.pi * (n - 1) / (2 * n)) ** 2).dot(
            torch.tensor([1.0, 4.0, 49.0], dtype=torch.float64) * energy / 54
        )
    )
    assert result.bound.item() == pytest.approx(expected.item(), rel=1e-10)
    # At the stability limit α = ½ the perturbation approaches √E (the closed form's 2αh√E).
    if n == 100:
        top = perturbation(EulerStep(torch.tensor([0.5], dtype=torch.float64), (1,)), mode[None, :, None])
        assert top.norm.item() == pytest.approx(
            math.sqrt(dirichlet_energy(mode[None, :, None]).item()), rel=1e-3
        )


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("scales", SCALE_SETS)
def test_bound_is_attained_on_its_maximising_mode_with_padding(scales: tuple[int, ...], scaling: str) -> None:
    n, size = 12, 20
    step = EulerStep(torch.tensor([0.2, 0.1, 0.05][: len(scales)], dtype=torch.float64), scales, scaling)
    w = step.weights()[:, 0].numpy()
    mu = 4 * np.sin(np.pi * np.outer(np.arange(n), scales) / (2 * n)) ** 2  # (n, K): −Δ_h on DCT mode j
    mu1 = 4 * np.sin(np.pi * np.arange(n) / (2 * n)) ** 2
    j_star = int(np.argmax(np.abs(mu[1:] @ w) / np.sqrt(mu1[1:]))) + 1
    x = torch.zeros(1, size, 1, dtype=torch.float64)
    x[0, :n, 0] = _dct_mode(n, j_star)
    x[0, n:, 0] = 123.0  # padding
    result = perturbation(step, x, torch.tensor([n]))
    assert result.norm.item() == pytest.approx(result.bound.item(), rel=1e-10)


def test_perturbation_accepts_a_diffusion_layer_and_uses_its_euler_step() -> None:
    layer = DiffusionLayer(4, scales=(1, 2, 4), alpha_init=0.2, norm=False).double()
    with torch.no_grad():
        layer.step_sizes.theta.add_(torch.randn_like(layer.step_sizes.theta))
    x = torch.randn(2, 10, 4, dtype=torch.float64)
    lengths = torch.tensor([10, 6])
    from_layer = perturbation(layer, x, lengths)
    with torch.no_grad():
        expected = (
            layer(x, lengths) - x * (torch.arange(10)[None, :, None] < lengths[:, None, None])
        ).flatten(1)
    torch.testing.assert_close(from_layer.norm, expected.norm(dim=1))
    assert torch.all(from_layer.norm <= from_layer.bound * (1 + 1e-9))


@pytest.mark.parametrize("scaling", SCALINGS)
def test_from_layer_is_the_layers_own_euler_step_under_both_stencil_scalings(scaling: str) -> None:
    layer = DiffusionLayer(3, scales=(1, 2, 4), alpha_init=0.15, norm=False, stencil_scaling=scaling).double()
    with torch.no_grad():
        layer.step_sizes.theta.add_(torch.randn_like(layer.step_sizes.theta))
    x = torch.randn(3, 13, 3, dtype=torch.float64)
    lengths = torch.tensor([13, 7, 2])
    step = EulerStep.from_layer(layer)
    assert step.stencil_scaling == scaling
    with torch.no_grad():
        torch.testing.assert_close(step(x, lengths), layer(x, lengths))
    result = perturbation(layer, x, lengths)
    assert torch.all(result.norm <= result.bound * (1 + 1e-9))


def test_inverse_h2_divides_the_stencil_by_h_squared() -> None:
    x = torch.randn(2, 15, 3, dtype=torch.float64)
    alphas = torch.tensor([0.2, 0.1, 0.05], dtype=torch.float64)
    scaled = EulerStep(alphas, (1, 2, 4), "inverse_h2")(x)
    by_hand = diffusion_step(x, (alphas / torch.tensor([1.0, 4.0, 16.0]))[:, None], (1, 2, 4))
    torch.testing.assert_close(scaled, by_hand)
    with pytest.raises(ValueError, match="stencil_scaling"):
        EulerStep(alphas, (1, 2, 4), "h2")


# ----------------------------------------------------------------------------------------------------------
# Commutator


def _uniform_average(x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    n = torch.full((x.shape[0],), x.shape[1]) if lengths is None else lengths
    valid = (torch.arange(x.shape[1])[None, :] < n[:, None]).to(x.dtype)[:, :, None]
    mean = (x * valid).sum(1, keepdim=True) / n[:, None, None].to(x.dtype)
    return mean * valid


def _attention(scores: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A fixed row-stochastic attention x ↦ A x over valid keys, scores (B, L, L)."""

    def mix(x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        keys = torch.arange(x.shape[1])[None, None, :] < lengths[:, None, None]
        probs = torch.softmax(scores.masked_fill(~keys, -math.inf), dim=-1)
        return probs @ x

    return mix


@pytest.fixture
def padded() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(3, 16, 5, dtype=torch.float64), torch.tensor([16, 9, 3])


@pytest.mark.parametrize("scales", SCALE_SETS)
def test_commutator_vanishes_for_maps_that_commute(padded, scales: tuple[int, ...]) -> None:
    x, lengths = padded
    diffuse = EulerStep(torch.tensor([0.3, 0.1, 0.05][: len(scales)], dtype=torch.float64), scales)
    other = EulerStep(torch.rand(2, 5, dtype=torch.float64) * 0.25, (1, 3), "inverse_h2")
    for mix in (lambda u, n: u, _uniform_average, other):
        value = commutator(diffuse, mix, _with_garbage(x, lengths, math.nan), lengths)
        assert torch.all(value.abs() < 1e-12), value


def test_commutator_is_clearly_nonzero_for_a_generic_attention(padded) -> None:
    x, lengths = padded
    mix = _attention(torch.randn(3, 16, 16, dtype=torch.float64) * 3)
    diffuse = EulerStep(torch.tensor([0.25], dtype=torch.float64), (1,))
    value = commutator(diffuse, mix, x, lengths)
    assert torch.all(value[:2] > 0.05), value  # the 3-token sequence is short, but non-zero too
    assert value[2] > 1e-3
    # Padding-aware: the same value whatever the padding holds.
    torch.testing.assert_close(commutator(diffuse, mix, _with_garbage(x, lengths, 1e3), lengths), value)
    # And it scales with α: half the step, about half the commutator (it is linear in α).
    half = commutator(EulerStep(torch.tensor([0.125], dtype=torch.float64), (1,)), mix, x, lengths)
    torch.testing.assert_close(half, value / 2)


def test_commutator_of_a_zero_output_map() -> None:
    x = torch.randn(1, 5, 2, dtype=torch.float64)
    step = EulerStep(torch.tensor([0.2], dtype=torch.float64), (1,))
    assert commutator(step, lambda u, n: torch.zeros_like(u), x).item() == 0


# ----------------------------------------------------------------------------------------------------------
# Downstream amplification


def test_jacobian_spectral_norm_is_the_largest_singular_value_of_each_examples_jacobian() -> None:
    from pdelra.nn.diagnostics import jacobian_spectral_norm

    gen = torch.Generator().manual_seed(0)
    batch, classes = 3, 4
    a = torch.randn(batch, classes, 5, 2, dtype=torch.float64, generator=gen)  # J on the first input
    b = torch.randn(batch, classes, 3, dtype=torch.float64, generator=gen)  # J on the second (a 2nd tower)

    def rest(u: list[torch.Tensor]) -> torch.Tensor:  # linear plus a nonlinearity whose slope is 1 at 0
        linear = torch.einsum("bcij,bij->bc", a, u[0]) + torch.einsum("bci,bi->bc", b, u[1])
        return torch.sinh(linear)

    at = [torch.zeros(batch, 5, 2, dtype=torch.float64), torch.zeros(batch, 3, dtype=torch.float64)]
    sigma = jacobian_spectral_norm(rest, at)
    full = torch.cat([a.flatten(2), b], 2)  # (B, C, N): sinh'(0) = 1, so J_b is the linear map itself
    expected = torch.linalg.matrix_norm(full, ord=2)
    torch.testing.assert_close(sigma, expected)
    # Away from 0 the slope changes per output: J_b = diag(cosh(linear)) · A_b.
    at = [torch.randn(batch, 5, 2, dtype=torch.float64, generator=gen), at[1]]
    linear = torch.einsum("bcij,bij->bc", a, at[0])
    expected = torch.linalg.matrix_norm(torch.cosh(linear)[:, :, None] * full, ord=2)
    torch.testing.assert_close(jacobian_spectral_norm(rest, at), expected)
