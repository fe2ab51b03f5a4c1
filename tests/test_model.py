"""The LRA classifier (pdelra.nn.model): every variant runs, is padding-invariant, and puts diffusion where
DESIGN.md says; in_attention is exactly attention with its rows diffused along keys."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from reference import dense_laplacian

from pdelra.nn.model import SCALES, VARIANTS, LRAClassifier, ModelConfig, Padding, SelfAttention
from pdelra.nn.ops import DiffusionLayer

N_LAYERS = 3
TINY = {
    "vocab_size": 11,
    "num_classes": 4,
    "max_length": 24,
    "d_model": 16,
    "n_layers": N_LAYERS,
    "n_heads": 4,
    "d_mlp": 32,
}


def _model(variant: str, scale: str = "h1", **overrides: object) -> LRAClassifier:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**TINY, "variant": variant, "scale": scale, **overrides})  # type: ignore[arg-type]
    return LRAClassifier(cfg).eval()


def _batch(length: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(torch.get_default_device()).manual_seed(1)  # CUDA under PDELRA_TEST_DEVICE
    return torch.randint(0, 11, (3, length), generator=gen), torch.tensor([length, 9, 3])


# Every variant at h1, and every other scale once, on a variant whose diffusion acts along the sequence at
# every block (the scales differ only inside DiffusionLayer, so each further (variant, scale) pair repeats
# the same code). h4 meets the shortest sequence (3 valid tokens) with a stencil reaching past its end.
SCALE_CASES = [(variant, "h1") for variant in VARIANTS] + [
    ("in_attention", "h2"),
    ("before_layernorm", "h4"),
    ("after_mlp", "multi"),
]


def test_scale_cases_cover_every_variant_and_scale() -> None:
    assert {variant for variant, _ in SCALE_CASES} == set(VARIANTS)
    assert {scale for _, scale in SCALE_CASES} == set(SCALES)


@pytest.mark.parametrize(("variant", "scale"), SCALE_CASES)
def test_every_variant_runs_and_ignores_padding(variant: str, scale: str) -> None:
    model = _model(variant, scale)
    tokens, lengths = _batch()
    logits = model(tokens, lengths)
    assert logits.shape == (3, 4) and torch.isfinite(logits).all()
    # Different padding content and padding length must give the same logits.
    other = torch.where(torch.arange(20) < lengths[:, None], tokens, (tokens + 5) % 11)
    other = torch.cat([other, torch.randint(0, 11, (3, 4))], dim=1)
    torch.testing.assert_close(model(other, lengths), logits, atol=1e-5, rtol=1e-4)
    # Training mode: gradients reach every parameter and are finite.
    model.train()
    F.cross_entropy(model(tokens, lengths), torch.tensor([0, 1, 2])).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, f"{name} got no gradient"
        assert torch.isfinite(param.grad).all(), f"{name} has a non-finite gradient"


def test_token_zero_is_not_padding() -> None:
    # The original LRA code masked token 0 (black pixels) as padding; here only lengths decide.
    model = _model("after_embedding")
    tokens = torch.tensor([[3, 4, 5, 0, 0, 0]])
    full = model(tokens, torch.tensor([6]))
    truncated = model(tokens, torch.tensor([3]))
    assert not torch.allclose(full, truncated)


def _layer_names(model: LRAClassifier) -> list[str]:
    return [name for name, m in model.named_modules() if isinstance(m, DiffusionLayer)]


EXPECTED_PLACES = {  # variant → the DiffusionLayer module names DESIGN.md's table implies, for 3 blocks
    "none": [],
    "after_embedding": ["encoder.embedding"],
    "after_mlp": [f"encoder.blocks.{i}.mlp_output" for i in range(N_LAYERS)],
    "between_layers": [f"encoder.between_blocks.{i}" for i in range(N_LAYERS - 1)],
    "before_layernorm": [
        f"encoder.blocks.{i}.{p}" for i in range(N_LAYERS) for p in ("attn_input", "mlp_input")
    ],
    "in_attention": [f"encoder.blocks.{i}.attn.attn_values" for i in range(N_LAYERS)],
    "across_heads": [f"encoder.blocks.{i}.attn.attn_heads.diffusion" for i in range(N_LAYERS)],
    "after_attention": [f"encoder.blocks.{i}.attn_output" for i in range(N_LAYERS)],
}


@pytest.mark.parametrize("variant", list(EXPECTED_PLACES))
def test_each_position_places_layers_where_design_says(variant: str) -> None:
    model = _model(variant)
    assert sorted(_layer_names(model)) == sorted(EXPECTED_PLACES[variant])
    summary = model.alpha_summary()
    assert len(summary) == len(EXPECTED_PLACES[variant])
    for stats in summary.values():
        assert stats["min"] == pytest.approx(0.1) and stats["max"] == pytest.approx(0.1)


def test_none_has_no_diffusion_parameters() -> None:
    model = _model("none")
    assert model.alpha_summary() == {}
    names = [n for n, _ in model.named_parameters()]
    assert not any("theta" in n or "step_sizes" in n for n in names)
    base = sum(p.numel() for p in model.parameters())
    with_layer = sum(p.numel() for p in _model("after_embedding").parameters())
    assert with_layer - base == 16 * 3  # one α per channel + LayerNorm weight and bias


def test_in_attention_only_layers_have_no_layernorm() -> None:
    model = _model("in_attention")
    for block in model.encoder.blocks:
        assert block.attn.attn_values.norm is None


@pytest.mark.parametrize("scale", list(SCALES))
def test_in_attention_equals_diffusing_materialised_attention_rows(scale: str) -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**TINY, "variant": "in_attention", "scale": scale})  # type: ignore[arg-type]
    attn = SelfAttention(cfg).double().eval()
    with torch.no_grad():  # distinct α per channel so the check is not blind to a channel mix-up
        attn.attn_values.step_sizes.theta.add_(torch.randn_like(attn.attn_values.step_sizes.theta))
    b, n, d, heads = 2, 10, cfg.d_model, cfg.n_heads
    x = torch.randn(b, n, d, dtype=torch.float64)
    lengths = torch.tensor([10, 6])
    out, _ = attn(x, Padding.from_lengths(lengths, n))

    q, k, v = attn.qkv(x).split(d, dim=2)
    q, k, v = (t.view(b, n, heads, -1).transpose(1, 2) for t in (q, k, v))  # (B, H, L, dh)
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~(torch.arange(n) < lengths[:, None])[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, -1)  # (B, H, Lq, Lk), materialised
    alphas = attn.attn_values.alphas().double().view(len(SCALES[scale]), heads, -1)  # (K, H, dh)
    expected = torch.zeros_like(v)
    for bi in range(b):
        deltas = [
            torch.from_numpy(dense_laplacian(n, h, int(lengths[bi]))).to(v.device) for h in SCALES[scale]
        ]
        for hi in range(heads):
            for c in range(v.shape[-1]):
                # Rows diffused along keys: A ← A + Σ_k α_k A Δ_k (Δ symmetric, so this is Δ_k on each row).
                rows = probs[bi, hi] + sum(
                    alphas[kk, hi, c] * probs[bi, hi] @ dk for kk, dk in enumerate(deltas)
                )
                assert (rows >= -1e-12).all()
                torch.testing.assert_close(rows.sum(-1), torch.ones(n, dtype=torch.float64))
                expected[bi, hi, :, c] = rows @ v[bi, hi, :, c]
    expected = attn.proj(expected.transpose(1, 2).reshape(b, n, d))
    valid = torch.arange(n) < lengths[:, None]
    torch.testing.assert_close(out[valid], expected[valid])


def test_fused_attention_is_used_except_for_reaction_diffusion(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = F.scaled_dot_product_attention
    monkeypatch.setattr(
        F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or original(*a, **kw)
    )
    tokens, lengths = _batch()
    for variant in VARIANTS:
        calls.clear()
        _model(variant)(tokens, lengths)
        expected = 0 if variant == "cta_reaction_diffusion" else N_LAYERS
        assert len(calls) == expected, f"{variant}: {len(calls)} fused attention calls, expected {expected}"


def test_two_tower_uses_both_documents_with_a_shared_encoder() -> None:
    model = _model("after_embedding", two_tower=True)
    tokens, lengths = _batch()
    tokens2, lengths2 = tokens.flip(0), lengths.flip(0)
    logits = model(tokens, lengths, tokens2, lengths2)
    assert logits.shape == (3, 4) and torch.isfinite(logits).all()
    assert not torch.allclose(model(tokens, lengths, tokens, lengths), logits)
    assert len(_layer_names(model)) == 1, "the two towers share one encoder"
    with pytest.raises(ValueError, match="tokens2"):
        model(tokens, lengths)


def test_physqk_ad_parameters_are_in_range_and_learn() -> None:
    model = _model("physqk_ad").train()
    tokens, lengths = _batch()
    F.cross_entropy(model(tokens, lengths), torch.tensor([0, 1, 2])).backward()
    summary = model.alpha_summary()
    assert sorted(summary) == [f"encoder.blocks.{i}.coordinates" for i in range(N_LAYERS)]
    assert all(stats["mean"] == pytest.approx(0.5) for stats in summary.values())
    for block in model.encoder.blocks:
        flow = block.coordinates
        assert flow.w_alpha.grad is not None and flow.w_alpha.grad.abs() > 0
        assert flow.w_eta.grad is not None and flow.w_eta.grad.abs() > 0


def test_config_errors_name_the_bad_value() -> None:
    with pytest.raises(ValueError, match="unknown variant 'after_everything'"):
        ModelConfig(**{**TINY, "variant": "after_everything"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown scale 'h3'"):
        ModelConfig(**{**TINY, "scale": "h3"})  # type: ignore[arg-type]
    model = _model("none")
    with pytest.raises(ValueError, match="max_length 24"):
        model(torch.zeros(1, 30, dtype=torch.long), torch.tensor([30]))
    with pytest.raises(ValueError, match="lengths must lie in"):
        model(torch.zeros(1, 5, dtype=torch.long), torch.tensor([0]))


def test_physqk_transports_coordinates_with_the_blocks_own_attention() -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**TINY, "variant": "physqk"})  # type: ignore[arg-type]
    attn = SelfAttention(cfg).double().eval()
    b, n, d, heads = 2, 9, cfg.d_model, cfg.n_heads
    x, r = torch.randn(b, n, d, dtype=torch.float64), torch.randn(b, n, d, dtype=torch.float64)
    lengths = torch.tensor([9, 5])
    _, transported = attn(x, Padding.from_lengths(lengths, n), r)

    q, k, _ = attn.qkv(x).split(d, dim=2)
    q, k, rh = (t.view(b, n, heads, -1).transpose(1, 2) for t in (q, k, r))
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~(torch.arange(n) < lengths[:, None])[:, None, None, :], float("-inf"))
    expected = (torch.softmax(scores, -1) @ rh).transpose(1, 2).reshape(b, n, d)  # A·r, per head
    torch.testing.assert_close(transported, expected)
