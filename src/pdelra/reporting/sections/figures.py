"""Figure layouts more than one section draws."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def ours_beside_paper_heatmaps(
    ours: pd.DataFrame, theirs: pd.DataFrame, paper_title: str, title: str, figsize: tuple[float, float]
) -> Figure:
    """Two annotated accuracy heatmaps of the same layout: our means (left) and the paper's (right); an
    empty cell of ours is blank (not run, or an average over an incomplete set of tasks)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=figsize)
    for ax, data, panel in ((axes[0], ours, "ours (mean over seeds)"), (axes[1], theirs, paper_title)):
        sns.heatmap(
            data.astype(float),
            annot=True,
            fmt=".3f",
            cmap="rocket",
            ax=ax,
            cbar_kws={"label": "test accuracy"},
        )
        ax.set_title(panel)
        ax.set_xlabel("")
        ax.set_ylabel("")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
