"""The related systems in their own settings (display only).

Reads, through `report.table`, the tables `pdelra.results.related.summarise` computed (`lm_eval_loss`,
`lm_alpha_ablation`, `lm_layers`, `lm_layer_trajectory`, `cta_type_steps`, `cta_cost`) and the rows of
`claims.csv` whose family is `lm` (PhysQK-AD) or `cta` (Continuous-Time Attention); computes no statistic.
Each table is shown with the paper's labels, units in its headers and CIs as "x [lo, hi]"; a column that is
constant across the rows is stated once above the table (and in its caption) instead. Figure `lm_dynamics`:
α, η and eff_Pe per layer over training, with the seed's reported values for the layers the model has.
Every part says "not run" when its table is absent or empty. The notebook prints the section's heading; the
section titles its two parts (PhysQK-AD's language model, Continuous-Time Attention) and their claims.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from pdelra import paper
from pdelra.reporting.display import (
    CI,
    ci_cell,
    claims_display,
    display_rows,
    family_claims,
    number,
    say,
    seeds_cell,
    show_lifted,
)
from pdelra.reporting.io import MISSING, is_missing, show_figure
from pdelra.reporting.sections import Report
from pdelra.reporting.style import SCALE_LABELS
from pdelra.runs import BASE_SETTING, BASELINE

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# pdelra.paper has no label for the fourth CTA type yet.
LABELS = paper.VARIANT_LABELS
ALLOCATION_LABELS = {
    BASE_SETTING: "joint per-layer α (the method)",
    "shared": "one shared α",
    "l1_only": "fixed: ½ in L1 only",
    "reported_alpha": "fixed: the seed's α",
}
LOSS, ACCURACY, ALPHA, LAYER_VALUE = "{:.3f}", "{:.4f}", "{:.4f}", "{:.3f}"  # α: the seed's 0.003 needs 4


# ----------------------------------------------------------------------------------------------------------
# Cell text


def _corpus(task: str) -> str:
    name = str(task).removeprefix("lm_")
    return paper.TASK_LABELS.get(name, name)


def _width(scale: str) -> str:
    match = re.fullmatch(r"d(\d+)", str(scale))
    return f"d = {match.group(1)}" if match else str(scale)


def _steps(value: Any, setting: str) -> str:
    if is_missing(value):
        return MISSING
    return f"{int(value)} (default)" if setting == BASE_SETTING else f"{int(value)}"


def _label(variant: str) -> str:
    return LABELS.get(variant, variant)


def _task(task: str) -> str:
    return paper.TASK_LABELS.get(task, task)


# ----------------------------------------------------------------------------------------------------------
# Tables for display


def lm_eval_display(table: pd.DataFrame) -> pd.DataFrame:
    return display_rows(
        table,
        lambda r: {
            "Corpus": _corpus(r["task"]),
            "Width": _width(r["scale"]),
            "Epochs run (max)": number(r["max_epochs_run"], "{:.0f}"),
            "Seeds": seeds_cell(r["n"], r["n_runs"]),
            "Δ method": r["delta_method"] if isinstance(r["delta_method"], str) else "",
            "Condition": _label(r["variant"]),
            f"Test loss (nats/token) {CI}": ci_cell(r, "loss_nats", LOSS),
            "Bits/byte": number(r["bits_per_byte"], LOSS),
            f"Δ vs MHA (nats) {CI}": ci_cell(r, "delta_vs_mha_nats", "{:+.3f}"),
            "Seed's ΔEval (nats)": number(r["paper_delta_nats"], "{:+.3f}").replace("-", "−"),
        },
    )


def ablation_display(table: pd.DataFrame) -> pd.DataFrame:
    def paper_range(r: pd.Series) -> str:
        if is_missing(r["paper_delta_nats_low"]):
            return MISSING
        return f"{r['paper_delta_nats_low']:+.2f} to {r['paper_delta_nats_high']:+.2f}".replace("-", "−")

    return display_rows(
        table,
        lambda r: {
            "Corpus": _corpus(r["task"]),
            "Width": _width(r["scale"]),
            "Seeds": seeds_cell(r["n"], r["n_runs"]),
            "Δ method": r["delta_method"] if isinstance(r["delta_method"], str) else "",
            "α allocation": ALLOCATION_LABELS.get(r["setting"], r["setting"]),
            f"Test loss (nats/token) {CI}": ci_cell(r, "loss_nats", LOSS),
            f"Δ vs joint α (nats) {CI}": ci_cell(r, "delta_vs_joint_nats", "{:+.3f}"),
            "Seed's Δ (nats)": paper_range(r),
        },
    )


def seed_reported(setting: str, layer: int) -> str:
    """What the seed reports for this layer of joint-α PhysQK-AD (its L1, L2/L3), or "—"."""
    if setting != BASE_SETTING:
        return MISSING
    if layer == paper.PHYSQK_AD_CONVECTIVE_LAYER:
        return f"α ≈ {paper.PHYSQK_AD_L1_ALPHA:g}, eff_Pe {paper.PHYSQK_AD_L1_PE:g}"
    if layer in paper.PHYSQK_AD_CLOSED_LAYERS:
        return f"α < {paper.PHYSQK_AD_CLOSED_ALPHA:g}"
    return MISSING


def layers_display(table: pd.DataFrame) -> pd.DataFrame:
    return display_rows(
        table,
        lambda r: {
            "Corpus": _corpus(r["task"]),
            "Width": _width(r["scale"]),
            "Seeds": seeds_cell(r["n"], math.nan),
            "Final step": number(r["final_step"], "{:.0f}"),
            "α allocation": ALLOCATION_LABELS.get(r["setting"], r["setting"]),
            "Layer": f"L{int(r['layer'])}",
            f"α {CI}": ci_cell(r, "alpha", ALPHA),
            f"η {CI}": ci_cell(r, "eta", LAYER_VALUE),
            f"eff_Pe {CI}": ci_cell(r, "eff_pe", LAYER_VALUE),
            "Seed reports": seed_reported(r["setting"], int(r["layer"])),
        },
    )


def cta_display(table: pd.DataFrame) -> pd.DataFrame:
    return display_rows(
        table,
        lambda r: {
            "Scale": SCALE_LABELS.get(r["scale"], r["scale"]),
            "Seeds": seeds_cell(r["n"], r["n_runs"]),
            "Δ method": r["delta_method"] if isinstance(r["delta_method"], str) else "",
            "Task": _task(r["task"]),
            "PDE type": _label(r["variant"]),
            "Pseudo-time steps": _steps(r["pseudo_time_steps"], r["setting"]),
            "Epochs (budget)": number(r.get("max_epochs"), "{:.0f}"),
            "Epochs run (max)": number(r.get("max_epochs_run"), "{:.0f}"),
            f"Test accuracy {CI}": ci_cell(r, "test_accuracy", ACCURACY),
            f"Δ vs baseline {CI}": ci_cell(r, "delta_vs_baseline", "{:+.4f}"),
        },
    )


def epochs_confound(table: pd.DataFrame) -> str:
    """A note naming each task whose rows (the baseline and the CTA types at each number of pseudo-time steps)
    trained for different epoch budgets, since a difference across steps, or a Δ vs the baseline, is then
    also one of training length; "" when every task's rows share one budget."""
    if "max_epochs" not in table.columns:
        return ""

    def compared(row: pd.Series) -> tuple[float, str]:
        """(sort key, words) of a row's group: the baseline first, then the steps in order."""
        steps = row["pseudo_time_steps"]
        if row["variant"] == BASELINE:
            return -1.0, "baseline"
        if is_missing(steps):
            return math.inf, str(row["setting"])
        return float(steps), f"{steps:.0f} step" + ("s" if steps != 1 else "")

    notes = []
    for task, rows in table[table["max_epochs"].notna()].groupby("task", sort=False):
        budgets: dict[tuple[float, str], set[float]] = {}
        for _, row in rows.iterrows():
            budgets.setdefault(compared(row), set()).add(float(row["max_epochs"]))
        if len(set().union(*budgets.values())) < 2:
            continue
        cells = [
            f"{words}: " + "/".join(f"{b:.0f}" for b in sorted(e))
            for (_, words), e in sorted(budgets.items())
        ]
        notes.append(f"{_task(task)} ({'; '.join(cells)} epochs)")
    if not notes:
        return ""
    return (
        "**Steps and epochs are confounded here**: the rows compared trained for different epoch budgets — "
        f"{', '.join(notes)}. A difference across steps, or a Δ vs the baseline of a row with another "
        "budget, is also a difference in training length; give the grid's `stepsN` settings the default "
        "runs' `train.max_epochs` to compare steps alone."
    )


