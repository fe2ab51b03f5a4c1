"""Continuous-Time Attention's PDE schemes: stability on both sides of each bound, conservation, the variants.

Each scheme is run many steps at step sizes just inside its admissible region (bounded) and just outside
(blows up, or breaks the maximum principle where that is what the bound promises).
"""

from __future__ import annotations

import math

import pytest
import torch

from pdelra.nn.model import VARIANTS, LRAClassifier, ModelConfig
from pdelra.nn.ops import PseudoTimeDiffusion, PseudoTimeReactionDiffusion, PseudoTimeWave
from pdelra.nn.pde_schemes import (
    PseudoTimeAdvectionDiffusion,
    advection_diffusion_step,
    central_difference,
)

L = 48
STEPS = 4000


def _coeff(value: float) -> torch.Tensor:
    return torch.tensor([[value]], dtype=torch.float64)  # (K=1, channels broadcast)


def transfer_matrix(alpha: float, beta: float, scales: tuple[int, ...] = (1,)) -> torch.Tensor:
    """Mᵀ as a dense (L, L) matrix: one advection–diffusion step applied to the identity's columns."""
    eye = torch.eye(L, dtype=torch.float64)[None]  # (1, L, L): L channels, one per basis vector
    k = len(scales)
    alphas, betas = _coeff(alpha).repeat(k, 1) / k, _coeff(beta).repeat(k, 1) / k
    return advection_diffusion_step(eye, alphas, betas, scales)[0]


def evolve(step, x: torch.Tensor, n: int = STEPS) -> float:
    """max |x| after n steps (inf/nan once it overflowed)."""
    for _ in range(n):
        x = step(x)
    return x.abs().max().item()


# ------------------------------------------------------------------------------------ advection–diffusion


def test_central_difference_reflects_at_each_sequence_end_and_ignores_padding() -> None:
    x = torch.arange(6.0).view(1, 6, 1).repeat(2, 1, 1)
    full = central_difference(x[:1], 1)[0, :, 0]
    assert full.tolist() == [0.5, 1.0, 1.0, 1.0, 1.0, 0.5]  # ends: ½(x₁ − x₀), ½(x₅ − x₄)
    padded = x.clone()
    padded[1, 4:] = 99.0  # padding content must not leak
    out = central_difference(padded, 1, lengths=torch.tensor([6, 4]))
    assert out[1, :, 0].tolist() == [0.5, 1.0, 1.0, 0.5, 0.0, 0.0]
    assert central_difference(torch.ones(1, 7, 2), 3).abs().max() == 0  # a constant has no gradient


@pytest.mark.parametrize("scales", [(1,), (1, 2, 4)])
def test_inside_the_bound_every_evolved_row_stays_a_distribution(scales: tuple[int, ...]) -> None:
    """The construction (Σα < ½, |β| < 2α) makes Mᵀ row-stochastic for any parameters, even extreme ones."""
    torch.manual_seed(0)
    op = PseudoTimeAdvectionDiffusion(L, scales, alpha_init=0.1, steps=1).double()
    with torch.no_grad():
        op.step_sizes.theta.normal_(0, 4)
        op.drift.normal_(0, 6)  # drifts pushed hard against the |β| < 2α wall
    alphas, betas = op.alphas(), op.betas()
    assert (alphas.sum(0) < 0.5).all() and (betas.abs() < 2 * alphas).all()
    eye = torch.eye(L, dtype=torch.float64)[None]
    # Channel c of op(I) is Mᵀ's column c; per-channel α, β differ, so check each channel's own matrix.
    for c in range(0, L, 7):
        single = PseudoTimeAdvectionDiffusion(1, scales, 0.1, steps=1).double()
        with torch.no_grad():
            single.step_sizes.theta.copy_(op.step_sizes.theta[:, c : c + 1])
            single.drift.copy_(op.drift[:, c : c + 1])
        m_t = single(eye.transpose(1, 2).reshape(L, L, 1)).reshape(L, L).T  # rows: Mᵀ applied to e_j
        assert m_t.min() >= -1e-15
        assert torch.allclose(m_t.sum(1), torch.ones(L, dtype=torch.float64))


