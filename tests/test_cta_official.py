"""Continuous-Time Attention as its authors run it (pdelra.nn.cta_official): the operator against a naive loop
over positions written from the official update rule, hand-computed cases, the official tests' invariants, and
the two official models (classifier backbone, causal LM)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pdelra.nn.cta_official import (
    KINDS,
    OFFICIAL_INIT,
    OFFICIAL_VARIANTS,
    OfficialCTALM,
    PDERefinement,
    pde_step,
)
from pdelra.nn.model import LRAClassifier, ModelConfig

# ------------------------------------------------------------------------------------------- the operator


def naive_step(
    x: torch.Tensor, kind: str, alpha: float, beta: float, causal: bool, mask: list[list[int]] | None
):
    """The official rule, one position and channel at a time, in float64: position i is updated from the
    three stencil positions (i−1, i, i+1), or (i−2, i−1, i) when causal, and only if all three are valid."""
    b, n, c = x.shape
    u = x.double().tolist()
    out = x.double().clone()
    for bi in range(b):
        for i in range(2 if causal else 1, n if causal else n - 1):
            s = (i - 2, i - 1, i) if causal else (i - 1, i, i + 1)
            if mask is not None and not all(mask[bi][j] for j in s):
                continue
            for ci in range(c):
                left, mid, right = (u[bi][j][ci] for j in s)
                me = u[bi][i][ci]
                lap = right - 2 * mid + left
                if kind == "diffusion":
                    du = alpha * lap
                elif kind == "wave":
                    du = alpha**2 * lap
                elif kind == "reaction-diffusion":
                    du = alpha * lap + beta * me * (1 - 1 / (1 + math.exp(-me)))
                else:
                    grad = me - u[bi][i - 1][ci] if causal else (right - left) / 2
                    du = alpha * lap + beta * grad
                out[bi, i, ci] = me + du
    return out


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_pde_step_agrees_with_a_naive_loop_over_positions(kind: str, causal: bool, padded: bool) -> None:
    torch.manual_seed(3)
    x = torch.randn(3, 9, 4)
    mask = [[1] * 9, [1] * 5 + [0] * 4, [1, 1, 0, 1, 1, 1, 1, 0, 0]] if padded else None  # a hole too
    alpha, beta = 0.37, -0.21  # away from the defaults, β negative: every term shows
    got = pde_step(x, kind, alpha, beta, causal, None if mask is None else torch.tensor(mask))
    assert got.dtype == torch.float32
    torch.testing.assert_close(
        got.double(), naive_step(x, kind, alpha, beta, causal, mask), atol=1e-6, rtol=1e-6
    )


SPIKE = [0.0, 0.0, 1.0, 0.0, 0.0]
RAMP = [0.0, 1.0, 2.0, 4.0, 8.0]
REACTED = 2 + 0.5 * 2 * (1 - 1 / (1 + math.exp(-2)))  # u = 2, β = ½


@pytest.mark.parametrize(
    ("kind", "alpha", "beta", "causal", "x", "expected"),
    [
        ("diffusion", 0.1, 0.0, False, SPIKE, [0, 0.1, 0.8, 0.1, 0]),
        ("diffusion", 0.1, 0.0, False, [1, 0, 0, 0, 1], [1, 0.1, 0, 0.1, 1]),  # fixed ends: 0 and L−1 stay
        ("diffusion", 0.1, 0.0, True, SPIKE, [0, 0, 1.1, -0.2, 0.1]),  # Δ centred at i − 1 updates i
        ("wave", 0.5, 0.0, False, SPIKE, [0, 0.25, 0.5, 0.25, 0]),  # α² Δu
        ("wave", 0.5, 0.0, True, SPIKE, [0, 0, 1.25, -0.5, 0.25]),
        ("advection-diffusion", 0.0, 0.2, False, RAMP, [0, 1.2, 2.3, 4.6, 8]),  # β (u_{i+1} − u_{i−1}) / 2
        ("advection-diffusion", 0.0, 0.2, True, RAMP, [0, 1, 2.2, 4.4, 8.8]),  # β (u_i − u_{i−1})
        ("reaction-diffusion", 0.0, 0.5, False, [2] * 5, [2, REACTED, REACTED, REACTED, 2]),  # β u (1 − σ(u))
        ("reaction-diffusion", 0.0, 0.5, True, [2] * 5, [2, 2, REACTED, REACTED, REACTED]),
    ],
)  # fmt: skip
def test_hand_computed_steps(
    kind: str, alpha: float, beta: float, causal: bool, x: list, expected: list
) -> None:
    got = pde_step(torch.tensor(x, dtype=torch.float32)[None, :, None], kind, alpha, beta, causal)
    torch.testing.assert_close(got[0, :, 0], torch.tensor(expected, dtype=torch.float32))


def test_a_padded_sequence_updates_only_whole_stencils() -> None:
    x = torch.tensor([1.0, 2, 4, 8, 16, 99, 99])[None, :, None]
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]])
    # Non-causal: the last valid token (16) reads padding, so it stays, like a fixed end.
    got = pde_step(x, "diffusion", 0.1, attention_mask=mask)[0, :, 0]
    torch.testing.assert_close(got, torch.tensor([1, 2.1, 4.2, 8.4, 16, 99, 99]))
    # Causal: the last valid token's stencil (4, 8, 16) is whole, so it is updated.
    got = pde_step(x, "diffusion", 0.1, causal=True, attention_mask=mask)[0, :, 0]
    torch.testing.assert_close(got, torch.tensor([1, 2, 4.1, 8.2, 16.4, 99, 99]))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("length", [1, 2])
def test_sequences_shorter_than_three_pass_through(length: int, kind: str, causal: bool) -> None:
    x = torch.randn(2, length, 3)
    assert pde_step(x, kind, 0.3, 0.3, causal) is x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_shape_dtype_kept_and_arithmetic_in_float32(kind: str, causal: bool, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 17, 8, dtype=dtype)
    y = pde_step(x, kind, 0.1, 0.03, causal)
    assert y.shape == x.shape and y.dtype == dtype
    # The official layer computes in float32 whatever the input (float64 too), then casts back.
    expected = pde_step(x.float(), kind, 0.1, 0.03, causal).to(dtype)
    torch.testing.assert_close(y, expected, atol=0, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_padding_unchanged_and_valid_outputs_ignore_padding_content(kind: str, causal: bool) -> None:
    torch.manual_seed(7)
    x = torch.randn(1, 12, 4)
    mask = torch.ones(1, 12, dtype=torch.long)
    mask[:, 8:] = 0
    y1 = pde_step(x, kind, 0.1, 0.03, causal, mask)
    torch.testing.assert_close(y1[:, 8:], x[:, 8:], atol=0, rtol=0)
    x2 = x.clone()
    x2[:, 8:] = 1e3 * torch.randn(1, 4, 4)
    torch.testing.assert_close(pde_step(x2, kind, 0.1, 0.03, causal, mask)[:, :8], y1[:, :8], atol=0, rtol=0)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="unknown PDE kind 'heat'"):
        pde_step(torch.zeros(1, 4, 1), "heat", 0.1)
    with pytest.raises(ValueError, match="batch, length, channels"):
        pde_step(torch.zeros(4, 1), "diffusion", 0.1)
    with pytest.raises(ValueError, match="attention_mask must be"):
        pde_step(torch.zeros(1, 4, 1), "diffusion", 0.1, attention_mask=torch.ones(1, 5))


@pytest.mark.parametrize("kind", KINDS)
def test_refinement_has_separate_steps_at_the_official_initial_values(kind: str) -> None:
    op = PDERefinement(kind, steps=3)
    alpha0, beta0 = OFFICIAL_INIT[kind]
    per_step = 1 if beta0 is None else 2
    assert sum(p.numel() for p in op.parameters()) == 3 * per_step  # one α (and β) per step, not shared
    assert op.alphas().shape == (1, 3) and torch.allclose(op.alphas(), torch.tensor(alpha0))
    for step in op.steps:
        assert step.beta is None if beta0 is None else step.beta.item() == pytest.approx(beta0)
    # Three steps = pde_step three times with each step's parameters; every parameter learns.
    for i, step in enumerate(op.steps):
        step.alpha.data.fill_(0.1 * (i + 1))
    x, lengths = torch.randn(2, 10, 4), torch.tensor([10, 6])
    y = op(x, lengths)
    expected, mask = x, torch.arange(10) < lengths[:, None]
    for step in op.steps:
        expected = pde_step(expected, kind, step.alpha, 0.0 if step.beta is None else step.beta, False, mask)
    torch.testing.assert_close(y, expected)
    (y * torch.randn_like(y)).sum().backward()
    assert all(p.grad is not None and p.grad.abs() > 0 for p in op.parameters())


# ------------------------------------------------------------------------------------------- the models

TINY = {
    "vocab_size": 11,
    "num_classes": 3,
    "max_length": 16,
    "d_model": 16,
    "n_layers": 2,
    "n_heads": 2,
    "d_mlp": 32,
}


def _official(variant: str, **overrides: object) -> LRAClassifier:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**TINY, "variant": variant, "backbone": "official_cta", **overrides})  # type: ignore[arg-type]
    return LRAClassifier(cfg)


def test_official_classifier_is_their_post_ln_stack_with_refinement_after_each_layer() -> None:
    model = _official("cta_official_reaction_diffusion", cta_steps=2).eval()
    enc = model.encoder
    assert all(not layer.norm_first and layer.activation is F.relu for layer in enc.layers)
    assert enc.pos_emb.shape == (1, 16, 16) and 0.7 < enc.pos_emb.std().item() < 1.3  # randn, default init
    assert model.head.weight.std().item() > 0.05  # PyTorch's default Linear init, not GPT-2's 0.02
    tokens, lengths = torch.randint(0, 11, (3, 16)), torch.tensor([16, 7, 3])
    # Their forward, written out from src/models/transformers.py with this model's own modules.
    valid = torch.arange(16) < lengths[:, None]
    x = enc.tok_emb(tokens) + enc.pos_emb[:, :16]
    for layer, refine in zip(enc.layers, enc.block_output, strict=True):
        x = layer(x, src_key_padding_mask=~valid)
        for step in refine.steps:
            x = pde_step(x, "reaction-diffusion", step.alpha, step.beta, False, valid.long())
    pooled = (x * valid[..., None]).sum(1) / valid.sum(1, keepdim=True).clamp(min=1)
    torch.testing.assert_close(model(tokens, lengths), model.head(pooled))


@pytest.mark.parametrize("variant", ["none", *OFFICIAL_VARIANTS])
def test_official_classifier_ignores_padding_and_every_parameter_learns(variant: str) -> None:
    model = _official(variant).eval()
    tokens, lengths = torch.randint(0, 11, (3, 12)), torch.tensor([12, 7, 3])
    logits = model(tokens, lengths)
    other = torch.where(torch.arange(12) < lengths[:, None], tokens, (tokens + 5) % 11)
    other = torch.cat([other, torch.randint(0, 11, (3, 4))], dim=1)  # other content, longer padding
    torch.testing.assert_close(model(other, lengths), logits, atol=1e-5, rtol=1e-4)
    model.train()
    F.cross_entropy(model(tokens, lengths), torch.tensor([0, 1, 2])).backward()
    assert all(p.grad is not None for p in model.parameters())


def test_official_parameters_are_the_baseline_plus_one_alpha_beta_per_layer_and_step() -> None:
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    base = count(_official("none"))
    assert count(_official("cta_official_diffusion", cta_steps=4)) == base + 2 * 4
    assert count(_official("cta_official_advection_diffusion", cta_steps=1)) == base + 2 * 2


def test_backbone_and_variant_must_fit() -> None:
    with pytest.raises(ValueError, match="unknown backbone 'bert'"):
        ModelConfig(**{**TINY, "backbone": "bert"})  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match="'after_mlp' puts operators at mlp_output, which backbone 'official_cta'"
    ):
        ModelConfig(**{**TINY, "variant": "after_mlp", "backbone": "official_cta"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="official CTA models take variant none, cta_official_diffusion"):
        OfficialCTALM(ModelConfig(**{**TINY, "variant": "after_mlp"}))  # type: ignore[arg-type]


def test_the_official_operator_also_sits_after_each_pre_ln_block() -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**TINY, "variant": "cta_official_wave", "cta_steps": 2})  # type: ignore[arg-type]
    names = [n for n, m in LRAClassifier(cfg).named_modules() if isinstance(m, PDERefinement)]
    assert names == ["encoder.blocks.0.block_output", "encoder.blocks.1.block_output"]


@pytest.mark.parametrize("variant", ["none", "cta_official_diffusion", "cta_official_advection_diffusion"])
def test_official_lm_is_causal(variant: str) -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**TINY, "variant": variant, "backbone": "official_cta", "cta_steps": 2})  # type: ignore[arg-type]
    lm = OfficialCTALM(cfg).eval()
    tokens = torch.randint(0, 11, (2, 12))
    logits = lm(tokens)
    assert logits.shape == (2, 12, 11)
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 3) % 11  # the future of position 5
    torch.testing.assert_close(lm(changed)[:, :6], logits[:, :6])
    assert not torch.allclose(lm(changed)[:, 6:], logits[:, 6:])
    lengths = torch.tensor([12, 8])  # right padding: valid outputs ignore what the padding holds
    padded = tokens.clone()
    padded[1, 8:] = (padded[1, 8:] + 3) % 11
    torch.testing.assert_close(lm(padded, lengths)[1, :8], lm(tokens, lengths)[1, :8])


def test_pdelra_train_trains_the_official_classifier(tmp_path: Path) -> None:
    from test_training import make_task, run_config, train_in_process

    config = run_config(variant="cta_official_advection_diffusion", max_epochs=1)
    config["model"].update(backbone="official_cta", cta_steps=2)
    status, metrics = train_in_process(config, make_task(tmp_path / "processed"), tmp_path)
    assert status == 0 and metrics is not None and metrics["status"] == "completed"
    assert metrics["diffusion_parameter_count"] == 1 * 2 * 2  # 1 layer × 2 steps × (α, β)
    assert list(metrics["history"][0]["alpha"]) == ["encoder.block_output.0"]


def test_block_benchmark_times_the_official_block_beside_its_encoder_layer(tmp_path: Path) -> None:
    from pdelra.cli import main

    out = tmp_path / "cta_block.json"
    args = ["bench", "cta-block", "--length", "64", "--d-model", "32", "--heads", "4", "--d-mlp", "64",
            "--rounds", "2", "--warmup", "0", "--dtype", "float32", "--device", "cpu",
            "--json", str(out)]  # fmt: skip
    assert main(args) == 0
    figures = json.loads(out.read_text())
    assert (figures["length"], figures["steps"], figures["official_ratio"]) == (64, 4, 1.63)
    (row,) = figures["results"]
    assert row["path"] == "eager" and len(row["ratios"]) == 2 and row["ratio"] > 0
    with pytest.raises(SystemExit, match="unknown kind 'heat'"):
        main([*args[:2], "--kind", "heat"])
