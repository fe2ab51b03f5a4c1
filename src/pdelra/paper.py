"""The paper's published numbers (arXiv "PDE-Transformer", appendix B), to set beside ours in the report.

Test accuracy as fractions. Variant names are this project's (docs/interfaces.md): the paper's "Layer
Diffusion" is `between_layers`, "Head Diffusion" is `across_heads`; its scales Fast/Medium/Slow are
h = 1, 2, 4.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdelra import tasks as _registry

if TYPE_CHECKING:
    from collections.abc import Iterable

    import pandas as pd

# The paper's five tasks in its tables' order, and every task's label: from the task registry (pdelra.tasks),
# whose records name their column here (`Task.paper`).
TASKS: tuple[str, ...] = tuple(t.paper for t in _registry.TASKS.values() if t.paper is not None)
TASK_LABELS = {**{t.name: t.label for t in _registry.TASKS.values()}, "average": "Average"}
VARIANT_LABELS = {
    "none": "Baseline",
    "after_embedding": "After Embedding",
    "after_mlp": "After MLP",
    "between_layers": "Layer Diffusion",
    "before_layernorm": "Before LayerNorm",
    "in_attention": "In Attention",
    "across_heads": "Head Diffusion",
    "after_attention": "After Attention",
    "cta_diffusion": "CTA diffusion",
    "cta_wave": "CTA wave",
    "cta_reaction_diffusion": "CTA reaction-diffusion",
    "cta_advection_diffusion": "CTA advection-diffusion",
    "mha": "MHA",
    "cta_official_diffusion": "CTA (official) diffusion",
    "cta_official_wave": "CTA (official) wave",
    "cta_official_reaction_diffusion": "CTA (official) reaction-diffusion",
    "cta_official_advection_diffusion": "CTA (official) advection-diffusion",
    "physqk": "PhysQK",
    "physqk_ad": "PhysQK-AD",
}

# Table 10: per task, then the paper's own average (Table 6).
TABLE10: dict[str, dict[str, float]] = {
    "none": dict(zip(TASKS, (0.3740, 0.6480, 0.8113, 0.7017, 0.3961), strict=True)) | {"average": 0.5862},
    "after_embedding": dict(zip(TASKS, (0.3962, 0.7029, 0.8113, 0.7943, 0.4296), strict=True))
    | {"average": 0.6269},
    "after_mlp": dict(zip(TASKS, (0.3896, 0.6452, 0.8233, 0.7295, 0.4053), strict=True))
    | {"average": 0.5986},
    "between_layers": dict(zip(TASKS, (0.3850, 0.6600, 0.8200, 0.7100, 0.4100), strict=True))
    | {"average": 0.5970},
    "before_layernorm": dict(zip(TASKS, (0.3896, 0.6452, 0.8113, 0.7295, 0.4053), strict=True))
    | {"average": 0.5962},
    "in_attention": dict(zip(TASKS, (0.3891, 0.6842, 0.8162, 0.6872, 0.3779), strict=True))
    | {"average": 0.5909},
    "across_heads": dict(zip(TASKS, (0.3780, 0.6550, 0.8150, 0.6942, 0.4000), strict=True))
    | {"average": 0.5884},
    "after_attention": dict(zip(TASKS, (0.3740, 0.6442, 0.8112, 0.5681, 0.4109), strict=True))
    | {"average": 0.5617},
}

# Table 12 (ListOps): scale → accuracy per position; the baseline is 0.3740.
TABLE12: dict[str, dict[str, float]] = {
    "after_embedding": {"h1": 0.3960, "h2": 0.3940, "h4": 0.3990, "multi": 0.4080},
    "after_mlp": {"h1": 0.3900, "h2": 0.3930, "h4": 0.3910, "multi": 0.4010},
    "between_layers": {"h1": 0.3850, "h2": 0.3890, "h4": 0.3910, "multi": 0.3970},
}

# Table 14 (ListOps): overhead over the baseline in percent, keyed by (variant, scale).
TABLE14: dict[tuple[str, str], dict[str, float]] = {
    ("after_embedding", "h1"): {"time_overhead_pct": 5.6, "memory_overhead_pct": 1.2},
    ("after_mlp", "h1"): {"time_overhead_pct": 12.8, "memory_overhead_pct": 2.4},
    ("after_embedding", "multi"): {"time_overhead_pct": 18.4, "memory_overhead_pct": 3.7},
}


def table10() -> pd.DataFrame:
    """Table 10 as a long frame: variant, task (incl. `average`), paper_accuracy."""
    import pandas as pd

    return pd.DataFrame(
        [
            {"variant": v, "task": t, "paper_accuracy": acc}
            for v, per_task in TABLE10.items()
            for t, acc in per_task.items()
        ]
    )


def table12() -> pd.DataFrame:
    """Table 12 as a long frame: task (listops), variant, scale, paper_accuracy."""
    import pandas as pd

    return pd.DataFrame(
        [
            {"task": "listops", "variant": v, "scale": s, "paper_accuracy": acc}
            for v, per_scale in TABLE12.items()
            for s, acc in per_scale.items()
        ]
    )


def table14() -> pd.DataFrame:
    """Table 14 as a long frame: task (listops), variant, scale, paper time/memory overhead (%)."""
    import pandas as pd

    return pd.DataFrame(
        [
            {"task": "listops", "variant": v, "scale": s, **{f"paper_{k}": x for k, x in row.items()}}
            for (v, s), row in TABLE14.items()
        ]
    )


# The seven insertion positions (Table 5 order: also Table 4's predicted ranking, best first).
POSITIONS = (
    "after_embedding",
    "after_mlp",
    "between_layers",
    "before_layernorm",
    "in_attention",
    "across_heads",
    "after_attention",
)

# Where each position inserts the paper's operator: its insertion points (pdelra.nn.model's VARIANTS rows,
# which check that they agree). A config's own variant whose operators sit at exactly one position's points
# is compared with the paper's diffusion there (`position_of`).
POSITION_POINTS: dict[str, tuple[str, ...]] = {
    "after_embedding": ("embedding",),
    "after_mlp": ("mlp_output",),
    "between_layers": ("between_blocks",),
    "before_layernorm": ("attn_input", "mlp_input"),
    "in_attention": ("attn_values",),
    "across_heads": ("attn_heads",),
    "after_attention": ("attn_output",),
}


def position_of(operator_keys: Iterable[str]) -> str | None:
    """The paper's position whose insertion points are exactly those of a config variant's operator keys (a
    key is a point, or a position meaning its points); None when they match no single position."""
    points = {point for key in operator_keys for point in POSITION_POINTS.get(key, (key,))}
    return next((p for p, at in POSITION_POINTS.items() if set(at) == points), None)


# Table 4 (§3.3): the ranking the theory predicts before any experiment, 1 = best.
TABLE4_PREDICTED_RANK: dict[str, int] = {v: i + 1 for i, v in enumerate(POSITIONS)}

# Table 6: the LRA average per configuration (equal to Table 10's last column).
TABLE6: dict[str, float] = {v: row["average"] for v, row in TABLE10.items()}


def own_variants(variants: Iterable[str]) -> list[str]:
    """The variants among `variants` that neither the paper nor the related systems name (VARIANT_LABELS):
    a config's own (`variants:` in the workflow config), shown as positions under their config name."""
    return sorted({str(v) for v in variants} - set(VARIANT_LABELS))


