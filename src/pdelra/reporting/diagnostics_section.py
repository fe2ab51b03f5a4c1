"""Report section: the operator-theory diagnostics (`pdelra diagnose`, tables/diagnostics.csv).

`render(tables_dir, out_dir)` shows and saves
- figure `diagnostics_roughness_depth`: relative roughness E(x)/‖x‖² of the residual stream entering each
  block (and leaving the last), per position (variant), one panel per task;
- figure `diagnostics_commutator` and table `diagnostics_per_position`: the diffusion–attention commutator
  ‖D(M(x)) − M(D(x))‖/‖M(x)‖ per position and block, for the trained diffusion and for the fixed probe
  (α = 0.1, h = 1) that every run, the baseline included, is measured with;
- the mechanism test (table `diagnostics_mechanism`, figure `diagnostics_mechanism`): across (task,
  position) points, does the trained commutator — or the roughness reduction of the trained operators —
  predict the accuracy gain over the baseline? Spearman's ρ with a percentile bootstrap CI over seeds
  (seeds resampled jointly, `pdelra.claims.bootstrap_interval`) and the project's verdict rule
  (`pdelra.claims.verdict`): the theory expects ρ < 0 for the commutator (double mixing hurts) and ρ > 0 for
  the roughness reduction. The CI over seeds only says how stable ρ is under reseeding, not how many
  (task, position) points stand behind it, so the answer is "yes" only when, besides, scipy's p-value of ρ
  across the points is below 0.05. Shown whatever the answer.

Figures use the `base` setting and the main scale (h1) when present; the tables keep every scale. With no
diagnostics table the section says "not run".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

TABLE = "diagnostics.csv"
RUNS_TABLE = "runs.csv"
BASELINE = "none"
BASE_SETTING = "base"
MAIN_SCALE = "h1"
# predictor column → (label, the sign of ρ the theory expects)
ALPHA_LEVEL = 0.05  # significance of ρ across points (scipy's p-value), required beside the seed CI
PREDICTORS = {
    "commutator": ("trained diffusion–attention commutator", -1),
    "commutator_branch": ("the same, relative to the attention branch", -1),
    "roughness_reduction": ("roughness reduction by the trained operators", +1),
}


# ----------------------------------------------------------------------------------------------------------
# Tables (pure functions, tested on constructed data)


def per_run(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """One row per run: mean trained commutator (over blocks and operators), mean roughness reduction
    1 − rel_out/rel_in of the trained operators, mean probe commutator, mean bound ratio."""
    import numpy as np

    keys = ["task", "variant", "scale", "setting", "seed"]
    trained = diagnostics[diagnostics["kind"] == "trained"].copy()
    trained["roughness_reduction"] = 1 - trained["rel_roughness_out"] / trained["rel_roughness_in"]
    trained.loc[~np.isfinite(trained["roughness_reduction"]), "roughness_reduction"] = np.nan
    probe = diagnostics[diagnostics["kind"] == "probe"]
    out = (
        trained.groupby(keys)
        .agg(
            commutator=("commutator", "mean"),
            commutator_branch=("commutator_branch", "mean"),
            roughness_reduction=("roughness_reduction", "mean"),
            bound_ratio=("bound_ratio", "mean"),
        )
        .join(
            probe.groupby(keys).agg(
                probe_commutator=("commutator", "mean"), probe_commutator_branch=("commutator_branch", "mean")
            ),
            how="outer",
        )
        .reset_index()
    )
    return out


def per_position(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """The commutator per position table: per (task, variant, scale, setting), means over seeds of the run
    means (trained commutator, probe commutator, roughness reduction, perturbation/bound), and n seeds."""
    runs = per_run(diagnostics)
    keys = ["task", "variant", "scale", "setting"]
    table = (
        runs.groupby(keys)
        .agg(
            commutator=("commutator", "mean"),
            commutator_std=("commutator", "std"),
            commutator_branch=("commutator_branch", "mean"),
            probe_commutator=("probe_commutator", "mean"),
            probe_commutator_branch=("probe_commutator_branch", "mean"),
            roughness_reduction=("roughness_reduction", "mean"),
            bound_ratio=("bound_ratio", "mean"),
            seeds=("seed", "nunique"),
        )
        .reset_index()
    )
    return table.sort_values(["task", "scale", "setting", "variant"]).reset_index(drop=True)


def mechanism_points(diagnostics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per run with a trained operator: task, variant, seed, the predictors and the test accuracy, beside
    the accuracy of the same task's baseline run with that seed (`baseline_accuracy`, NaN if none).

    Restricted to the `base` setting and one scale per task: h1 when present, else the first."""
    import pandas as pd

    completed = runs[(runs["status"] == "completed") & runs["test_accuracy"].notna()]
    completed = completed[completed["setting"] == BASE_SETTING]
    predictors = per_run(diagnostics)
    predictors = predictors[(predictors["setting"] == BASE_SETTING) & (predictors["variant"] != BASELINE)]
    predictors = predictors[predictors[list(PREDICTORS)].notna().any(axis=1)]
    if predictors.empty:
        return pd.DataFrame(
            columns=["task", "variant", "scale", "seed", *PREDICTORS, "accuracy", "baseline_accuracy"]
        )
    scale = predictors.groupby("task")["scale"].agg(
        lambda s: MAIN_SCALE if MAIN_SCALE in set(s) else sorted(s)[0]
    )
    predictors = predictors[predictors["scale"] == predictors["task"].map(scale)]
    points = predictors.merge(
        completed[["task", "variant", "scale", "setting", "seed", "test_accuracy"]],
        on=["task", "variant", "scale", "setting", "seed"],
    ).rename(columns={"test_accuracy": "accuracy"})
    base = completed[completed["variant"] == BASELINE]
    base = base[base["scale"] == base["task"].map(scale)] if len(base) else base
    base = base[["task", "seed", "test_accuracy"]].rename(columns={"test_accuracy": "baseline_accuracy"})
    points = points.merge(base.drop_duplicates(["task", "seed"]), on=["task", "seed"], how="left")
    return points[["task", "variant", "scale", "seed", *PREDICTORS, "accuracy", "baseline_accuracy"]]


