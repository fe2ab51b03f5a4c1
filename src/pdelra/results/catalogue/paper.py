"""The paper's own claims (PDE-Transformer, Tables 4, 6, 7, 10–12, 14), typed once as data for the engine in
`pdelra.results.claims`. Every paper number comes from `pdelra.paper`; none is typed here."""

from __future__ import annotations

from pdelra import paper
from pdelra.results import claims as C
from pdelra.runs import BASELINE, MAIN_SCALE, MULTI_SCALE, SCALE_ORDER


def paper_claims() -> tuple[C.Claim, ...]:
    """The paper's claims. Every paper number comes from pdelra.paper; none is typed here.

    Table 4's predicted order equals Table 6's measured one, so one order claim tests both.
    """
    avg = paper.TABLE6
    order = sorted(paper.POSITIONS, key=lambda v: -avg[v])
    positions = tuple(C.Cell(v) for v in paper.POSITIONS)
    base = C.Cell(BASELINE)
    listops = C.Metric(tasks=("listops",))
    others = tuple(c for c in positions if c.variant != "after_embedding")
    last_others = tuple(c for c in positions if c.variant != "after_attention")
    claims: list[C.Claim] = [
        C.Difference(
            "after_embedding_gain",
            "After Embedding beats the baseline on the LRA average (+4.07 pp)",
            "abstract, Table 6",
            "primary",
            C.Cell("after_embedding"),
            base,
            avg["after_embedding"] - avg[BASELINE],
        ),
        C.Difference(
            "after_attention_loss",
            "After Attention is below the baseline on the LRA average (−2.45 pp)",
            "abstract, Table 6",
            "primary",
            C.Cell("after_attention"),
            base,
            avg["after_attention"] - avg[BASELINE],
        ),
    ]
    t12 = paper.TABLE12
    singles = tuple(scale for scale in SCALE_ORDER if scale != MULTI_SCALE)

    def pooled(scale: str) -> C.Pooled:
        name = "multi-scale" if scale == "multi" else f"scale {scale}"
        return C.Pooled(tuple(C.Cell(v, scale) for v in t12), f"{name} (mean of the three positions)")

    pooled_paper = {s: sum(t12[v][s] for v in t12) / len(t12) for s in (*singles, "multi")}
    claims.append(
        C.Best(
            "multiscale_gain",
            "On ListOps, multi-scale diffusion beats every single scale (mean of the three positions)",
            "abstract, Tables 7, 12",
            "primary",
            pooled("multi"),
            tuple(pooled(s) for s in singles),
            pooled_paper["multi"] - max(pooled_paper[s] for s in singles),
            metric=listops,
            gaps=tuple(pooled_paper["multi"] - pooled_paper[s] for s in singles),
        )
    )
    claims += [
        C.Best(
            "after_embedding_best",
            "After Embedding is the best of the seven positions on the LRA average",
            "Table 6",
            "ranking",
            C.Cell("after_embedding"),
            others,
            avg["after_embedding"] - max(avg[c.variant] for c in others),
            gaps=tuple(avg["after_embedding"] - avg[c.variant] for c in others),
        ),
        C.Best(
            "after_attention_worst",
            "After Attention is the worst of the seven positions on the LRA average",
            "Table 6",
            "ranking",
            C.Cell("after_attention"),
            last_others,
            avg["after_attention"] - min(avg[c.variant] for c in last_others),
            lowest=True,
            gaps=tuple(avg[c.variant] - avg["after_attention"] for c in last_others),
        ),
        C.PairOrder(
            "position_order",
            "The seven positions rank as in Table 6 (= Table 4's prediction), pair by pair where the paper's "
            "gap exceeds 1 pp; closer pairs are left out",
            "Tables 4, 6",
            "ranking",
            tuple(C.Cell(v) for v in order),
            tuple(avg[v] for v in order),
        ),
    ]
    for variant, per_scale in t12.items():
        best_single = max(per_scale[s] for s in singles)
        claims.append(
            C.Best(
                f"multiscale_gain_{variant}",
                f"On ListOps, multi-scale {paper.VARIANT_LABELS[variant]} beats each of its single scales",
                "Tables 7, 12",
                "multiscale",
                C.Cell(variant, "multi"),
                tuple(C.Cell(variant, s) for s in singles),
                per_scale["multi"] - best_single,
                metric=listops,
                gaps=tuple(per_scale["multi"] - per_scale[s] for s in singles),
            )
        )
    cost = C.Metric(
        column="median_step_time_s",
        tasks=("listops",),
        overhead_vs=base,
        higher_is_better=False,
        unit=C.COST_UNIT,
    )
    t14 = paper.TABLE14
    claims += [
        C.Difference(
            "cost_after_embedding_below_after_mlp",
            "After Embedding costs less per step than After MLP (ListOps; +5.6 % vs +12.8 %)",
            "Table 14",
            "cost",
            C.Cell("after_embedding"),
            C.Cell("after_mlp"),
            t14[("after_embedding", MAIN_SCALE)]["time_overhead_pct"]
            - t14[("after_mlp", MAIN_SCALE)]["time_overhead_pct"],
            metric=cost,
            direction=-1,
        ),
        C.Difference(
            "cost_multiscale_above_single",
            "Multi-scale After Embedding costs more per step than single-scale (ListOps; +18.4 % vs +5.6 %)",
            "Table 14",
            "cost",
            C.Cell("after_embedding", "multi"),
            C.Cell("after_embedding"),
            t14[("after_embedding", "multi")]["time_overhead_pct"]
            - t14[("after_embedding", MAIN_SCALE)]["time_overhead_pct"],
            metric=cost,
            direction=1,
        ),
    ]
    for variant, per_task in paper.TABLE11.items():
        for task, cell in per_task.items():
            claims.append(
                C.Difference(
                    f"table11_sign_{variant}_{task}",
                    f"{paper.VARIANT_LABELS[variant]} vs baseline on {paper.TASK_LABELS[task]}: "
                    f"{C.direction_word(cell['delta'])}",
                    "Table 11",
                    "table11",
                    C.Cell(variant),
                    base,
                    cell["delta"],
                    metric=C.Metric(tasks=(task,)),
                )
            )
    return tuple(claims)