def cost_display(table: pd.DataFrame) -> pd.DataFrame:
    return display_rows(
        table,
        lambda r: {
            "Scale": SCALE_LABELS.get(r["scale"], r["scale"]),
            "Seeds": seeds_cell(r["n"], math.nan),
            "Task": _task(r["task"]),
            "PDE type": _label(r["variant"]),
            "Pseudo-time steps": _steps(r["pseudo_time_steps"], r["setting"]),
            "Step time (ms)": number(1000 * r["median_step_time_s"], "{:.1f}"),
            "Time overhead (%)": number(r["time_overhead_pct"], "{:+.1f}").replace("-", "−"),
            "Peak memory (MiB)": number(r["peak_memory_mb"], "{:.1f}"),
            "Memory overhead (%)": number(r["memory_overhead_pct"], "{:+.1f}").replace("-", "−"),
            "Attention memory": r["attention_memory"] if isinstance(r["attention_memory"], str) else "",
        },
    )


# ----------------------------------------------------------------------------------------------------------
# Rendering


def _not_run(what: str, why: str) -> None:
    say(f"_Not run: {what} ({why})._")


def _claims(report: Report, family: str, name: str, who: str) -> None:
    claims = report.table("claims")
    if claims.empty:
        _not_run(f"{who}'s claims", "no `claims.csv` in the tables folder")
        return
    rows = family_claims(claims, family)
    if rows.empty:
        _not_run(f"{who}'s claims", f"`claims.csv` has no `{family}` claims")
        return
    show_lifted(
        claims_display(rows),
        ("n", "Method"),
        report.out_dir,
        name,
        f"{who}'s claims: our effect with its 95 % CI over seeds and the verdict (claims.csv, family "
        f"`{family}`)",
    )


