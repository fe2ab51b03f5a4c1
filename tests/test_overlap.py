"""The figure checks on figures whose answer is known: overlapping labels, tidy layouts, legends over data."""

from __future__ import annotations

from collections.abc import Iterator

import matplotlib
import numpy as np
import pytest

from pdelra.reporting.overlap import figure_problems, legend_hides_data, text_overlaps

matplotlib.use("Agg")
import matplotlib.pyplot as plt

POSITIONS = ["After Embedding", "After MLP", "Layer Diffusion", "Before LayerNorm", "In Attention",
             "Head Diffusion", "After Attention", "Baseline", "Between Layers", "Multi-scale"]  # fmt: skip


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def test_two_long_xlabels_of_neighbouring_axes_are_reported() -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(4, 3))
    a.set_xlabel("Block index of the first model, counted from the embedding")
    b.set_xlabel("Block")
    pairs = text_overlaps(fig)
    assert (
        "xlabel of axes 1 'Block index of the first model, counted…'",
        "xlabel of axes 2 'Block'",
    ) in pairs


def test_a_tidy_figure_has_no_overlap_and_its_legend_hides_nothing() -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")
    x = np.linspace(0, 1, 30)
    a.plot(x, x**2, "o-", label="after_embedding")
    a.plot(x, x**3, label="none")
    a.axhline(0.5, color="grey")  # a reference line under the legend is not data
    a.legend(loc="upper left")
    a.set(title="Accuracy", xlabel="epoch", ylabel="accuracy")
    a.annotate("best", xy=(1, 1), xytext=(0.7, 0.2), arrowprops={"arrowstyle": "->"})
    b.bar(["a", "b", "c"], [1, 2, 3])
    b.set(title="Cost", xlabel="variant", ylabel="ms")
    fig.suptitle("A tidy figure")
    assert text_overlaps(fig) == []
    assert legend_hides_data(fig) == []


def test_rotated_tick_labels_that_clear_each_other_are_not_reported_but_flat_ones_are() -> None:
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    ax.bar(POSITIONS, range(len(POSITIONS)))
    ax.tick_params(axis="x", labelrotation=45)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    # Their axis-aligned boxes overlap (a 45° label is as wide as it is tall) but the texts do not.
    assert text_overlaps(fig) == []
    ax.tick_params(axis="x", labelrotation=0)
    pairs = text_overlaps(fig)
    assert ("x tick label of axes 1 'After Embedding'", "x tick label of axes 1 'After MLP'") in pairs


def test_tick_labels_beyond_the_axis_limits_are_not_counted() -> None:
    fig, ax = plt.subplots(figsize=(3, 3), layout="constrained")
    ax.bar(["a", "b"], [1, 3])  # y ticks go to 3.5: above the axes, left of it, where the suptitle is
    fig.suptitle("Suptitle on the left", x=0, ha="left")
    assert "3.5" in [t.get_text() for t in ax.get_yticklabels()]  # the label exists, undrawn
    assert text_overlaps(fig) == []


def test_a_legend_over_points_is_reported_and_moved_away_it_is_not() -> None:
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.scatter([0.9, 0.95, 0.1], [0.9, 0.95, 0.1], label="runs")
    ax.plot([0, 1], [0.5, 0.5], label="mean")
    ax.set(xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper right")
    assert legend_hides_data(fig) == ["legend of axes 1 covers 2 points of scatter 'runs' in axes 1"]
    ax.legend(loc="center right")
    assert legend_hides_data(fig) == ["legend of axes 1 covers line 'mean' in axes 1"]
    ax.legend(loc="upper left")
    assert legend_hides_data(fig) == []


def test_figure_problems_lists_both_kinds_from_one_drawing() -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(4, 3))
    a.set_xlabel("Block index of the first model, counted from the embedding")
    b.set_xlabel("Block")
    b.scatter([0.9], [0.9], label="run")
    b.set(xlim=(0, 1), ylim=(0, 1))
    b.legend(loc="upper right")
    assert figure_problems(fig) == [
        "texts overlap: xlabel of axes 1 'Block index of the first model, counted…' ~ "
        "xlabel of axes 2 'Block'",
        "legend of axes 2 covers 1 point of scatter 'run' in axes 2",
    ]