class _Cells:
    """The (task, position) cells of one predictor as arrays over seeds, so that a bootstrap replicate (a
    multiset of seeds) costs two small matrix products instead of a pandas group-by."""

    def __init__(self, points: pd.DataFrame, predictor: str) -> None:
        import numpy as np

        self.seeds = sorted(set(points["seed"]))
        self.cells = sorted(set(zip(points["task"], points["variant"], strict=True)))
        column = {s: j for j, s in enumerate(self.seeds)}
        row = {c: i for i, c in enumerate(self.cells)}
        shape = (len(self.cells), len(self.seeds))
        self.x, self.acc, self.base = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
        for p in points.itertuples(index=False):
            i, j = row[(p.task, p.variant)], column[p.seed]
            if not (math.isnan(getattr(p, predictor)) or math.isnan(p.accuracy)):
                self.x[i, j], self.acc[i, j] = getattr(p, predictor), p.accuracy
            self.base[i, j] = p.baseline_accuracy
        self.has = ~np.isnan(self.x)
        self.has_base = ~np.isnan(self.base)

    def means(self, seeds: Sequence[int] | None = None) -> tuple[list[float], list[float]]:
        """(predictor, gain over baseline) per cell, seed means over `seeds` (repeats count; default all)."""
        import numpy as np

        if seeds is None:
            counts = np.ones(len(self.seeds))
        else:
            counts = np.bincount(np.searchsorted(self.seeds, seeds), minlength=len(self.seeds))
        w, wb = self.has * counts, self.has_base * counts  # (cells, seeds)
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.nansum(self.x * w, 1) / w.sum(1)
            gain = np.nansum(self.acc * w, 1) / w.sum(1) - np.nansum(self.base * wb, 1) / wb.sum(1)
        keep = np.isfinite(x) & np.isfinite(gain)
        return x[keep].tolist(), gain[keep].tolist()


def _cell_means(
    points: pd.DataFrame, predictor: str, seeds: Sequence[int] | None = None
) -> tuple[list[float], list[float]]:
    """(predictor, gain) per (task, variant) using only `seeds` (with repeats, as a bootstrap draws them)."""
    return _Cells(points, predictor).means(seeds)


