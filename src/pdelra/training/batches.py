"""Batches from a processed split: a seeded shuffle per epoch, rows trimmed to the longest sequence.

The shuffle of epoch e is a pure function of (sampler seed, e), so a resumed run needs only the epoch
number and its position in the epoch (the step) to continue with exactly the batches it would have seen.

Length-bucketed batches (`train.length_buckets: N`, off by default): the epoch's examples are ranked by
length and cut into N buckets of equal count; each batch is drawn from one bucket (or two neighbours), and
the batches are shuffled. Every example is still seen once per epoch, the number of batches is unchanged,
and the order is again a pure function of (sampler seed, epoch), so resume is exact. Trimmed batches then
carry little padding; which examples share a batch is less random than under the plain shuffle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Batch:
    tokens: torch.Tensor  # (B, L) int64, L = longest sequence in the batch
    lengths: torch.Tensor  # (B,) int64
    labels: torch.Tensor  # (B,) int64
    tokens2: torch.Tensor | None = None  # second document (retrieval)
    lengths2: torch.Tensor | None = None

    @property
    def inputs(self) -> tuple[torch.Tensor, ...]:
        """The model's positional arguments: (tokens, lengths[, tokens2, lengths2])."""
        if self.tokens2 is None:
            return (self.tokens, self.lengths)
        return (self.tokens, self.lengths, self.tokens2, self.lengths2)

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def is_pair_split(split: Any) -> bool:
    """Whether a split holds two documents per example (retrieval), i.e. needs the two-tower model."""
    return getattr(split, "tokens2", None) is not None


def epoch_order(num_examples: int, sampler_seed: int, epoch: int) -> np.ndarray:
    """The example order of one training epoch, from a torch.Generator seeded by (sampler seed, epoch).

    SeedSequence mixes the two numbers, so epoch 1 of seed n is unrelated to epoch 0 of seed n+1.
    """
    mixed = int(np.random.SeedSequence([sampler_seed, epoch]).generate_state(1, dtype=np.uint64)[0] >> 1)
    generator = torch.Generator().manual_seed(mixed)
    return torch.randperm(num_examples, generator=generator).numpy()


def example_lengths(split: Any) -> np.ndarray:
    """Each example's length as batching sees it: the longer of its two documents for a pair split."""
    lengths = np.asarray(split.lengths)
    if is_pair_split(split):
        lengths = np.maximum(lengths, np.asarray(split.lengths2))
    return lengths


def eval_order(split: Any) -> np.ndarray:
    """Evaluation order: by length (stable), so that trimmed batches carry little padding.

    Accuracy does not depend on the order; only the speed does.
    """
    return np.argsort(example_lengths(split), kind="stable")


_BATCH_STREAM = 1  # bucketed_order's random stream, apart from epoch_order's (seed, epoch)


def train_order(
    split: Any, sampler_seed: int, epoch: int, batch_size: int, length_buckets: int | None = None
) -> np.ndarray:
    """The example order of one training epoch: `epoch_order`, or with `length_buckets` its bucketed form."""
    order = epoch_order(len(split.labels), sampler_seed, epoch)
    if length_buckets is None:
        return order
    return bucketed_order(example_lengths(split), order, batch_size, length_buckets, (sampler_seed, epoch))


def bucketed_order(
    lengths: np.ndarray, order: np.ndarray, batch_size: int, buckets: int, seed: tuple[int, int]
) -> np.ndarray:
    """`order` rearranged so that consecutive runs of `batch_size` examples have similar lengths.

    The examples are ranked by length (ties in `order`'s random order) and cut into `buckets` groups of
    equal count; within a group they keep `order`'s order. The concatenated groups are cut into batches, the
    short batch (n mod batch_size examples) at a random place so no length range is always in it, and the
    full batches are shuffled; the short batch comes last, as in `iterate_batches`. `seed` = (sampler seed,
    epoch) draws the two random choices, from a stream apart from `epoch_order`'s.
    """
    n = len(order)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    ranked = order[np.argsort(np.asarray(lengths)[order], kind="stable")]
    bounds = np.linspace(0, n, min(buckets, n) + 1).round().astype(np.int64)
    grouped = np.concatenate([group[np.argsort(position[group])] for group in np.split(ranked, bounds[1:-1])])
    rng = np.random.default_rng(np.random.SeedSequence([*seed, _BATCH_STREAM]))
    full, short = divmod(n, batch_size)
    cut = int(rng.integers(0, full + 1)) * batch_size  # the short batch starts here in `grouped`
    rest = np.concatenate([grouped[:cut], grouped[cut + short :]]).reshape(full, batch_size)
    return np.concatenate([rest[rng.permutation(full)].reshape(-1), grouped[cut : cut + short]])


