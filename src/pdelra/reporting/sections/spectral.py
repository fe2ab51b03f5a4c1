"""The spectral view: Table 16 (band energies at initialisation) and Figure 2 (H(ω) at initialisation and
with the learned α), from `table16` and `spectral_response`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdelra.reporting import style
from pdelra.reporting.display import say
from pdelra.reporting.io import show_figure, show_table
from pdelra.reporting.sections import Report
from pdelra.runs import SCALE_ORDER

if TYPE_CHECKING:
    import pandas as pd

BANDS = ("low", "mid_low", "mid_high", "high")
PANELS = {
    "initial": "At initialisation (solid/dashed: eq. 6 as built; dotted: eq. 11)",
    "learned_h1": "Learned α per position, h = 1 (band: min–max over layers × runs)",
    "learned_multi": "Learned multi-scale α (h = 1, 2, 4)",
}


def render(report: Report) -> None:
    t16 = report.table("table16")
    say(
        "Table 16 gives band energies without defining the bands or their normalisation (its numbers "
        "exceed 1 for a filter with |H| ≤ 1), so they cannot be recomputed. Ours: the mean of |H(ω)|² "
        "over four equal bands of [0, π] for the layer at initialisation (α = 0.1; multi-scale "
        "0.1 × (1, 0.6, 0.3)), under eq. 6 (the layer as built, the default `stencil_scaling: unit`) and "
        "eq. 11 (`inverse_h2`)."
    )
    show_table(
        t16.assign(
            scale=t16["scale"].map(style.scale_label), stencil=t16["stencil"].map(style.STENCIL_LABELS)
        ),
        report.out_dir,
        "table16",
        "Table 16: energy per frequency band of the layer's transfer function at initialisation, ours (eq. 6 "
        "and eq. 11) beside the paper's",
        formats={b: "{:.3f}" for b in BANDS},
    )
    _figure2(report)


def _figure2(report: Report) -> None:
    import matplotlib.pyplot as plt
    import seaborn as sns

    curves = report.table("spectral_response")
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    scale_colours = dict(zip(SCALE_ORDER, sns.color_palette("deep", len(SCALE_ORDER)), strict=True))
    for scale, d in curves[curves["panel"] == "initial"].groupby("scale", sort=False):
        for scaling, c in d.groupby("stencil_scaling", sort=False):
            as_built = scaling == "unit"
            axes[0].plot(
                c["omega"],
                c["mean"],
                color=scale_colours.get(scale),
                linestyle=("--" if scale == "multi" else "-") if as_built else ":",
                alpha=1.0 if as_built else 0.5,
                label=f"{style.scale_label(scale)} (eq. 6)" if as_built else None,
            )
    present = set(curves["variant"])
    positions = [v for v in style.with_own(style.VARIANTS[1:], present - {"initial"}) if v in present]
    colours = dict(zip(positions, sns.color_palette("tab10", len(positions)), strict=True))
    for ax, panel in zip(axes[1:], ("learned_h1", "learned_multi"), strict=True):
        d = curves[curves["panel"] == panel]
        if d.empty:
            ax.text(
                0.5, 0.5, "no trained diffusion layers yet", ha="center", va="center", transform=ax.transAxes
            )
            continue
        init = _curve(d, "initial")
        ax.plot(init["omega"], init["mean"], color="black", linestyle="--", label="initial α")
        for variant in (v for v in positions if v in set(d["variant"])):
            c = _curve(d, variant)
            label = f"{style.variant_label(variant)} (n = {int(c['n'].iloc[0])} layers × runs)"
            ax.plot(c["omega"], c["mean"], color=colours[variant], label=label)
            ax.fill_between(c["omega"], c["min"], c["max"], color=colours[variant], alpha=0.15)
    for ax, title in zip(axes, PANELS.values(), strict=True):
        ax.set_title(title, fontsize="small")
        ax.set_xlabel("ω (radians per token)")
        ax.set_ylabel("H(ω)")
        ax.set_xlim(0, 3.1416)
        ax.axhline(0, color="grey", linewidth=0.6)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small", loc="lower left")
    fig.suptitle("Figure 2: transfer function H(ω) of one diffusion step")
    fig.tight_layout()
    show_figure(
        fig,
        report.out_dir,
        "figure2_spectral",
        "Figure 2: transfer function H(ω) = 1 − 4 Σ α_k w_k sin²(ω h_k/2) of the layer at initialisation and "
        "with the learned α per position",
    )


def _curve(panel: pd.DataFrame, variant: str) -> pd.DataFrame:
    return panel[panel["variant"] == variant]