def _layer_names(layers: Sequence[int]) -> str:
    return "/".join(f"L{k}" for k in layers)


def dynamics_figure(trajectory: pd.DataFrame) -> Figure | None:
    """α, η, eff_Pe per layer over training for joint-α PhysQK-AD: one row of panels per (corpus, width);
    None without joint-α trajectories. The legend names only the layers the model has."""
    joint = trajectory[trajectory["setting"] == BASE_SETTING]
    if joint.empty:
        return None
    layers = sorted(int(k) for k in joint["layer"].unique())
    colours = dict(zip(layers, sns.color_palette("deep", len(layers)), strict=True))
    groups = list(joint.groupby(["task", "scale"], sort=True))
    fig, axes = plt.subplots(
        len(groups), 3, figsize=(13, 3.4 * len(groups) + 0.8), squeeze=False, layout="constrained"
    )
    panels = (("alpha", "α = σ(w_α)"), ("eta", "η = exp(w_η)"), ("eff_pe", "effective Péclet number"))
    for row, ((task, scale), data) in zip(axes, groups, strict=True):
        for ax, (column, label) in zip(row, panels, strict=True):
            for layer, at in data.groupby("layer"):
                colour = colours[int(layer)]
                low = at[f"{column}_ci_low"].fillna(at[column])
                high = at[f"{column}_ci_high"].fillna(at[column])
                ax.plot(at["step"], at[column], color=colour)
                ax.fill_between(at["step"], low, high, color=colour, alpha=0.2, linewidth=0)
            ax.set_title(f"{label} — {_corpus(task)}, {_width(scale)}", fontsize="medium")
            ax.set_xlabel("optimizer step")
        row[0].set_ylabel("α")
        row[1].set_ylabel("η")
        row[2].set_ylabel("eff_Pe")
        if (data["eff_pe"] > 0).all():
            row[2].set_yscale("log")
            plain = FuncFormatter(lambda y, _: f"{y:g}")  # 2, not 2 × 10⁰
            row[2].yaxis.set_major_formatter(plain)
            row[2].yaxis.set_minor_formatter(plain)
    handles = [Line2D([], [], color=colours[k], label=f"L{k}") for k in layers]
    handles += _seed_lines(axes, layers)
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 8), fontsize="small")
    fig.suptitle("PhysQK-AD per layer over training (joint α; mean and 95 % t-band over seeds)")
    return fig


