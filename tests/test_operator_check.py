"""`pdelra config check` runs each own operator as training will, before any GPU time
(pdelra.nn.operator_check.check_operators): forward and backward at the task's real max_length on a padded
batch. Each of these broken operators is refused in one line naming the variant, where and why; good ones
pass."""

from __future__ import annotations

import re
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


class NanInEval(nn.Module):
    """Finite while training; NaN with dropout off (an eval-only path dividing by zero)."""

    def __init__(self, d_model):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d_model))

    def forward(self, x, lengths=None):
        return x * self.scale if self.training else x * self.scale + (x - x) / (x - x)


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
        (
            "NanInEval",
            "at padded length 5 (sequences of 5 and 2): NaN in its output in eval mode (finite in "
            "training mode)",
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


# An operator that builds a (batch, L, L, d_model) tensor: each token's mean product with every valid token.
PAIRWISE = """
import torch
from torch import nn


class Pairwise(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d_model))

    def forward(self, x, lengths=None):
        n = torch.full((x.shape[0],), x.shape[1]) if lengths is None else lengths
        valid = (torch.arange(x.shape[1]) < n[:, None]).to(x.dtype)
        pairs = x[:, :, None, :] * x[:, None, :, :] * valid[:, None, :, None] * self.w
        return x + pairs.sum(2) / n[:, None, None]
"""


def _pairwise_config(tmp_path: Path, mem_mb: int) -> Path:
    """The tiny config with the pairwise operator on ListOps at 2,000 tokens (d_model 4, batch 32)."""
    config = load_config("tiny")
    config["variants"] = {OWN: {"after_embedding": {"operator": "pairops:Pairwise"}}}
    config["grids"]["main"].update(tasks=["listops"], variants=["none", OWN])
    config["tasks"]["listops"]["max_length"] = 2000
    config["defaults"]["model"].update(d_model=4, d_mlp=8)
    config["defaults"]["train"]["batch_size"] = 32
    config["defaults"]["resources"]["mem_mb"] = mem_mb
    path = tmp_path / f"config{mem_mb}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_an_operator_that_will_not_fit_the_jobs_memory_is_refused_naming_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """B x L x L x d at L = 2,000 passes every check at the probe's batch of 2 (0.4 GB); at the job's batch of
    32 it needs 16 times that, more than the job's 4 GB: refused in one line naming it. The probe is kept by
    its code's digest, so the next check (every `snakemake -n` makes one) does not run it again; an edit of
    the operator's code probes it afresh."""
    import pdelra.nn.operator_check as probe_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delitem(sys.modules, "pairops", raising=False)
    (tmp_path / "pairops.py").write_text(PAIRWISE)
    started = time.monotonic()
    assert main(["config", "check", str(_pairwise_config(tmp_path, 4000))]) == 1
    probed_s = time.monotonic() - started
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  - ")]
    assert f"variants.{OWN} (grids.main, task listops, batch 32, d_model 4, max_length 2000)" in line, line
    needs = re.search(r"needs ([\d.]+) GB at batch 32 and length 2000 \(its forward and backward: "
                      r"([\d.]+) GB measured at batch 2, times 32 / 2\), more than the job's 4\.0 GB",
                      line)  # fmt: skip
    assert needs, line
    assert float(needs[1]) == pytest.approx(16 * float(needs[2]), rel=0.05)
    assert float(needs[2]) >= 2 * 2000 * 2000 * 4 * 4 / 1e9  # at least the (2, L, L, 4) float tensor

    calls: list[object] = []
    stand_in = probe_module.Probe(None, 1)  # what a probe of the edited code below finds: nothing wrong
    monkeypatch.setattr(probe_module, "probe_operator", lambda *args: calls.append(args) or stand_in)
    started = time.monotonic()
    assert main(["config", "check", str(_pairwise_config(tmp_path, 4000))]) == 1  # from the cache
    assert calls == [] and "needs" in capsys.readouterr().out
    cached_s = time.monotonic() - started
    assert main(["config", "check", str(_pairwise_config(tmp_path, 64000))]) == 0  # fits 64 GB
    assert calls == []
    print(f"config check: {probed_s:.1f} s probing, {cached_s:.1f} s with the probe cached")
    (tmp_path / "pairops.py").write_text(PAIRWISE + "\n# edited\n")  # its code changed: probed again
    assert main(["config", "check", str(_pairwise_config(tmp_path, 4000))]) == 0
    assert len(calls) == 1
