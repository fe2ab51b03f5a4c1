"""The probe of a config variant's operators before any job runs (`pdelra config check`): each operator built
at the config's d_model and run as training will, forward and backward on a padded batch at a short length
and at the task's real max_length; one line naming what is wrong (an exception, a shape or dtype, NaN or Inf
in the output or a gradient, outputs at valid positions that depend on the padding)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pdelra.nn.model import ENCODERS, ModelConfig, config_row

# The probe of a config variant's operators (check_operators): the padded lengths it runs at besides the
# real one (a short batch, as the last batch of an epoch or a short task may be), and how close two outputs at
# valid positions must be to count as equal (float32; an FFT or a reordered sum differs by ~1e-6).
PROBE_SHORT_LENGTH = 5
PROBE_RTOL, PROBE_ATOL = 1e-4, 1e-5


def check_operators(cfg: ModelConfig, length: int | None = None) -> None:
    """Build each operator of a config variant and run it as training will, before any GPU time; ValueError
    says in one line which operator fails where and how.

    Each operator is built (its import, its arguments, an exception, something not an nn.Module) and run on
    CPU at d_model and at two padded lengths: PROBE_SHORT_LENGTH and `length` (default cfg.max_length, the
    task's real one: an operator that fails only on long sequences fails here, not in the training job). At
    each, on a batch of two sequences, one full and one half as long (lengths passed as the model passes
    them, None when none is padded), it must:
    - forward and backward in training mode: return a tensor of the input's shape and dtype, with no NaN or
      Inf in it nor in the gradient of its input and parameters (the loss weighs valid positions only, as the
      model's masked pooling does; a NaN or Inf where it weighs nothing still poisons the sum);
    - in eval mode (dropout off), give the same outputs at valid positions when the padding holds other
      values, and when the short sequence is run alone, unpadded (another padded length): the model masks
      nothing after an operator, so reading padding would make a run's results depend on its batches.
    Random numbers are drawn from a fixed seed, and the caller's random state is left as it was."""
    length = cfg.max_length if length is None else length
    points = tuple(ENCODERS[cfg.backbone].POINTS)
    for key, spec in (cfg.operators or {}).items():
        what = f"operator {spec.get('operator')!r} at {key!r}"
        try:
            build = next(iter(config_row({key: spec}, points).values()))  # every point builds the same
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                module = build(cfg)
                problem = probe_operator(module, cfg.d_model, length)
        except ValueError as exc:
            raise ValueError(str(exc) if str(exc).startswith("operator ") else f"{what}: {exc}") from exc
        except Exception as exc:  # the user's code: whatever it raises is the problem to name
            raise ValueError(f"{what}: {_one_line(exc)}") from exc
        if problem:
            raise ValueError(f"{what}: {problem}")


def probe_operator(module: nn.Module, d_model: int, max_length: int) -> str | None:
    """What is wrong when `module` runs as check_operators says, in words (naming the padded length and
    the sequences' lengths), or None."""
    generator = torch.Generator().manual_seed(0)
    for size in sorted({min(PROBE_SHORT_LENGTH, max_length), max_length}):
        short = max(1, size // 2)
        x = torch.randn(2, size, d_model, generator=generator)
        lengths = torch.tensor([size, short]) if short < size else None
        at = f"at padded length {size} (sequences of {size} and {short})"
        problem = _forward_backward(module, x, lengths, generator)
        if problem is None and lengths is not None:
            problem = _padding_problem(module, x, lengths, generator)
        if problem:
            return f"{at}: {problem}"
    return None


def _one_line(exc: BaseException) -> str:
    """'TypeError: first line of the message' (a traceback-like message stays one line)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _non_finite(t: Tensor) -> str | None:
    if torch.isnan(t).any():
        return "NaN"
    return "Inf" if torch.isinf(t).any() else None


def _valid(lengths: Tensor | None, size: int) -> Tensor:
    """(batch, size) bool: True at each sequence's valid positions."""
    if lengths is None:
        return torch.ones(1, size, dtype=torch.bool)
    return torch.arange(size) < lengths[:, None]


def _forward_backward(
    module: nn.Module, x: Tensor, lengths: Tensor | None, generator: torch.Generator
) -> str | None:
    module.train()
    module.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    try:
        y = module(x, lengths)
    except Exception as exc:
        return _one_line(exc)
    if not isinstance(y, Tensor):
        return f"returns a {type(y).__name__}, not a tensor"
    if y.shape != x.shape:
        return f"maps (batch, length, d_model) = {tuple(x.shape)} to {tuple(y.shape)}, not to the same shape"
    if y.dtype != x.dtype:
        return f"returns {y.dtype} for {x.dtype} input, not the same dtype"
    if bad := _non_finite(y):
        return f"{bad} in its output"
    if not y.requires_grad:  # a constant output: nothing flows back, and nothing can go wrong there
        return None
    # Random weights, not a plain sum: gradients that cancel in a sum would hide; zero at padding.
    weights = torch.randn(y.shape, generator=generator) * _valid(lengths, x.shape[1])[..., None]
    try:
        (y * weights).sum().backward()
    except Exception as exc:
        return f"backward: {_one_line(exc)}"
    if x.grad is not None and (bad := _non_finite(x.grad)):
        return f"{bad} in the gradient of its input"
    for name, parameter in module.named_parameters():
        if parameter.grad is not None and (bad := _non_finite(parameter.grad)):
            return f"{bad} in the gradient of its parameter {name!r}"
    return None


def _padding_problem(module: nn.Module, x: Tensor, lengths: Tensor, generator: torch.Generator) -> str | None:
    module.eval()
    valid = _valid(lengths, x.shape[1])
    other = x.clone()
    other[~valid] = 10 * torch.randn(int((~valid).sum()), x.shape[2], generator=generator) + 3
    short = int(lengths[1])
    try:
        with torch.no_grad():
            y, y_other = module(x, lengths), module(other, lengths)
            alone = module(x[1:, :short], None)  # the short sequence in a batch of its own: no padding
    except Exception as exc:
        return f"in eval mode: {_one_line(exc)}"
    finally:
        module.train()
    if not torch.allclose(y[valid], y_other[valid], rtol=PROBE_RTOL, atol=PROBE_ATOL):
        return "its outputs at valid positions change with what the padding holds (it reads the padding)"
    if not (isinstance(alone, Tensor) and alone.shape == (1, short, x.shape[2])):
        return f"returns {tuple(getattr(alone, 'shape', ()))} for one sequence of {short}, not its shape"
    if not torch.allclose(alone[0], y[1, :short], rtol=PROBE_RTOL, atol=PROBE_ATOL):
        return (
            f"its outputs at valid positions change with the padding's length (the sequence of {short} "
            f"alone differs from it padded to {x.shape[1]})"
        )
    return None