def _show_dynamics(trajectory: pd.DataFrame, out_dir: Path) -> None:
    fig = dynamics_figure(trajectory)
    if fig is None:
        return
    layers = sorted(int(k) for k in trajectory.loc[trajectory["setting"] == BASE_SETTING, "layer"].unique())
    caption = (
        f"PhysQK-AD: α, η and eff_Pe of layers {_layer_names(layers)} over training (dotted: the seed's "
        "reported values for the layers it names)"
    )
    show_figure(fig, out_dir, "lm_dynamics", caption)


def _seed_lines(axes: Any, layers: Sequence[int]) -> list[Any]:
    """The seed's reported values as dotted lines, only for the layers the model has; their handles."""
    lines = []  # (panel, value, colour, label)
    if paper.PHYSQK_AD_CONVECTIVE_LAYER in layers:
        k = paper.PHYSQK_AD_CONVECTIVE_LAYER
        lines.append((0, paper.PHYSQK_AD_L1_ALPHA, "grey", f"seed: L{k} α ≈ {paper.PHYSQK_AD_L1_ALPHA:g}"))
        lines.append((2, paper.PHYSQK_AD_L1_PE, "crimson", f"seed: L{k} eff_Pe {paper.PHYSQK_AD_L1_PE:g}"))
    closed = [k for k in paper.PHYSQK_AD_CLOSED_LAYERS if k in layers]
    if closed:
        label = f"seed: {_layer_names(closed)} α < {paper.PHYSQK_AD_CLOSED_ALPHA:g}"
        lines.append((0, paper.PHYSQK_AD_CLOSED_ALPHA, "black", label))
    lines.append((2, 1.0, "silver", "eff_Pe = 1"))
    for panel, value, colour, _ in lines:
        for row in axes:
            row[panel].axhline(value, color=colour, linestyle=":")
    return [Line2D([], [], color=c, linestyle=":", label=label) for _, _, c, label in lines]


def render_lm(report: Report) -> None:
    say("### PhysQK-AD as a byte-level language model")
    eval_loss = report.table("lm_eval_loss")
    if eval_loss.empty:
        _not_run("PhysQK-AD's language model", "no `lm_eval_loss.csv`; add an `lm` section to the config")
        return
    say(
        "Loss: next-byte cross-entropy on the test windows with the best-validation weights; bits/byte "
        "counts end-of-document tokens as predicted but not as bytes. The seed: d = 256, 4 layers, 20 "
        "epochs, 128-byte windows, 3 seeds."
    )
    lm_context = ("Corpus", "Width", "Epochs run (max)", "Seeds", "Δ method", "Final step")
    show_lifted(
        lm_eval_display(eval_loss),
        lm_context,
        report.out_dir,
        "lm_eval_loss",
        "LM test loss per condition (mean over seeds), Δ vs MHA paired by seed, and the seed's ΔEval",
    )
    ablation = report.table("lm_alpha_ablation")
    if ablation.empty:
        _not_run("the α-allocation ablation", "no PhysQK-AD runs")
    else:
        show_lifted(
            ablation_display(ablation),
            lm_context,
            report.out_dir,
            "lm_alpha_ablation",
            "PhysQK-AD's α allocations: test loss and Δ vs joint per-layer α (the seed: simpler "
            "allocations win by {:g}–{:g} nats)".format(*paper.PHYSQK_AD_ABLATION_GAIN),
        )
    layers = report.table("lm_layers")
    if layers.empty:
        _not_run("PhysQK-AD's per-layer α, η, eff_Pe", "no PhysQK-AD run logged them")
    else:
        show_lifted(
            layers_display(layers),
            (*lm_context, "α allocation"),
            report.out_dir,
            "lm_layers",
            "PhysQK-AD's final α, η and eff_Pe per layer (mean over seeds; layers numbered from 0)",
        )
    trajectory = report.table("lm_layer_trajectory")
    if not trajectory.empty:
        _show_dynamics(trajectory, report.out_dir)
    say("#### PhysQK-AD's claims")
    _claims(report, "lm", "lm_claims", "PhysQK-AD")


