"""Properties of the diffusion operator (pdelra.nn.ops) that the paper's guarantees and the model rely on."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.fft
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import dense_laplacian

from pdelra.nn.ops import (
    DiffusionLayer,
    PseudoTimeDiffusion,
    PseudoTimeReactionDiffusion,
    PseudoTimeWave,
    diffusion_step,
    laplacian,
)

SCALE_SETS = [(1,), (2,), (4,), (1, 2, 4)]
# Where new tensors live: CPU, or the GPU under PDELRA_TEST_DEVICE=cuda (conftest sets the default device).
DEVICE = torch.device(os.environ.get("PDELRA_TEST_DEVICE") or "cpu")
FAST = settings(max_examples=40, deadline=None)


def _admissible_alphas(draw: st.DrawFn, num_scales: int, channels: int) -> torch.Tensor:
    """α_k ≥ 0 with Σ_k α_k ≤ ½ per channel, including the boundary of the region."""
    raw = torch.tensor(
        draw(st.lists(st.floats(0, 1), min_size=num_scales * channels, max_size=num_scales * channels)),
        dtype=torch.float64,
    ).view(num_scales, channels)
    total = draw(st.floats(0, 0.5))
    return raw / raw.sum(0).clamp_min(1e-12) * total


@st.composite
def padded_batch(draw: st.DrawFn, max_len: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    batch = draw(st.integers(1, 4))
    length = draw(st.integers(1, max_len))
    lengths = torch.tensor(draw(st.lists(st.integers(1, length), min_size=batch, max_size=batch)))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, 3, dtype=torch.float64, generator=gen, device="cpu").to(DEVICE)
    return x, lengths


@FAST
@given(length=st.integers(1, 40), h=st.sampled_from([1, 2, 4]))
def test_eigenvalues_on_dct2_basis(length: int, h: int) -> None:
    # Column k of the inverse orthonormal DCT-II is the k-th cosine mode; Δ_h scales it by −4 sin²(πkh/2L).
    basis = torch.from_numpy(scipy.fft.idct(np.eye(length), type=2, norm="ortho", axis=0)).to(
        DEVICE
    )  # (L, k)
    out = laplacian(basis[None], h=h, dim=-2)[0]
    k = torch.arange(length, dtype=torch.float64)
    eigen = -4 * torch.sin(torch.pi * k * h / (2 * length)) ** 2
    torch.testing.assert_close(out, basis * eigen, atol=1e-10, rtol=0)


@FAST
@given(length=st.integers(1, 20), h=st.integers(1, 45))
def test_matches_definition_for_any_step_including_h_beyond_length(length: int, h: int) -> None:
    x = torch.randn(2, length, 3, dtype=torch.float64)
    expected = torch.einsum("ij,bjc->bic", torch.from_numpy(dense_laplacian(length, h)).to(DEVICE), x)
    torch.testing.assert_close(laplacian(x, h=h), expected)


@FAST
@given(length=st.integers(1, 30))
def test_h1_equals_replicate_padding(length: int) -> None:
    x = torch.randn(2, length, 5, dtype=torch.float64)
    padded = F.pad(x.transpose(1, 2), (1, 1), mode="replicate").transpose(1, 2)
    expected = padded[:, 2:] - 2 * x + padded[:, :-2]
    torch.testing.assert_close(laplacian(x, h=1), expected)


def test_laplacian_along_other_axes() -> None:
    x = torch.randn(2, 7, 3, 5, dtype=torch.float64)
    for dim in (1, 2, 3, -1):
        moved = x.movedim(dim, -2)
        expected = laplacian(moved.reshape(-1, *moved.shape[-2:]), h=2).view(moved.shape).movedim(-2, dim)
        torch.testing.assert_close(laplacian(x, h=2, dim=dim), expected)


@FAST
@given(data=st.data(), length=st.integers(1, 30), scales=st.sampled_from(SCALE_SETS))
def test_step_is_non_expansive(data: st.DataObject, length: int, scales: tuple[int, ...]) -> None:
    alphas = _admissible_alphas(data.draw, len(scales), 4)
    x = torch.randn(3, length, 4, dtype=torch.float64)
    y = diffusion_step(x, alphas, scales)
    assert (y.norm(dim=1) <= x.norm(dim=1) * (1 + 1e-12) + 1e-12).all()


@FAST
@given(data=st.data(), length=st.integers(2, 30), scales=st.sampled_from(SCALE_SETS))
def test_dirichlet_energy_never_increases(data: st.DataObject, length: int, scales: tuple[int, ...]) -> None:
    alphas = _admissible_alphas(data.draw, len(scales), 2)
    x = torch.randn(1, length, 2, dtype=torch.float64)

    def energy(u: torch.Tensor) -> torch.Tensor:  # Σ_k uᵀ(−Δ_{h_k})u per channel, for every scale used
        return torch.stack([-(u * laplacian(u, h)).sum(1) for h in (1, 2, 4)])

    previous = energy(x)
    for _ in range(8):
        x = diffusion_step(x, alphas, scales)
        current = energy(x)
        assert (current <= previous + 1e-10).all()
        previous = current


@FAST
@given(batch=padded_batch(), h=st.integers(1, 9))
def test_mean_of_each_sequence_is_conserved(batch: tuple[torch.Tensor, torch.Tensor], h: int) -> None:
    x, lengths = batch
    out = laplacian(x, h=h, lengths=lengths)
    torch.testing.assert_close(out.sum(1), torch.zeros_like(out.sum(1)), atol=1e-10, rtol=0)


@FAST
@given(batch=padded_batch(), h=st.integers(1, 9), extra=st.integers(0, 5))
def test_laplacian_ignores_padding_content_and_length(
    batch: tuple[torch.Tensor, torch.Tensor], h: int, extra: int
) -> None:
    x, lengths = batch
    out = laplacian(x, h=h, lengths=lengths)
    valid = torch.arange(x.shape[1])[None, :, None] < lengths[:, None, None]
    assert (out[~valid.expand_as(out)] == 0).all()
    garbage = torch.where(valid, x, 1e6 * torch.randn_like(x))
    longer = torch.cat([garbage, torch.randn(x.shape[0], extra, x.shape[2], dtype=x.dtype)], dim=1)
    out_other = laplacian(longer, h=h, lengths=lengths)
    torch.testing.assert_close(out_other[:, : x.shape[1]], out)
    for b, n in enumerate(lengths.tolist()):  # each sequence alone, unpadded
        torch.testing.assert_close(out[b, :n], laplacian(x[b : b + 1, :n], h=h)[0])


@pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
@FAST
@given(batch=padded_batch(), scales=st.sampled_from(SCALE_SETS), extra=st.integers(0, 5))
def test_diffusion_layer_ignores_padding(
    batch: tuple[torch.Tensor, torch.Tensor], scales: tuple[int, ...], extra: int, fused: bool
) -> None:
    x, lengths = batch
    layer = DiffusionLayer(3, scales, fused=fused).double()
    with torch.no_grad():
        layer.norm.weight.uniform_(0.5, 1.5)
        layer.norm.bias.uniform_(-1, 1)  # a nonzero bias is what would turn padding into garbage
    out = layer(x, lengths)
    valid = torch.arange(x.shape[1])[None, :, None] < lengths[:, None, None]
    assert (out[~valid.expand_as(out)] == 0).all(), "padded positions must stay exactly 0"
    garbage = torch.where(valid, x, 1e3 * torch.randn_like(x))
    longer = torch.cat([garbage, torch.randn(x.shape[0], extra, 3, dtype=x.dtype)], dim=1)
    torch.testing.assert_close(layer(longer, lengths)[:, : x.shape[1]], out)
    for b, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(out[b, :n], layer(x[b : b + 1, :n])[0])


@pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
@pytest.mark.parametrize("scales", SCALE_SETS)
def test_layer_is_the_papers_update_then_layernorm(scales: tuple[int, ...], fused: bool) -> None:
    layer = DiffusionLayer(6, scales, fused=fused).double()
    x = torch.randn(2, 11, 6, dtype=torch.float64)
    alphas = layer.alphas()
    update = x + sum(alphas[k] * laplacian(x, h) for k, h in enumerate(scales))
    torch.testing.assert_close(layer(x), F.layer_norm(update, (6,), layer.norm.weight, layer.norm.bias))


def test_initial_alphas_follow_the_paper() -> None:
    torch.testing.assert_close(DiffusionLayer(4).alphas(), torch.full((1, 4), 0.1))
    expected = torch.tensor([0.1, 0.06, 0.03])[:, None].expand(3, 4)
    torch.testing.assert_close(DiffusionLayer(4, (1, 2, 4)).alphas(), expected)
    with pytest.raises(ValueError, match="sum < 1/2"):
        DiffusionLayer(4, (1, 2, 4), alpha_init=0.3)


@pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
@settings(max_examples=25, deadline=None)
@given(
    scales=st.sampled_from(SCALE_SETS),
    lr=st.floats(1, 1e4),
    steps=st.integers(1, 20),
    sign=st.sampled_from([-1, 1]),
)
def test_alphas_stay_admissible_after_large_gradient_steps(
    scales: tuple[int, ...], lr: float, steps: int, sign: int, fused: bool
) -> None:
    # Only α trains, with huge steps that push θ far either way; the map θ ↦ α must still land inside.
    layer = DiffusionLayer(4, scales, norm=False, fused=fused)
    opt = torch.optim.SGD(layer.step_sizes.parameters(), lr=lr)
    x = torch.randn(2, 16, 4)
    for _ in range(steps):
        opt.zero_grad()
        (sign * layer(x).pow(2).mul(torch.arange(4.0)).sum()).backward()
        opt.step()
        alphas = layer.alphas()
        assert torch.isfinite(alphas).all()
        assert (alphas >= 0).all() and (alphas.sum(0) <= 0.5).all()


@pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
@pytest.mark.parametrize("scales", SCALE_SETS)
def test_gradient_reaches_alpha(scales: tuple[int, ...], fused: bool) -> None:
    layer = DiffusionLayer(4, scales, norm=False, fused=fused)
    x = torch.randn(2, 16, 4)
    (layer(x) * torch.randn(2, 16, 4)).sum().backward()
    grad = layer.step_sizes.theta.grad
    assert grad is not None and torch.isfinite(grad).all() and (grad.abs() > 0).all()


@settings(max_examples=15, deadline=None)
@given(batch=padded_batch(max_len=9), scales=st.sampled_from([(1,), (3,), (1, 2, 4)]))
def test_hand_written_backward_matches_numerical_gradient(
    batch: tuple[torch.Tensor, torch.Tensor], scales: tuple[int, ...]
) -> None:
    x, lengths = batch
    x.requires_grad_(True)
    alphas = (torch.rand(len(scales), 3, dtype=torch.float64) * 0.1).requires_grad_(True)
    for lens in (None, lengths):
        assert torch.autograd.gradcheck(
            lambda u, a, lens=lens: diffusion_step(u, a, scales, lengths=lens), (x, alphas)
        )


def test_rejects_bad_lengths_with_a_clear_message() -> None:
    x = torch.randn(2, 5, 3)
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, 5\]"):
        laplacian(x, lengths=torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="shape"):
        laplacian(x, lengths=torch.tensor([5]))


def test_pseudo_time_operators_keep_rows_probability_distributions() -> None:
    # Diffusion and reaction–diffusion applied to attention rows: non-negative, each row sums to 1.
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(2, 3, 7, 7, dtype=torch.float64), -1)
    lengths = torch.tensor([7, 4])
    probs = probs * (torch.arange(7) < lengths[:, None])[:, None, None, :]
    probs = probs / probs.sum(-1, keepdim=True)
    react = PseudoTimeReactionDiffusion(3, (1, 2), alpha_init=0.2, steps=4).double()
    out = react(probs, lengths)
    assert (out >= 0).all()
    torch.testing.assert_close(out.sum(-1), torch.ones(2, 3, 7, dtype=torch.float64))
    assert (out[1, :, :, 4:] == 0).all(), "no weight may flow onto padded keys"
    # Evolving V = evolving A's rows: row sums of the implied weights are conserved (all-ones V stays 1).
    ones = torch.ones(2, 7, 5, dtype=torch.float64)
    for op in (PseudoTimeDiffusion(5, (1, 2, 4), 0.1, steps=3), PseudoTimeWave(5, (1,), 0.1, steps=3)):
        torch.testing.assert_close(op.double()(ones), ones)


@pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
@pytest.mark.parametrize("scales", [(2,), (1, 2, 4)])
def test_inverse_h2_scaling_has_the_eq11_spectrum(scales: tuple[int, ...], fused: bool) -> None:
    # On the k-th DCT-II mode (ω = πk/L) the bare step multiplies by H(ω) = 1 − 4 Σ α_k sin²(ω h_k/2) / h_k².
    length = 24
    basis = torch.from_numpy(scipy.fft.idct(np.eye(length), type=2, norm="ortho", axis=0)).to(DEVICE)
    layer = DiffusionLayer(length, scales, norm=False, stencil_scaling="inverse_h2", fused=fused).double()
    with torch.no_grad():
        layer.step_sizes.theta.copy_(torch.randn_like(layer.step_sizes.theta))  # α differ per channel: a test
    alphas = layer.alphas().double()  # (K, C): column c of the basis is mode c, diffused with α[:, c]
    out = layer(basis[None])[0]
    omega = torch.pi * torch.arange(length, dtype=torch.float64) / length
    h = torch.tensor(scales, dtype=torch.float64)[:, None]
    response = 1 - 4 * (alphas * torch.sin(omega[None] * h / 2) ** 2 / h**2).sum(0)  # H per mode
    torch.testing.assert_close(out, basis * response)
    assert (response.abs() <= 1 + 1e-12).all(), "still non-expansive: Σ α_k / h_k² ≤ Σ α_k ≤ ½"
    unit = DiffusionLayer(length, scales, norm=False, fused=fused).double()
    unit.load_state_dict(layer.state_dict())
    assert not torch.allclose(unit(basis[None])[0], out), "the scaling must change the operator"


def test_multiscale_init_paper_and_normalised() -> None:
    paper = DiffusionLayer(4, (1, 2, 4), alpha_init=0.2).alphas()[:, 0]
    torch.testing.assert_close(paper, torch.tensor([0.2, 0.12, 0.06]))
    normalised = DiffusionLayer(4, (1, 2, 4), alpha_init=0.2, multiscale_init="normalised").alphas()[:, 0]
    torch.testing.assert_close(normalised, torch.tensor([1.0, 0.6, 0.3]) / 1.9 * 0.2)
    torch.testing.assert_close(normalised.sum(), torch.tensor(0.2))
    # One scale: both are alpha_init; normalised allows an alpha_init the paper's ratios would push past ½.
    torch.testing.assert_close(
        DiffusionLayer(4, (2,), 0.2, multiscale_init="normalised").alphas(), torch.full((1, 4), 0.2)
    )
    assert (
        DiffusionLayer(4, (1, 2, 4), alpha_init=0.4, multiscale_init="normalised").alphas().sum(0).max() < 0.5
    )
    with pytest.raises(ValueError, match="multiscale_init"):
        DiffusionLayer(4, (1, 2), multiscale_init="uniform")
    with pytest.raises(ValueError, match="stencil_scaling"):
        DiffusionLayer(4, (1, 2), stencil_scaling="h2")