def positions_of(variants: Iterable[str]) -> tuple[str, ...]:
    """The positions a report shows: the paper's seven (Table 5 order), then the config's own among
    `variants`."""
    return (*POSITIONS, *own_variants(variants))


def variant_label(variant: str) -> str:
    """The paper's label of a variant; a config's own variant is shown under its config name."""
    return VARIANT_LABELS.get(variant, variant)


def table6_rank() -> dict[str, int]:
    """The measured ranking of the seven positions by Table 6's average, 1 = best (the baseline excluded)."""
    order = sorted(POSITIONS, key=lambda v: -TABLE6[v])
    return {v: i + 1 for i, v in enumerate(order)}


# Table 11: absolute (Δ) and relative (%) gain over the baseline per position and task, as printed.
_T11 = {
    "after_embedding": ((0.0222, 5.94), (0.0549, 8.47), (0.0000, 0.00), (0.0926, 13.20), (0.0335, 8.46)),
    "after_mlp": ((0.0156, 4.17), (-0.0028, -0.43), (0.0120, 1.48), (0.0278, 3.96), (0.0092, 2.32)),
    "between_layers": ((0.0110, 2.94), (0.0120, 1.85), (0.0087, 1.07), (0.0083, 1.18), (0.0139, 3.51)),
    "before_layernorm": ((0.0156, 4.17), (-0.0028, -0.43), (0.0000, 0.00), (0.0278, 3.96), (0.0092, 2.32)),
    "in_attention": ((0.0151, 4.04), (0.0362, 5.59), (0.0049, 0.60), (-0.0145, -2.07), (-0.0182, -4.59)),
    "across_heads": ((0.0040, 1.07), (0.0070, 1.08), (0.0037, 0.46), (-0.0075, -1.07), (0.0039, 0.98)),
    "after_attention": (
        (0.0000, 0.00),
        (-0.0038, -0.59),
        (-0.0001, -0.01),
        (-0.1336, -19.04),
        (0.0148, 3.74),
    ),
}
TABLE11: dict[str, dict[str, dict[str, float]]] = {
    v: {t: {"delta": d, "relative_pct": r} for t, (d, r) in zip(TASKS, cells, strict=True)}
    for v, cells in _T11.items()
}

