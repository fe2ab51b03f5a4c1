"""Micro-batching with gradient accumulation (`train.micro_batch_size`): the same optimizer step as one batch.

The batch's sequences have uneven lengths, so each micro-batch is trimmed to its own longest sequence and
the loss must be weighted by the whole batch's size, not averaged per micro-batch. Dropout is off (its
random masks would differ between one pass and several).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_training import make_task, run_config

from pdelra.training import batches as B
from pdelra.training import runner
from pdelra.training.interrupts import InterruptFlag
from pdelra.training.runconfig import RunConfigError, validate_run_config


def _trainer(tmp_path: Path, task_dir: Path, name: str, **train: object) -> runner._Trainer:
    config = run_config(**train, variant="after_mlp", scale="multi", batch_size=7, grad_clip=None)
    config["model"]["dropout"] = 0.0
    return runner._Trainer(
        validate_run_config(config),
        task_dir,
        tmp_path / name / "run",
        tmp_path / name / "ckpt",
        InterruptFlag(),
    )


@pytest.mark.parametrize("micro", [1, 3])
def test_accumulated_step_equals_the_one_batch_step(tmp_path: Path, micro: int) -> None:
    task_dir = make_task(tmp_path / "processed")
    whole = _trainer(tmp_path, task_dir, "whole")
    parts = _trainer(tmp_path, task_dir, "parts", micro_batch_size=micro)
    for a, b in zip(whole.model.parameters(), parts.model.parameters(), strict=True):
        assert torch.equal(a, b)  # same seed, same initial weights
    train = whole.splits["train"]
    order = B.epoch_order(len(train.labels), whole.seeds.sampler, 0)
    batches = list(B.iterate_batches(train, order, 7, whole.dev.to_device))[:1]
    lengths = batches[0].lengths
    assert len(set(lengths.tolist())) > 1, "the test needs uneven lengths"
    split = B.split_batch(batches[0], micro)
    assert len(split) == -(-7 // micro)
    assert all(p.tokens.shape[1] == int(p.lengths.max()) for p in split), "each part trimmed to its longest"
    # The step's gradient (left in .grad by _step) and loss must match. The updates then come from the same
    # AdamW on the same gradient; they are not compared directly because Adam divides by √v, which turns
    # float noise in analytically-zero gradients (e.g. the key bias: softmax ignores it) into full-size steps.
    loss_whole, correct_whole = whole._step(batches[0])
    loss_parts, correct_parts = parts._step(batches[0])
    assert loss_parts == pytest.approx(loss_whole, rel=1e-6)
    assert correct_parts == correct_whole
    for (name, a), b in zip(whole.model.named_parameters(), parts.model.parameters(), strict=True):
        assert a.grad is not None and b.grad is not None, name
        torch.testing.assert_close(
            b.grad, a.grad, atol=1e-7, rtol=1e-4, msg=lambda m, name=name: f"{name}: {m}"
        )
    assert whole.optimizer.state_dict()["state"].keys() == parts.optimizer.state_dict()["state"].keys()


def test_micro_batch_size_is_validated() -> None:
    config = run_config(micro_batch_size=0)
    with pytest.raises(RunConfigError, match="micro_batch_size"):
        validate_run_config(config)
    assert validate_run_config(run_config(micro_batch_size=4)).train.micro_batch_size == 4
    assert validate_run_config(run_config()).train.micro_batch_size is None


def test_split_batch_trims_both_documents_of_pairs() -> None:
    tokens = torch.arange(5 * 9).view(5, 9)
    lengths, lengths2 = torch.tensor([9, 2, 3, 1, 4]), torch.tensor([1, 8, 2, 2, 3])
    batch = B.Batch(tokens, lengths, torch.arange(5), tokens + 100, lengths2)
    parts = B.split_batch(batch, 2)
    assert [len(p) for p in parts] == [2, 2, 1]
    assert [p.tokens.shape[1] for p in parts] == [9, 3, 4]
    assert [p.tokens2.shape[1] for p in parts if p.tokens2 is not None] == [8, 2, 3]
    torch.testing.assert_close(torch.cat([p.labels for p in parts]), batch.labels)
    torch.testing.assert_close(parts[1].tokens2, tokens[2:4, :2] + 100)
    assert B.split_batch(batch, None) == [batch] and B.split_batch(batch, 5) == [batch]
