"""`pdelra config check` runs each own operator as training will, before any GPU time
(pdelra.nn.operator_check.check_operators): forward and backward at the task's real max_length on a padded
batch. Each of these broken operators is refused in one line naming the variant, where and why; good ones
pass."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, load_config

from pdelra.cli import main

OWN = "my_op"
MAX_LENGTH = 64
THRESHOLD = 40  # the long-sequence failure: lengths up to this work, so a short-batch check passes

BROKEN = f'''
import torch
from torch import nn


def _valid(x, lengths):
    if lengths is None:
        return torch.ones(x.shape[:2], dtype=x.dtype)
    return (torch.arange(x.shape[1]) < lengths[:, None]).to(x.dtype)


class NanOut(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d_model))

    def forward(self, x, lengths=None):
        return x * self.scale + (x - x) / (x - x)  # 0 / 0


class NanGrad(nn.Module):
    """Finite output; d sqrt(w²)/dw at w = 0 is inf · 0 = NaN."""

    def __init__(self, d_model):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(d_model))

    def forward(self, x, lengths=None):
        return x + torch.sqrt(self.w * self.w)


class WrongShape(nn.Module):
    def __init__(self, d_model):
        super().__init__()

    def forward(self, x, lengths=None):
        return x[..., :-1]


class FailsLong(nn.Module):
    """A table of {THRESHOLD} positions: fine on short batches, a crash at the task's length."""

    def __init__(self, d_model):
        super().__init__()
        self.table = nn.Parameter(torch.zeros({THRESHOLD}, d_model))

    def forward(self, x, lengths=None):
        return x + self.table[: x.shape[1]]


class ReadsPadding(nn.Module):
    """A mean over every position, padding included."""

    def __init__(self, d_model):
        super().__init__()

    def forward(self, x, lengths=None):
        return x + x.mean(dim=1, keepdim=True)


class ReadsPaddingLength(nn.Module):
    """Masks the padding's content, but divides by the padded length: a batch's padding changes it."""

    def __init__(self, d_model):
        super().__init__()

    def forward(self, x, lengths=None):
        valid = _valid(x, lengths)[..., None]
        return (x + (x * valid).sum(dim=1, keepdim=True) / x.shape[1]) * valid


class Half(nn.Module):
    def __init__(self, d_model):
        super().__init__()

    def forward(self, x, lengths=None):
        return x.half()
'''


def _check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operator: str) -> int:
    """`pdelra config check` of the tiny config with a variant of `operator` at after_embedding, the tasks'
    max_length MAX_LENGTH; its exit status."""
    monkeypatch.chdir(tmp_path)  # where the workflow's jobs find a user's module
    for name in ("badops", "myops"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    config = load_config("tiny")
    config["variants"] = {OWN: {"after_embedding": {"operator": operator}}}
    config["grids"]["main"]["variants"].append(OWN)
    for task in config["tasks"].values():
        task["max_length"] = MAX_LENGTH
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return main(["config", "check", str(path)])


@pytest.mark.parametrize(
    ("operator", "reason"),
    [
        ("NanOut", "at padded length 5 (sequences of 5 and 2): NaN in its output"),
        ("NanGrad", "at padded length 5 (sequences of 5 and 2): NaN in the gradient of its parameter 'w'"),
        ("WrongShape", "maps (batch, length, d_model) = (2, 5, 16) to (2, 5, 15), not to the same shape"),
        ("Half", "returns torch.float16 for torch.float32 input, not the same dtype"),
        (
            "FailsLong",
            f"at padded length {MAX_LENGTH} (sequences of {MAX_LENGTH} and {MAX_LENGTH // 2}): RuntimeError: "
            "The size of tensor a",
        ),
        ("ReadsPadding", "change with what the padding holds (it reads the padding)"),
        ("ReadsPaddingLength", "change with the padding's length (the sequence of 2 alone differs from it"),
    ],
)
def test_a_broken_operator_is_refused_in_one_line_naming_variant_point_and_reason(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    operator: str,
    reason: str,
) -> None:
    (tmp_path / "badops.py").write_text(BROKEN)
    status = _check(tmp_path, monkeypatch, f"badops:{operator}")
    out = capsys.readouterr().out
    assert status == 1, out
    (line,) = [line for line in out.splitlines() if line.startswith("  - ")]  # one problem, one line
    where = f"variants.{OWN} (grids.main, tasks listops, retrieval, d_model 16, max_length {MAX_LENGTH}): "
    assert line.startswith(
        f"  - {tmp_path / 'config.yaml'}: {where}operator 'badops:{operator}' at 'after_embedding': "
    ), line
    assert reason in line, line


def test_an_operator_failing_only_beyond_the_short_batch_passed_the_old_check_and_fails_at_the_real_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure needs the real length: the same operator passes when the tasks are short enough."""
    from pdelra.nn.model import ModelConfig
    from pdelra.nn.operator_check import check_operators

    (tmp_path / "badops.py").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "badops", raising=False)
    spec = {"after_embedding": {"operator": "badops:FailsLong"}}
    short = ModelConfig(
        vocab_size=2, num_classes=2, max_length=THRESHOLD, d_model=16, variant=OWN, operators=spec
    )
    check_operators(short)  # no problem up to its table's size
    long = ModelConfig(
        vocab_size=2, num_classes=2, max_length=THRESHOLD + 1, d_model=16, variant=OWN, operators=spec
    )
    with pytest.raises(ValueError, match=rf"at padded length {THRESHOLD + 1} .*RuntimeError"):
        check_operators(long)


@pytest.mark.parametrize("operator", ["myops:MovingAverage", "diffusion", "cta_advection_diffusion"])
def test_a_good_operator_passes_at_the_real_length_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], operator: str
) -> None:
    shutil.copy2(REPO / "examples" / "myops.py", tmp_path / "myops.py")
    started = time.monotonic()
    status = _check(tmp_path, monkeypatch, operator)
    assert status == 0, capsys.readouterr().out
    assert time.monotonic() - started < 30


def test_the_check_takes_seconds_at_an_lra_length_and_leaves_the_random_state_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ListOps' 2,000 tokens at the paper's d_model 128 (Text's 4,000 costs about twice as much)."""
    import torch

    from pdelra.nn.model import ModelConfig
    from pdelra.nn.operator_check import check_operators

    monkeypatch.syspath_prepend(str(REPO))
    spec = {"after_embedding": {"operator": "examples.myops:MovingAverage"}}
    cfg = ModelConfig(vocab_size=2, num_classes=2, max_length=2000, d_model=128, variant=OWN, operators=spec)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    started = time.monotonic()
    check_operators(cfg)
    assert time.monotonic() - started < 10
    assert torch.equal(torch.rand(3), expected), "the check draws from its own seed, not the caller's stream"