# Table 13: cross-task correlation per task pair, for the three top positions and the baseline.
_T13_PAIRS = [(a, b) for i, a in enumerate(TASKS) for b in TASKS[i + 1 :]]
_T13 = {
    "after_embedding": (0.82, 0.45, 0.89, 0.91, 0.67, 0.78, 0.83, 0.52, 0.58, 0.87),
    "after_mlp": (0.65, 0.73, 0.72, 0.68, 0.85, 0.59, 0.61, 0.68, 0.71, 0.64),
    "between_layers": (0.71, 0.68, 0.76, 0.74, 0.79, 0.65, 0.67, 0.63, 0.66, 0.69),
    "none": (0.58, 0.41, 0.67, 0.69, 0.62, 0.54, 0.58, 0.49, 0.54, 0.71),
}
TABLE13: dict[str, dict[tuple[str, str], float]] = {
    v: dict(zip(_T13_PAIRS, values, strict=True)) for v, values in _T13.items()
}

# Table 14 also names the configurations' cost order: after_embedding < after_mlp, single < multi-scale.

# Table 15 (ListOps): mean ± std over seeds (the paper does not say how many; Fig. 3 says n = 5).
TABLE15: dict[str, tuple[float, float]] = {
    "none": (0.3740, 0.0054),
    "after_embedding": (0.3962, 0.0042),
    "after_mlp": (0.3896, 0.0039),
    "between_layers": (0.3850, 0.0035),
}

# Table 16: "theoretical" energy per frequency band (High, Mid-H, Mid-L, Low) per scale, as printed.
# The paper does not define the bands or the normalisation; the report shows them beside its own view.
TABLE16_BANDS = ("high", "mid_high", "mid_low", "low")
TABLE16: dict[str, tuple[float, float, float, float]] = {
    "h1": (0.81, 0.40, 1.75, 2.81),
    "h2": (0.64, 0.76, 1.89, 1.85),
    "h4": (0.42, 1.25, 1.67, 0.93),
    "multi": (0.64, 0.82, 1.71, 1.80),
}

# Tables 8 and 9: the paper's model and training configuration (echoed beside the config actually used).
TABLE8: dict[str, dict[str, int]] = {
    "listops": {"d_model": 128, "n_layers": 6, "n_heads": 8, "batch_size": 256},
    "pathfinder": {"d_model": 128, "n_layers": 6, "n_heads": 8, "batch_size": 512},
    "text": {"d_model": 128, "n_layers": 6, "n_heads": 8, "batch_size": 128},
    "retrieval": {"d_model": 128, "n_layers": 4, "n_heads": 8, "batch_size": 64},
    "image": {"d_model": 128, "n_layers": 4, "n_heads": 8, "batch_size": 1024},
}
TABLE9: dict[str, object] = {
    "optimizer": "AdamW",
    "betas": (0.9, 0.98),
    "lr": 1e-3,
    "warmup_steps": 10_000,
    "schedule": "linear warmup, cosine decay",
    "max_epochs": 50,
    "patience": 10,
    "weight_decay": 1e-5,
    "grad_clip": 1.0,
    "dropout": 0.1,
    "d_mlp": 512,
}

# PhysQK-AD's abstract (papers/physqk-ad-abstract.txt), its byte-level LM: d = 256, 4 layers, 20 epochs,
# 128-byte windows, 3 seeds. Layers are read as blocks.1 (L1) … blocks.3 (its numbering is not stated).
PHYSQK_AD_DELTA = {"physqk_ad": -0.065, "physqk": +0.007}  # ΔEval vs MHA, nats/token
PHYSQK_AD_ABLATION_GAIN = (0.43, 0.51)  # simpler α allocations beat joint learning by this much (nats)
PHYSQK_AD_L1_ALPHA = 0.44  # L1's convection share α at the end of training
PHYSQK_AD_CLOSED_ALPHA = 0.003  # L2/L3 α fall below this by 20 epochs
PHYSQK_AD_L1_PE = 1.142  # L1's effective Péclet number
PHYSQK_AD_CONVECTIVE_LAYER = 1
PHYSQK_AD_CLOSED_LAYERS = (2, 3)