def _average_ranks(values: Sequence[float]) -> Any:
    """0-based ranks, ties sharing their average rank (as scipy.stats.rankdata, without its overhead)."""
    import numpy as np

    _, inverse, counts = np.unique(np.asarray(values, dtype=float), return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - (counts + 1) / 2)[inverse]


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's ρ (the Pearson correlation of average ranks; equals scipy.stats.spearmanr, which the
    bootstrap would call thousands of times), NaN with fewer than 3 points or a constant variable."""
    import numpy as np

    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return math.nan
    rx, ry = _average_ranks(xs), _average_ranks(ys)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float(np.clip((rx @ ry) / math.sqrt((rx @ rx) * (ry @ ry)), -1.0, 1.0))


def mechanism_test(points: pd.DataFrame) -> pd.DataFrame:
    """Per predictor: n points (task, position), ρ over the seed means, its bootstrap CI over seeds, scipy's
    p-value, the expected sign, and the verdict (`pdelra.claims.verdict`)."""
    import pandas as pd
    from scipy import stats

    from pdelra.claims import CONFIDENCE, bootstrap_interval, verdict

    seeds = sorted(set(points["seed"])) if len(points) else []
    rows = []
    for predictor, (label, expected) in PREDICTORS.items():
        cells = _Cells(points, predictor)
        xs, ys = cells.means()
        rho = spearman(xs, ys)
        p_value = float(stats.spearmanr(xs, ys).pvalue) if not math.isnan(rho) else math.nan
        low, high = bootstrap_interval(seeds, lambda picked, c=cells: spearman(*c.means(picked)))
        n_seeds = len(seeds)
        result = verdict(expected, low, high, n_seeds, missing=len(xs) < 3)
        if len(xs) < 3:
            answer = f"not enough (task, position) points ({len(xs)}; need 3)"
        elif n_seeds < 2:
            answer = "one seed: no CI over seeds, no answer"
        elif result == "inconclusive":
            answer = "no evidence: the CI includes 0"
        elif not p_value < ALPHA_LEVEL:  # the seed CI alone ignores how few (task, position) points there are
            answer = (
                f"no evidence: stable over seeds but not significant across {len(xs)} points "
                f"(p = {p_value:.2f})"
            )
        elif result == "reproduced":
            answer = "yes: the CI excludes 0 in the predicted direction and p < 0.05"
        else:
            answer = "no: the CI excludes 0 in the opposite direction"
        rows.append(
            {
                "predictor": predictor,
                "description": label,
                "expected_sign": "+" if expected > 0 else "−",
                "points": len(xs),
                "seeds": n_seeds,
                "rho": rho,
                "ci_low": low,
                "ci_high": high,
                "confidence": CONFIDENCE,
                "p_value": p_value,
                "verdict": result,
                "answer": answer,
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------
# Figures


def _main_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of the base setting at the main scale (h1), keeping every variant's own scale if it has no h1."""
    frame = frame[frame["setting"] == BASE_SETTING]
    if MAIN_SCALE in set(frame["scale"]):
        frame = frame[frame["scale"] == MAIN_SCALE]
    return frame


def depth_profile(diagnostics: pd.DataFrame) -> pd.DataFrame:
    """Residual-stream relative roughness by depth: depth b = entering block b; depth n = leaving the last."""
    import pandas as pd

    residual = diagnostics[diagnostics["kind"] == "residual"]
    keys = ["task", "variant", "scale", "setting", "seed"]
    entering = residual[[*keys, "block", "rel_roughness_in"]].rename(
        columns={"block": "depth", "rel_roughness_in": "roughness"}
    )
    last = residual.loc[residual.groupby(keys)["block"].idxmax()]
    leaving = last[[*keys, "block", "rel_roughness_out"]].rename(columns={"rel_roughness_out": "roughness"})
    leaving["depth"] = leaving.pop("block") + 1
    return pd.concat([entering, leaving], ignore_index=True).sort_values([*keys, "depth"])