def test_attention_rows_conserve_mass_and_fused_equals_materialised() -> None:
    """(A Mᵀ) V = A (Mᵀ V): the operator on V evolves the attention rows, and they keep their sums."""
    torch.manual_seed(1)
    alpha, beta = 0.2, -0.35
    probs = torch.softmax(torch.randn(3, L, L, dtype=torch.float64), dim=-1)  # (B, queries, keys)
    m_t = transfer_matrix(alpha, beta)
    evolved = probs
    for _ in range(5):
        evolved = evolved @ m_t
    assert torch.allclose(evolved.sum(-1), torch.ones(3, L, dtype=torch.float64))
    assert evolved.min() >= 0
    v = torch.randn(3, L, 4, dtype=torch.float64)
    fused = v
    for _ in range(5):
        fused = advection_diffusion_step(fused, _coeff(alpha), _coeff(beta), (1,))
    assert torch.allclose(evolved @ v, probs @ fused)


def test_diffusion_bound_alpha_half_both_sides() -> None:
    x0 = torch.randn(1, L, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    inside = evolve(lambda x: advection_diffusion_step(x, _coeff(0.5), _coeff(1.0), (1,)), x0)
    assert inside <= x0.abs().max().item() + 1e-12  # maximum principle: never above the initial max
    outside = evolve(lambda x: advection_diffusion_step(x, _coeff(0.52), _coeff(0.0), (1,)), x0)
    assert not math.isfinite(outside) or outside > 1e6


def test_drift_bound_both_sides() -> None:
    """|β| ≤ 2α: maximum principle for thousands of steps; just past it the principle fails at the first step;
    well past the (periodic) von Neumann bound β² ≤ 2α the scheme blows up."""
    alpha = 0.05
    at_bound = transfer_matrix(alpha, 2 * alpha)
    assert at_bound.min() >= 0
    x0 = torch.randn(1, L, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    bounded = evolve(lambda x: advection_diffusion_step(x, _coeff(alpha), _coeff(2 * alpha), (1,)), x0)
    assert bounded <= x0.abs().max().item() + 1e-12

    past = transfer_matrix(alpha, 2.1 * alpha)
    assert past.min() < 0  # a negative weight: rows are no longer distributions
    row = int(past.min(dim=1).values.argmin())
    signs = torch.sign(past[row]).view(1, L, 1)  # |x|∞ = 1, the worst case for that row
    one_step = advection_diffusion_step(signs, _coeff(alpha), _coeff(2.1 * alpha), (1,))
    assert one_step.abs().max() > 1 + 1e-3  # ... and the maximum principle fails

    far = evolve(lambda x: advection_diffusion_step(x, _coeff(alpha), _coeff(10 * alpha), (1,)), x0)
    assert not math.isfinite(far) or far > 1e6
    assert (10 * alpha) ** 2 > 2 * alpha  # that point is past the von Neumann bound


def test_advection_diffusion_starts_as_diffusion_and_respects_padding() -> None:
    torch.manual_seed(4)
    ad = PseudoTimeAdvectionDiffusion(8, (1,), 0.1, steps=2)
    heat = PseudoTimeDiffusion(8, (1,), 0.1, steps=2)
    x = torch.randn(2, 10, 8)
    assert torch.allclose(ad(x), heat(x), atol=1e-6)  # β = 0 at init
    with torch.no_grad():
        ad.drift.fill_(0.7)
    lengths = torch.tensor([10, 6])
    noisy = x.clone()
    noisy[1, 6:] = 1e3
    out_a, out_b = ad(x, lengths), ad(noisy, lengths)
    assert torch.allclose(out_a[1, :6], out_b[1, :6]) and out_b[1, 6:].abs().max() == 0
    assert torch.allclose(ad(x[1:, :6]), out_a[1:, :6], atol=1e-6)  # padding = the unpadded sequence


@pytest.mark.parametrize("steps", [1, 2, 4])
def test_steps_compose_single_steps(steps: int) -> None:
    torch.manual_seed(5)
    op = PseudoTimeAdvectionDiffusion(4, (1, 2), 0.1, steps=steps)
    with torch.no_grad():
        op.drift.normal_()
    one = PseudoTimeAdvectionDiffusion(4, (1, 2), 0.1, steps=1)
    one.load_state_dict(op.state_dict())
    x = torch.randn(2, 12, 4)
    expected = x
    for _ in range(steps):
        expected = one(expected)
    assert torch.allclose(op(x), expected, atol=1e-6)


# ------------------------------------------------------------------------------------------- wave


def _wave_with(alpha: float, steps: int) -> PseudoTimeWave:
    """A wave operator whose α is set directly (past the construction's bound, for the unstable side)."""
    op = PseudoTimeWave(2, (1,), 0.1, steps=steps).double()
    op.alphas = lambda: torch.full((1, 2), alpha, dtype=torch.float64)  # type: ignore[method-assign]
    return op


def test_wave_bounded_inside_the_leapfrog_limit_and_blows_up_past_it() -> None:
    """Leapfrog with L = αΔ is stable while L's spectrum lies in [−4, 0], i.e. α ≤ 1 (Δ's eigenvalues > −4);
    the construction keeps α < ½, twice inside. Both sides, over thousands of steps."""
    x0 = torch.randn(1, L, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    for alpha in (0.4999, 0.97):
        assert _wave_with(alpha, STEPS)(x0).abs().max() < 50 * x0.abs().max()
    blown = _wave_with(1.05, STEPS)(x0).abs().max().item()
    assert not math.isfinite(blown) or blown > 1e6


def test_wave_and_diffusion_conserve_attention_row_sums() -> None:
    """Row sums of A p(L) equal A's when p(L) 1 = 1: both act on V = 1 as the identity."""
    ones = torch.ones(2, 20, 3)
    lengths = torch.tensor([20, 13])
    for op in (PseudoTimeWave(3, (1, 2), 0.2, 4), PseudoTimeDiffusion(3, (1, 2, 4), 0.1, 4)):
        out = op(ones, lengths)
        assert torch.allclose(out[0], torch.ones(20, 3), atol=1e-6)
        assert torch.allclose(out[1, :13], torch.ones(13, 3), atol=1e-6)


def test_reaction_diffusion_rows_are_renormalised_distributions() -> None:
    torch.manual_seed(7)
    op = PseudoTimeReactionDiffusion(n_heads=2, scales=(1,), alpha_init=0.2, steps=4)
    probs = torch.softmax(torch.randn(3, 2, 9, 9), dim=-1)
    out = op(probs)
    assert torch.allclose(out.sum(-1), torch.ones(3, 2, 9), atol=1e-6) and out.min() >= 0


# ----------------------------------------------------------------------------------------- the variants


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.startswith("cta_")])
def test_cta_variants_train_and_ignore_padding(variant: str) -> None:
    torch.manual_seed(8)
    cfg = ModelConfig(
        vocab_size=11, num_classes=3, max_length=16, d_model=16, n_layers=2, n_heads=2, d_mlp=32,
        dropout=0.0, variant=variant, cta_steps=2,
    )  # fmt: skip
    model = LRAClassifier(cfg)
    tokens = torch.randint(1, 11, (2, 16))
    lengths = torch.tensor([16, 9])
    out = model(tokens, lengths)
    other = tokens.clone()
    other[1, 9:] = 5
    assert torch.allclose(out, model(other, lengths), atol=1e-5)
    out.sum().backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "attn_values" in n)
    assert model.alpha_summary()  # the CTA step sizes are reported like the diffusion layers'
