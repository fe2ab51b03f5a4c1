"""The paper's published numbers (arXiv "PDE-Transformer", appendix B), to set beside ours in the report.

Test accuracy as fractions. Variant names are this project's (docs/interfaces.md): the paper's "Layer
Diffusion" is `between_layers`, "Head Diffusion" is `across_heads`; its scales Fast/Medium/Slow are
h = 1, 2, 4.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

TASKS = ("listops", "text", "retrieval", "pathfinder", "image")
TASK_LABELS = {
    "listops": "ListOps",
    "text": "Text",
    "retrieval": "Retrieval",
    "pathfinder": "PathFinder",
    "image": "Image",
    "average": "Average",
}
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