def figure_roughness(diagnostics: pd.DataFrame) -> Any:
    import matplotlib.pyplot as plt
    import seaborn as sns

    data = depth_profile(_main_rows(diagnostics))
    tasks = sorted(data["task"].unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks) + 1.5, 3.6), squeeze=False, sharey=True)
    order = sorted(data["variant"].unique(), key=lambda v: (v != BASELINE, v))
    for ax, task in zip(axes[0], tasks, strict=True):
        sns.lineplot(
            data=data[data["task"] == task],
            x="depth",
            y="roughness",
            hue="variant",
            hue_order=order,
            style="variant",
            style_order=order,
            markers=True,
            dashes=False,
            errorbar=("pi", 100),
            ax=ax,
            legend=ax is axes[0][-1],
        )
        ax.set_title(task)
        ax.set_xlabel("block entered (last: the output of the last block)")
        ax.set_ylabel("relative roughness E(x)/‖x‖²")
        ax.set_xticks(sorted(data.loc[data["task"] == task, "depth"].unique()))
    axes[0][-1].legend(title="position", bbox_to_anchor=(1.02, 1), loc="upper left", frameon=False)
    fig.tight_layout()
    return fig


def _annotated_heatmap(ax: Any, grid: pd.DataFrame, vmax: float, label: str, colorbar: bool) -> None:
    """grid as a heatmap with each cell's value written in it; missing cells left blank.

    matplotlib directly: seaborn's heatmap draws the whole figure on every call (to rotate overlapping tick
    labels), which made a ten-panel figure cost seconds per panel."""
    import numpy as np

    values = grid.to_numpy(dtype=float)
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0, vmax=vmax, aspect="auto")
    for (row, col), value in np.ndenumerate(values):
        if np.isfinite(value):
            red, green, blue, _ = image.cmap(image.norm(value))
            color = "white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black"
            ax.text(col, row, f"{value:.3f}", ha="center", va="center", fontsize=7, color=color)
    ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
    ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
    ax.tick_params(length=0)
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label=label)


def figure_commutator(diagnostics: pd.DataFrame, column: str = "commutator") -> Any:
    import matplotlib.pyplot as plt

    data = _main_rows(diagnostics)
    data = data[data["kind"].isin(["trained", "probe"])]
    cells = data.groupby(["task", "kind", "variant", "block"])[column].mean().reset_index()
    tasks = sorted(cells["task"].unique())
    kinds = [("trained", "trained diffusion"), ("probe", "probe diffusion (α = 0.1, h = 1)")]
    variants = sorted(cells["variant"].unique(), key=lambda v: (v != BASELINE, v))
    blocks = sorted(cells["block"].unique())
    vmax = float(cells[column].max()) if cells[column].notna().any() else 1.0
    bar = "‖D(M(x)) − M(D(x))‖ / ‖M(x)‖" if column == "commutator" else "‖D(A(x)) − A(D(x))‖ / ‖A(x)‖"
    fig, axes = plt.subplots(
        len(kinds),
        len(tasks),
        figsize=(0.7 * len(blocks) * len(tasks) + 3.5 * len(tasks), 0.45 * len(variants) * 2 + 2.2),
        squeeze=False,
    )
    for row, (kind, label) in enumerate(kinds):
        for col, task in enumerate(tasks):
            grid = (
                cells[(cells["task"] == task) & (cells["kind"] == kind)]
                .pivot(index="variant", columns="block", values=column)
                .reindex(index=variants, columns=blocks)
            )
            ax = axes[row][col]
            _annotated_heatmap(ax, grid, vmax, bar, colorbar=col == len(tasks) - 1)
            ax.set_title(f"{task}: {label}", fontsize=9)
            ax.set_xlabel("block")
            ax.set_ylabel("position" if col == 0 else "")
    fig.tight_layout()
    return fig