# Continuous-Time Attention's own experiments (its paper's Tables 1-5): accuracy as
# a fraction, WikiText-103 validation perplexity as given. Table 1: BERT uncased WordPiece, the official
# src/configs; Table 2: character-level IMDb (max length 2048, d 256, 4 heads, FFN 1024, 4 layers, batch 16,
# 10 epochs); Tables 3-5: causal LM, TinyLlama tokenizer, block 512, d 128, 2 layers, 20 epochs.
CTA_OFFICIAL: dict[str, dict[str, float]] = {
    # classification task → {"none": standard Transformer, "cta_official_diffusion": PDE-Transformer}
    "imdb": {"none": 0.594, "cta_official_diffusion": 0.624},
    "agnews": {"none": 0.605, "cta_official_diffusion": 0.721},
    "sst2": {"none": 0.566, "cta_official_diffusion": 0.763},
    "imdb_char": {"none": 0.6468, "cta_official_diffusion": 0.6544},
    # WikiText-103: best validation perplexity, standard vs PDE (4 steps, diffusion)
    "wikitext103": {"none": 1.04, "cta_official_diffusion": 1.02},
}
# The official WikiText-103 run's PDE steps (src/configs/wikitext103.yaml pde.steps: 4), at which Tables 3
# and 5 are measured; a run's grid setting names it `steps{n}`.
CTA_OFFICIAL_LM_STEPS = 4
# Table 4: PDE steps → validation perplexity (diffusion); 8 steps: "unstable" (no number).
CTA_OFFICIAL_STEPS: dict[int, float] = {1: 3.49, 2: 3.42, 4: 3.36}
CTA_OFFICIAL_UNSTABLE_STEPS = 8
# Table 5: PDE type (at the official 4 steps) → validation perplexity.
CTA_OFFICIAL_TYPES: dict[str, float] = {
    "cta_official_diffusion": 2.15,
    "cta_official_wave": 2.27,
    "cta_official_reaction_diffusion": 2.15,
    "cta_official_advection_diffusion": 2.18,
}
CTA_OFFICIAL_TASK_LABELS = {
    "imdb": "IMDb (WordPiece)",
    "agnews": "AG News",
    "sst2": "SST-2",
    "imdb_char": "IMDb (characters)",
    "wikitext103": "WikiText-103",
}

# How Continuous-Time Attention's official operator (pdelra.nn.cta_official) differs from the pipeline's
# `cta_*` rows: (what, the pipeline, the official code).
CTA_OFFICIAL_DIFFERENCES: tuple[tuple[str, str, str], ...] = (
    (
        "what evolves",
        "attention rows along the key axis, A·p(Δ)·V inside each block",
        "the hidden states, refined after each Transformer layer",
    ),
    (
        "boundary",
        "half-sample reflection",
        (
            "fixed end points: positions 0 and L−1 are not updated (causal: positions 2..L−1 are updated,"
            " 0 and 1 are not)"
        ),
    ),
    (
        "padding",
        "reflection at each sequence's last valid token",
        (
            "a position is updated only if all three stencil positions are valid; padding is left "
            "unchanged (non-causal: so is the last valid token)"
        ),
    ),
    (
        "α",
        "per channel, Σα < ½, shared across steps",
        (
            "one unconstrained scalar per layer; `pde_steps` makes separate layers, each with its own α "
            "(and β)"
        ),
    ),
    (
        "wave",
        "leapfrog from rest",
        "first-order update α²Δu, α₀ = 0.15",
    ),
    (
        "reaction–diffusion",
        "logistic ρA(1 − A) on attention probabilities, rows renormalised",
        "βu(1 − σ(u)) on hidden states, β₀ = 0.02",
    ),
    (
        "advection–diffusion",
        "flux form, |β| < 2α, β₀ = 0",
        "central difference (backward when causal), β₀ = 0.03, unconstrained",
    ),
    (
        "arithmetic",
        "the activations' dtype (fused operator: float32)",
        "float32 whatever the input (float64 too), cast back to the input's dtype",
    ),
    (
        "short sequences",
        "any L ≥ 1",
        "L < 3: x returned as it is",
    ),
    (
        "Transformer",
        "pre-LN, GELU, final LN, learned position embedding, GPT-2 init",
        (
            "nn.TransformerEncoderLayer (post-LN, ReLU, dropout on attention weights too), position "
            "parameter randn(1, L_max, d), PyTorch's default init, masked mean pooling, linear head"
        ),
    ),
    (
        "recipe",
        "LRA Table 9",
        (
            "AdamW lr 1e-4, wd 0.01 on every parameter (α, β too), LinearLR warm-up from 0.1·lr over the "
            "first 10 % of steps then constant, clip 1.0; d 128, 4 heads, FFN 256, 2 layers, dropout 0.1,"
            " 1 PDE step; epochs 5/5/2 and max length 256/256/128 (IMDb, AG News, SST-2); WikiText-103 "
            "LM: 4 steps, blocks of 512 tokens"
        ),
    ),
)