def render_cta(report: Report) -> None:
    say("### Continuous-Time Attention: PDE type × pseudo-time steps")
    accuracy = report.table("cta_type_steps")
    if accuracy.empty:
        _not_run("Continuous-Time Attention", "no `cta_type_steps.csv`; add the grid `cta` to `run_grids`")
        return
    say(
        "Pseudo-time steps are grid settings (`steps1`, `steps2`, `steps4`); the `related` grid's runs use "
        "the default. The baseline is the standard Transformer (`none`) on the same tasks and seeds."
    )
    context = ("Scale", "Seeds", "Δ method", "Task")
    confound = epochs_confound(accuracy)
    if confound:
        say(confound)
    show_lifted(
        cta_display(accuracy),
        (*context, "Epochs (budget)", "Epochs run (max)"),
        report.out_dir,
        "cta_type_steps",
        "CTA test accuracy per task, PDE type and pseudo-time steps (mean over seeds) and Δ vs the "
        "baseline Transformer, paired by seed"
        + (" — steps trained for different epoch budgets (see the note above)" if confound else ""),
    )
    cost = report.table("cta_cost")
    if cost.empty:
        _not_run("CTA's cost", "no `cta_cost.csv`")
    else:
        show_lifted(
            cost_display(cost),
            context,
            report.out_dir,
            "cta_cost",
            "CTA's cost vs the baseline: median step time and peak memory averaged over seeds; "
            "reaction–diffusion materialises the L × L attention matrix, the other types stay fused",
        )
    say("#### Continuous-Time Attention's claims")
    _claims(report, "cta", "cta_claims", "Continuous-Time Attention")


# Choices the related papers leave open (shown with the section; the report's deviations list points here).
DEVIATIONS = (
    "**eff_Pe** is not defined exactly by PhysQK-AD; ours is the ratio of the convective to the diffusive "
    "term's token-averaged magnitude, mean‖α(r[t] − r[t−1])‖ / mean‖(1 − α)W_update(A·r − r)‖ (η cancels), "
    "measured per layer on the first 32 validation windows.",
    "**Layer numbering**: the seed's “L1, L2/L3” are read as blocks.1, blocks.2, blocks.3 (0-based, as in "
    "the code); the seed does not state its numbering, so every layer is shown.",
    "**PhysQK-AD's LM**: token coordinates start at the embedded tokens and their displacement joins the "
    "residual stream after attention (as in the LRA variant, pdelra.nn.model); weight tying, learned "
    "positions, "
    "end-of-document token 0, windows overlapping by one token; the seed's optimiser settings are not "
    "published (ours: AdamW 1e-3, warmup + cosine, as config `lm.train`).",
    "**α allocations**: `shared` ties one w_α across layers; fixed allocations freeze α at the listed values "
    "(`l1_only` = ½ in L1 only, `reported_alpha` = the seed's reported values, L0 set like L2/L3).",
    "**CTA's claims**: its abstract publishes no number (“consistent gains over standard Transformers”), so "
    "its claims are judged by direction.",
    "**Advection–diffusion** (∂A/∂t = αΔA + β∂ₓA) is the fourth PDE type of CTA's official code "
    "(`AdvectionDiffusionPDELayer`, in its PDE-type ablation; the abstract names three). The code starts "
    "at β₀ = 0.03; ours starts at β = 0 (pure diffusion) and keeps |β| < 2α, Σα < ½ by construction, "
    "so every evolved attention row stays a probability distribution (pdelra.nn.pde_schemes).",
)


def render(report: Report) -> None:
    """Display and save the related-systems section. No top heading: the notebook prints it ("Related
    systems")."""
    render_lm(report)
    render_cta(report)
    say("#### Choices of this section\n\n" + "\n".join(f"- {d}" for d in DEVIATIONS))