def padding_ratio(lengths: list[np.ndarray], order: np.ndarray, batch_size: int) -> float:
    """Padding tokens ÷ real tokens of one epoch's trimmed batches of `order` (0 = no padding).

    `lengths` holds one array per document of an example (two for retrieval): each is trimmed by itself."""
    padded = real = 0
    for begin in range(0, len(order), batch_size):
        rows = order[begin : begin + batch_size]
        for doc in lengths:
            batch = np.asarray(doc)[rows]
            padded += int(batch.max(initial=0)) * len(rows)
            real += int(batch.sum())
    return (padded - real) / max(real, 1)


def make_batch(split: Any, indices: np.ndarray, to_device: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
    """Gather rows `indices` of a (memory-mapped) split, trimmed to the batch's longest sequence."""
    indices = np.asarray(indices)
    tokens, lengths = _gather(split.tokens, split.lengths, indices)
    labels = torch.from_numpy(np.asarray(split.labels[indices], dtype=np.int64))
    pair: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)
    if is_pair_split(split):
        pair = _gather(split.tokens2, split.lengths2, indices)
    return Batch(
        tokens=to_device(tokens),
        lengths=to_device(lengths),
        labels=to_device(labels),
        tokens2=None if pair[0] is None else to_device(pair[0]),
        lengths2=None if pair[1] is None else to_device(pair[1]),
    )


def iterate_batches(
    split: Any,
    order: np.ndarray,
    batch_size: int,
    to_device: Callable[[torch.Tensor], torch.Tensor],
    start_batch: int = 0,
) -> Iterator[Batch]:
    """Consecutive batches of `order`, starting at batch number `start_batch`; the last may be smaller."""
    for begin in range(start_batch * batch_size, len(order), batch_size):
        yield make_batch(split, order[begin : begin + batch_size], to_device)


def split_batch(batch: Batch, micro_batch_size: int | None) -> list[Batch]:
    """The batch as consecutive micro-batches of at most `micro_batch_size` rows (gradient accumulation),
    each trimmed to its own longest sequence; [batch] itself when no split is needed."""
    if micro_batch_size is None or micro_batch_size >= len(batch):
        return [batch]

    def trim(tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return tokens[:, : max(1, int(lengths.max()))]

    parts = []
    for begin in range(0, len(batch), micro_batch_size):
        rows = slice(begin, begin + micro_batch_size)
        pair: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)
        if batch.tokens2 is not None and batch.lengths2 is not None:
            pair = (trim(batch.tokens2[rows], batch.lengths2[rows]), batch.lengths2[rows])
        parts.append(
            Batch(
                tokens=trim(batch.tokens[rows], batch.lengths[rows]),
                lengths=batch.lengths[rows],
                labels=batch.labels[rows],
                tokens2=pair[0],
                lengths2=pair[1],
            )
        )
    return parts


def num_batches(num_examples: int, batch_size: int) -> int:
    return -(-num_examples // batch_size)


def _gather(
    tokens: np.ndarray, lengths: np.ndarray, indices: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor]:
    batch_lengths = np.asarray(lengths[indices], dtype=np.int64)
    width = max(1, int(batch_lengths.max(initial=0)))
    rows = np.asarray(tokens[indices, :width], dtype=np.int64)
    return torch.from_numpy(rows), torch.from_numpy(batch_lengths)
