"""The probe of a config variant's operators before any job runs (`pdelra config check`): each operator built
at the config's d_model and run as training will, forward and backward on a padded batch at a short length
and at the task's real max_length; one line naming what is wrong (an exception, a shape or dtype, NaN or Inf
in the output or a gradient, NaN only in eval mode, outputs at valid positions that depend on the padding,
more memory at the job's batch than the job may use)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from pdelra.nn.model import ENCODERS, ModelConfig, config_row

# The probe of a config variant's operators (check_operators): the padded lengths it runs at besides the
# real one (a short batch, as the last batch of an epoch or a short task may be), and how close two outputs at
# valid positions must be to count as equal (float32; an FFT or a reordered sum differs by ~1e-6).
PROBE_SHORT_LENGTH = 5
PROBE_RTOL, PROBE_ATOL = 1e-4, 1e-5
PROBE_BATCH = 2  # sequences per probe batch: one full, one half as long
PROBE_VERSION = 2  # part of a cached probe's key: raised when the probe checks more, so old ones are redone


@dataclass(frozen=True)
class Probe:
    """What probing one operator found: its problem in words (None: none) and the peak memory of the tensors
    its forward and backward made at the real length, on PROBE_BATCH sequences (bytes; None: not measured,
    as when it failed first)."""

    problem: str | None
    peak_bytes: int | None = None

    def bytes_at(self, batch_size: int) -> int | None:
        """Its peak at a job's batch: activations grow with the batch (each sequence its own)."""
        return None if self.peak_bytes is None else self.peak_bytes * batch_size // PROBE_BATCH


class PeakMemory(TorchDispatchMode):
    """The peak bytes of the tensors made while it is active (every op's outputs, each storage once, until
    nothing refers to it any more): what a forward and backward need beyond their inputs and parameters, on
    any device, the CPU included, where torch keeps no allocator statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}  # data pointer: (storage, bytes)
        self.now = self.peak = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        freed = [ptr for ptr, (ref, _) in self.live.items() if ref.expired()]
        self.now -= sum(self.live.pop(ptr)[1] for ptr in freed)
        for t in out if isinstance(out, list | tuple) else (out,):
            if isinstance(t, Tensor) and t.device.type != "meta":
                storage = t.untyped_storage()
                if storage.data_ptr() and storage.data_ptr() not in self.live:
                    self.live[storage.data_ptr()] = (StorageWeakRef(storage), storage.nbytes())
                    self.now += storage.nbytes()
        self.peak = max(self.peak, self.now)
        return out


def measured(run: Callable[[], Any]) -> tuple[Any, int]:
    """run()'s result and the peak bytes of the tensors it made (PeakMemory)."""
    with PeakMemory() as memory:
        result = run()
    return result, memory.peak