def figure_mechanism(points: pd.DataFrame, test: pd.DataFrame) -> Any:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PREDICTORS), figsize=(5.2 * len(PREDICTORS), 4.0), squeeze=False)
    for ax, (predictor, (label, _)) in zip(axes[0], PREDICTORS.items(), strict=True):
        cells = []
        for (task, variant), cell in points.groupby(["task", "variant"]):
            xs, ys = _cell_means(cell, predictor)
            if xs:
                cells.append((task, variant, xs[0], 100 * ys[0]))
        for task in sorted({c[0] for c in cells}):
            mine = [c for c in cells if c[0] == task]
            ax.scatter([c[2] for c in mine], [c[3] for c in mine], label=task, s=30)
            for _, variant, x, y in mine:
                ax.annotate(variant, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.axhline(0, color="grey", lw=0.8)
        row = test.set_index("predictor").loc[predictor]
        ci = "—" if math.isnan(row["ci_low"]) else f"[{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]"
        rho = "—" if math.isnan(row["rho"]) else f"{row['rho']:+.2f}"
        ax.set_title(f"ρ = {rho}, {int(100 * row['confidence'])}% CI {ci}\n{row['answer']}", fontsize=9)
        ax.set_xlabel(label)
        ax.set_ylabel("accuracy gain over baseline (points)")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    if handles:
        axes[0][-1].legend(
            handles,
            labels,
            title="task",
            fontsize=7,
            frameon=False,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
        )
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------------------------
# The section


def _read(path: Path) -> pd.DataFrame | None:
    import pandas as pd

    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return None
    if "setting" not in frame.columns and len(frame):  # tables from before the run identity had settings
        frame.insert(frame.columns.get_loc("scale") + 1, "setting", BASE_SETTING)
    return frame


def render(tables_dir: Path, out_dir: Path) -> None:
    """Display the diagnostics section and save its figures and tables under out_dir."""
    from IPython.display import Markdown, display

    from pdelra.reporting.io import show_figure, show_table

    tables_dir, out_dir = Path(tables_dir), Path(out_dir)
    display(Markdown("## Operator-theory diagnostics: roughness, perturbation bounds, non-commutativity"))
    diagnostics = _read(tables_dir / TABLE)
    if diagnostics is None or diagnostics.empty:
        display(Markdown(f"*Not run: no diagnostics table ({tables_dir / TABLE} is missing or empty).*"))
        return
    display(
        Markdown(
            "Measured by `pdelra diagnose` on the first validation examples of each task with each run's "
            "best-validation weights. Roughness is the Dirichlet energy E(x) = Σ‖x_{i+1} − x_i‖² over valid "
            "tokens, shown relative to ‖x‖². The commutator is ‖D(M(x)) − M(D(x))‖/‖M(x)‖ with M a block's "
            "attention sub-layer on the residual stream and D either the run's trained diffusion or a fixed "
            "probe D = I + 0.1·Δ₁ (the same in every run, the baseline included)."
        )
    )
    fig = figure_roughness(diagnostics)
    caption = (
        "Relative roughness E(x)/‖x‖² of the residual stream through depth, per position (base setting, "
        "h1); band: range over seeds."
    )
    show_figure(fig, out_dir, "diagnostics_roughness_depth", caption)

    for column, name, what in (
        ("commutator", "diagnostics_commutator", "relative to the sub-layer's output ‖M(x)‖"),
        ("commutator_branch", "diagnostics_commutator_branch", "relative to the attention branch ‖A(x)‖"),
    ):
        fig = figure_commutator(diagnostics, column)
        caption = (
            f"Diffusion–attention commutator per position and block, {what}: the trained diffusion (top) "
            "and the probe α = 0.1, h = 1 (bottom); mean over seeds (base setting, h1)."
        )
        show_figure(fig, out_dir, name, caption)

    show_table(
        per_position(diagnostics),
        out_dir,
        "diagnostics_per_position",
        "Commutator per position: trained and probe commutators, roughness reduction 1 − rel_out/rel_in of "
        "the trained operators and perturbation/bound (≤ 1 by the theory); means over blocks, then seeds.",
        formats={"seeds": "{:.0f}"},
    )

    runs = _read(tables_dir / RUNS_TABLE)
    if runs is None or runs.empty:
        display(Markdown(f"*Mechanism test not run: no run table ({tables_dir / RUNS_TABLE}).*"))
        return
    points = mechanism_points(diagnostics, runs)
    test = mechanism_test(points)
    show_table(
        test,
        out_dir,
        "diagnostics_mechanism",
        "Does the commutator (or the roughness reduction) predict the accuracy gain over the baseline across "
        "(task, position)? Spearman ρ with a bootstrap CI over seeds; the theory expects ρ < 0 for the "
        "commutator and ρ > 0 for the roughness reduction.",
        formats={"points": "{:.0f}", "seeds": "{:.0f}", "confidence": "{:.2f}"},
    )
    fig = figure_mechanism(points, test)
    show_figure(
        fig,
        out_dir,
        "diagnostics_mechanism",
        "Mechanism test: each point is one (task, position), seed means; title: Spearman ρ and its CI "
        "over seeds.",
    )
