"""The fused diffusion operator (pdelra.nn.fused), compiled, against the eager reference (pdelra.nn.ops).

tests/test_ops.py runs the layer's properties against both paths with the fused functions executed eagerly
(conftest sets PDELRA_FUSED_COMPILE=0 for speed); here they are compiled by torch.compile, as in training,
and must agree with the eager reference in values and in every gradient. Runs on CUDA too
(PDELRA_TEST_DEVICE=cuda, see benchmarks/gpu_check.sh).
"""

from __future__ import annotations

import copy
import os

import pytest
import torch

from pdelra.nn import fused
from pdelra.nn.ops import DiffusionLayer

DEVICE = torch.device(os.environ.get("PDELRA_TEST_DEVICE") or "cpu")


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compile the fused functions in this test, with fresh compiled objects and counters."""
    import torch._dynamo

    monkeypatch.setattr(fused, "COMPILE", True)
    monkeypatch.setattr(fused, "_compiled", {})
    monkeypatch.setattr(fused, "_failed", False)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()


def _pair(channels: int, scales: tuple[int, ...], norm: bool, **kwargs: object):
    """An eager layer with non-trivial parameters and a fused copy holding the same parameters."""
    torch.manual_seed(0)
    eager = DiffusionLayer(channels, scales, norm=norm, **kwargs).to(DEVICE)  # type: ignore[arg-type]
    with torch.no_grad():
        eager.step_sizes.theta.add_(0.5 * torch.randn_like(eager.step_sizes.theta))
        if norm:
            eager.norm.weight.uniform_(0.5, 1.5)
            eager.norm.bias.uniform_(-1, 1)
    layer = copy.deepcopy(eager)
    layer.fused = True
    return eager, layer


def _assert_same(eager: DiffusionLayer, layer: DiffusionLayer, x: torch.Tensor, lengths: torch.Tensor | None):
    grad = torch.randn_like(x)
    outputs, grads = [], []
    for module in (eager, layer):
        module.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_(True)
        out = module(xi, lengths)
        out.backward(grad)
        outputs.append(out.detach())
        grads.append([xi.grad] + [p.grad for p in module.parameters()])
    tol = {"atol": 2e-5, "rtol": 2e-4} if x.dtype == torch.float32 else {}
    torch.testing.assert_close(outputs[1], outputs[0], **tol)
    names = ["x"] + [name for name, _ in eager.named_parameters()]
    for name, got, want in zip(names, grads[1], grads[0], strict=True):
        torch.testing.assert_close(got, want, **tol, msg=lambda m, name=name: f"gradient of {name}: {m}")


def test_compiled_fused_equals_eager_and_varying_lengths_do_not_recompile(compiled: None) -> None:
    # Multi-scale with LayerNorm, padded and full batches. Batches are trimmed to their longest sequence, so
    # B and L change every step: dynamic shapes must absorb that without a compile per shape.
    import torch._dynamo.utils

    eager, layer = _pair(8, (1, 2, 4), True)
    gen = torch.Generator().manual_seed(1)
    shapes = [
        (3, 7, [7, 4, 2]),
        (2, 12, None),
        (4, 5, [5, 5, 2, 3]),
        (5, 17, [17, 9, 4, 16, 8]),
        (3, 30, None),
    ]
    for batch, length, lengths in shapes:
        x = torch.randn(batch, length, 8, generator=gen, device="cpu").to(DEVICE)
        lens = None if lengths is None else torch.tensor(lengths, device=DEVICE)
        _assert_same(eager, layer, x, lens)
    assert not fused._failed, "compilation fell back to eager: the compiled path was not tested"
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert graphs <= 4, (
        f"{graphs} graphs compiled for {len(shapes)} batch shapes (expected forward + backward)"
    )


@pytest.mark.slow
def test_compiled_bare_step_with_h_beyond_the_length(compiled: None) -> None:
    # Repeated reflection (h ≥ L), no LayerNorm, the eq. 11 scaling: the other branches of the kernels.
    eager, layer = _pair(8, (9,), False, stencil_scaling="inverse_h2")
    gen = torch.Generator().manual_seed(3)
    for batch, length, lengths in [(3, 7, [7, 4, 1]), (2, 12, None)]:
        x = torch.randn(batch, length, 8, generator=gen, device="cpu").to(DEVICE)
        lens = None if lengths is None else torch.tensor(lengths, device=DEVICE)
        _assert_same(eager, layer, x, lens)
    assert not fused._failed


def test_bf16_autocast_keeps_alpha_float32_and_the_mean() -> None:
    # CPU autocast supports bf16, so dtype mistakes show up without a GPU.
    torch.manual_seed(0)
    x = (100 + torch.randn(2, 512, 8)).to(DEVICE)  # a large mean: a weight sum ≠ 1 would shift it visibly
    for fuse in (False, True):
        layer = DiffusionLayer(8, (1, 2, 4), norm=False, fused=fuse).to(DEVICE)
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
            assert layer.alphas().dtype == torch.float32, "α must stay float32 under autocast"
            out = layer(x.bfloat16())
        assert out.dtype == torch.bfloat16
        drift = (out.float().mean(1) - x.bfloat16().float().mean(1)).abs().max().item()
        # (1 − 2Σα) x + Σ α (neighbours) with bf16 weights shifts this mean by ≈ 0.1; the sum-preserving
        # form leaves only random rounding.
        assert drift < 0.03, f"{'fused' if fuse else 'eager'}: the bf16 stencil moved the mean by {drift}"
        out.float().pow(2).mean().backward()
        grad = layer.step_sizes.theta.grad
        assert grad is not None and grad.dtype == torch.float32 and torch.isfinite(grad).all()


@pytest.mark.parametrize("fuse", [False, True], ids=["eager", "fused"])
def test_bf16_autocast_model_step_matches_float32(fuse: bool) -> None:
    from pdelra.nn.model import LRAClassifier, ModelConfig

    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=11, num_classes=3, max_length=40, d_model=16, n_layers=2, n_heads=2, d_mlp=32,
        dropout=0.0, variant="after_mlp", scale="multi", fused_diffusion=fuse,
    )  # fmt: skip
    model = LRAClassifier(cfg).to(DEVICE)
    tokens = torch.randint(0, 11, (4, 40), device=DEVICE)
    lengths = torch.tensor([40, 31, 7, 22], device=DEVICE)
    reference = model(tokens, lengths)
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
        logits = model(tokens, lengths)
    torch.testing.assert_close(logits.float(), reference, atol=0.1, rtol=0.1)
    torch.nn.functional.cross_entropy(logits.float(), torch.tensor([0, 1, 2, 0], device=DEVICE)).backward()
    for name, module in model.diffusion_layers().items():
        assert module.alphas().dtype == torch.float32, name
        assert module.step_sizes.theta.grad.dtype == torch.float32, name
        assert torch.isfinite(module.step_sizes.theta.grad).all(), name