def check_operators(
    cfg: ModelConfig,
    length: int | None = None,
    batch_size: int | None = None,
    memory_bytes: int | None = None,
    cache: dict[str, dict[str, Any]] | None = None,
    code: str | None = None,
) -> None:
    """Build each operator of a config variant and run it as training will, before any GPU time; ValueError
    says in one line which operator fails where and how.

    Each operator is built (its import, its arguments, an exception, something not an nn.Module) and run on
    CPU at d_model and at two padded lengths: PROBE_SHORT_LENGTH and `length` (default cfg.max_length, the
    task's real one: an operator that fails only on long sequences fails here, not in the training job). At
    each, on a batch of PROBE_BATCH sequences, one full and one half as long (lengths passed as the model
    passes them, None when none is padded), it must:
    - forward and backward in training mode: return a tensor of the input's shape and dtype, with no NaN or
      Inf in it nor in the gradient of its input and parameters (the loss weighs valid positions only, as the
      model's masked pooling does; a NaN or Inf where it weighs nothing still poisons the sum);
    - in eval mode (dropout off), give finite outputs, the same at valid positions when the padding holds
      other values, and when the short sequence is run alone, unpadded (another padded length): the model
      masks nothing after an operator, so reading padding would make a run's results depend on its batches;
    - with `batch_size` and `memory_bytes` (the job's batch and the memory it may use), fit: the peak of the
      tensors its forward and backward make at the real length (PeakMemory), scaled from PROBE_BATCH to the
      job's batch, is at most `memory_bytes` (one instance of it: a lower bound of what the job needs).
    Random numbers are drawn from a fixed seed, and the caller's random state is left as it was.

    `cache` ({key: Probe's fields}) keeps each probe by the operator's row, d_model, length and `code` (the
    digest of the variant's own operator code, pdelra.operator_code): a probe done before is not run again
    until that code changes (`pdelra config check` and every `snakemake -n` share one cache file)."""
    length = cfg.max_length if length is None else length
    points = tuple(ENCODERS[cfg.backbone].POINTS)
    for key, spec in (cfg.operators or {}).items():
        what = f"operator {spec.get('operator')!r} at {key!r}"
        known = _cache_key(spec, cfg.d_model, length, code) if code is not None else None
        if cache is not None and known in cache:
            probe = Probe(**cache[known])
        else:
            try:
                build = next(iter(config_row({key: spec}, points).values()))  # every point builds the same
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(0)
                    module = build(cfg)
                    probe = probe_operator(module, cfg.d_model, length)
            except ValueError as exc:
                raise ValueError(str(exc) if str(exc).startswith("operator ") else f"{what}: {exc}") from exc
            except Exception as exc:  # the user's code: whatever it raises is the problem to name
                raise ValueError(f"{what}: {_one_line(exc)}") from exc
            if cache is not None and known is not None:
                cache[known] = {"problem": probe.problem, "peak_bytes": probe.peak_bytes}
        if probe.problem:
            raise ValueError(f"{what}: {probe.problem}")
        need = probe.bytes_at(batch_size) if batch_size else None
        if need is not None and memory_bytes is not None and need > memory_bytes:
            raise ValueError(
                f"{what}: needs {_gb(need)} at batch {batch_size} and length {length} (its forward and "
                f"backward: {_gb(probe.peak_bytes)} measured at batch {PROBE_BATCH}, times {batch_size} / "
                f"{PROBE_BATCH}), more than the job's {_gb(memory_bytes)}: it would run out of memory"
            )


def _cache_key(spec: Any, d_model: int, length: int, code: str) -> str:
    import hashlib
    import json

    text = json.dumps(
        [spec, d_model, length, code, torch.__version__, PROBE_VERSION], sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _gb(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def probe_operator(module: nn.Module, d_model: int, max_length: int) -> Probe:
    """What is wrong when `module` runs as check_operators says, in words (naming the padded length and
    the sequences' lengths), or None; and the peak memory of its forward and backward at `max_length`."""
    generator = torch.Generator().manual_seed(0)
    peak = None
    for size in sorted({min(PROBE_SHORT_LENGTH, max_length), max_length}):
        short = max(1, size // 2)
        x = torch.randn(PROBE_BATCH, size, d_model, generator=generator)
        lengths = torch.tensor([size, short]) if short < size else None
        at = f"at padded length {size} (sequences of {size} and {short})"
        problem, peak = measured(
            lambda x=x, lengths=lengths: _forward_backward(module, x, lengths, generator)
        )
        if problem is None and lengths is not None:
            problem = _padding_problem(module, x, lengths, generator)
        if problem:
            return Probe(f"{at}: {problem}")
    return Probe(None, peak)


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
    # NaN only with dropout off (a division by a running statistic, a branch of eval mode): named as what it
    # is, before the comparisons below would call any difference "reading the padding".
    for out in (y[valid], y_other[valid]):
        if bad := _non_finite(out):
            return f"{bad} in its output in eval mode (finite in training mode)"
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
