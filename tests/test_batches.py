"""Length-bucketed batches: the same examples once per epoch in a seeded order, batches of similar length."""

from __future__ import annotations

import signal
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from test_training import interrupt_at_step, run_config, train_in_process, without_timings

from pdelra.training import batches as B
from pdelra.training.interrupts import EXIT_INTERRUPTED


def _split(lengths: np.ndarray, lengths2: np.ndarray | None = None) -> SimpleNamespace:
    labels = np.zeros(len(lengths))
    return SimpleNamespace(labels=labels, lengths=lengths, tokens2=lengths2, lengths2=lengths2)


# ListOps-like: lengths spread evenly over 500-2,000 tokens.
LISTOPS_LIKE = np.random.default_rng(0).integers(500, 2001, size=3001)


def _batches(order: np.ndarray, size: int) -> list[np.ndarray]:
    return [order[begin : begin + size] for begin in range(0, len(order), size)]


@pytest.mark.parametrize("n", [3001, 3000, 31, 5])
def test_every_example_once_per_epoch_and_the_short_batch_last(n: int) -> None:
    split = _split(LISTOPS_LIKE[:n])
    for epoch in range(3):
        order = B.train_order(split, sampler_seed=7, epoch=epoch, batch_size=32, length_buckets=8)
        assert np.array_equal(np.sort(order), np.arange(n))
        assert len(_batches(order, 32)) == B.num_batches(n, 32)  # the schedule's steps per epoch hold


def test_order_is_a_function_of_seed_and_epoch() -> None:
    split = _split(LISTOPS_LIKE)
    order = lambda seed, epoch: B.train_order(split, seed, epoch, 32, 8)  # noqa: E731
    assert np.array_equal(order(3, 1), order(3, 1))
    assert not np.array_equal(order(3, 1), order(3, 2))
    assert not np.array_equal(order(3, 1), order(4, 1))
    # Off: exactly the plain seeded shuffle of earlier runs (their checkpoints and results stay valid).
    assert np.array_equal(B.train_order(split, 3, 1, 32), B.epoch_order(len(LISTOPS_LIKE), 3, 1))


def test_batches_hold_similar_lengths_and_padding_falls() -> None:
    lengths, size, buckets = LISTOPS_LIKE, 32, 16
    order = B.train_order(_split(lengths), 0, 0, size, buckets)
    # Each batch lies within two neighbouring buckets: its length range is at most two buckets' widths
    # (uniform lengths: 1,500 / 16 ≈ 94 tokens each), against ~1,400 tokens for a random batch of 32.
    spread = [np.ptp(lengths[rows]) for rows in _batches(order, size)]
    assert max(spread) < 2 * 1500 / buckets + 20
    # Padding ÷ real tokens, known answer for uniform lengths on [500, 2000]: a random batch of 32 pads to
    # about its expected maximum 2000 − 1500/33 ≈ 1955 over a mean of 1250 (0.56); a bucket of width ~94
    # pads by about half its width over 1250 (~0.04).
    plain = B.padding_ratio([lengths], B.epoch_order(len(lengths), 0, 0), size)
    bucketed = B.padding_ratio([lengths], order, size)
    assert plain == pytest.approx(0.56, abs=0.03)
    assert bucketed < 0.06


def test_padding_ratio_counts_each_document_of_a_pair_trimmed_by_itself() -> None:
    order = np.arange(4)
    assert B.padding_ratio([np.array([1, 3, 1, 3])], order, 2) == pytest.approx(4 / 8)
    pair = [np.array([1, 3, 1, 3]), np.array([2, 2, 2, 2])]
    assert B.padding_ratio(pair, order, 2) == pytest.approx(4 / 16)
    # Pairs bucket by the longer document.
    split = _split(np.array([1, 9, 1, 9]), np.array([9, 1, 1, 1]))
    assert list(B.example_lengths(split)) == [9, 9, 1, 9]


def test_resume_mid_epoch_with_buckets_gives_the_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_training import make_task

    data = make_task(tmp_path / "processed")  # 64 examples of 4-24 tokens, batches of 8: 8 steps an epoch
    config = run_config(length_buckets=2)
    _, reference = train_in_process(config, data, tmp_path / "reference")
    with monkeypatch.context() as patch:
        interrupt_at_step(patch, 11, signal.SIGUSR1)  # mid-epoch 2
        status, _ = train_in_process(config, data, tmp_path / "resumed")
    assert status == EXIT_INTERRUPTED
    status, resumed = train_in_process(config, data, tmp_path / "resumed")
    assert status == 0 and resumed and reference and resumed["resumed_count"] == 1
    assert without_timings({**resumed, "interruptions": []}) == without_timings(reference)
    # Bucketing changes which examples share a batch, hence the run: it is not a silent no-op.
    _, plain = train_in_process(run_config(), data, tmp_path / "plain")
    assert plain and plain["history"] != reference["history"]
