"""The paper's claims, typed once as data, and the rule that judges each against our runs.

A claim compares *cells* of the grid, a cell being (variant, scale, setting) on one or more tasks, through a
per-seed value: test accuracy (averaged over the claim's tasks when there are several, as the paper's LRA
average is), or a step-time overhead over the baseline in percent. Three kinds:

- `Difference(a, b, direction)`: the effect is mean over seeds of value(a) − value(b). `direction` +1 or −1
  is the sign the paper reports; 0 means the paper reports no difference (|Δ| ≤ `NO_DIFFERENCE`), judged
  by equivalence within ± `margin`. `b` may be `BestSingleScale(variant)`: the best of h1/h2/h4 by mean.
- `Best(target, others)`: the target beats each of the others; the effect is its margin over the runner-up.
- `Ranking(reference)`: Kendall's τ between the ranking of the variants by our means and a reference
  ranking (the paper's measured Table 6, or Table 4's prediction).

Confidence intervals (95 %) — the stated method:
- Differences are **paired by seed** when the two cells share ≥ 2 seeds that completed on every task of
  the claim (the design pairs them: the same seed gives the same initialisation stream and data order), and
  the interval is the **Student t-interval of the per-seed differences** (scipy.stats.t). With the paper's
  n = 5 seeds a percentile bootstrap has only 126 distinct resamples and under-covers badly; the t-interval
  is exact for normal differences and robust enough at this n. Without ≥ 2 shared seeds but ≥ 2 seeds on each
  side, the Welch t-interval (unpaired) is used; below that there is no interval.
- Rankings (τ) and `Best` margins are not means: their intervals are **percentile bootstraps over seeds**
  (seeds resampled with replacement, 2,000 resamples, fixed generator), among seeds complete in every cell.

Verdict rule (exactly one word; `verdict()` below, unit-tested on constructed runs):
- `not run`: a cell the claim needs has no run at all on one of its tasks (missing from the grid so far);
- `inconclusive`: every cell ran but fewer than 2 seeds are usable (completed; diverged runs are excluded
  and counted in `n_excluded`), or the CI straddles the decision threshold;
- `reproduced`: the whole CI lies on the paper's side (> 0 for a gain, < 0 for a loss; for τ, > 0; for a
  no-difference claim, inside ± margin; for `Best`, every pairwise CI is > 0);
- `contradicted`: the whole CI lies on the other side (for no-difference: outside ± margin entirely; for
  `Best`, some other variant is better with a Bonferroni-corrected CI entirely < 0).
The direction decides the verdict; whether the paper's own value lies inside our CI (the magnitude) is the
separate column `paper_in_ci`.

Adding claims (e.g. the related systems): build `Difference`/`Best`/`Ranking` entries and either append them
to `CLAIMS` below, or export a tuple `CLAIMS` from a module listed in `CLAIM_PROVIDERS` (imported if it
exists); `all_claims()` collects both. A cell with a grid setting is `Cell("cta_diffusion", "h1", "steps2")`.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pdelra import paper

if TYPE_CHECKING:
    import pandas as pd

BASE_SETTING = "base"  # pdelra.runs.BASE_SETTING (not imported to keep this module free of the runs layout)
COMPLETED = "completed"
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
# A paper Δ this small (its tables print 4 decimals) is read as "no difference".
NO_DIFFERENCE = 0.001
# Equivalence margin for no-difference claims: 1 percentage point of accuracy.
EQUIVALENCE_MARGIN = 0.01
# Modules that may contribute claims (a tuple named CLAIMS); missing modules are skipped.
CLAIM_PROVIDERS = ("pdelra.reporting.related_section",)

VERDICTS = ("reproduced", "contradicted", "inconclusive", "not run")
CLAIM_COLUMNS = (
    "claim_id",
    "claim",
    "source",
    "kind",
    "unit",
    "paper_effect",
    "effect",
    "ci_low",
    "ci_high",
    "n",
    "verdict",
    "paper_in_ci",
    "method",
    "n_excluded",
    "detail",
)


# ----------------------------------------------------------------------------------------------------
# Claims as data
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One configuration of the grid: variant at a diffusion scale under a grid setting."""

    variant: str
    scale: str = "h1"
    setting: str = BASE_SETTING

    def label(self) -> str:
        name = paper.VARIANT_LABELS.get(self.variant, self.variant)
        extra = [
            s for s in (self.scale if self.scale != "h1" else "", self.setting) if s and s != BASE_SETTING
        ]
        return f"{name} ({', '.join(extra)})" if extra else name


@dataclass(frozen=True)
class BestSingleScale:
    """The best of the single scales h1, h2, h4 of `variant` by mean over seeds (chosen on our runs)."""

    variant: str
    scales: tuple[str, ...] = ("h1", "h2", "h4")
    setting: str = BASE_SETTING

    def label(self) -> str:
        return f"best single scale of {paper.VARIANT_LABELS.get(self.variant, self.variant)}"


@dataclass(frozen=True)
class Metric:
    """The per-seed value: `column` of runs.csv averaged over `tasks`; with `overhead_vs`, the overhead
    100·(x / x_ref − 1) in percent over that cell on the same task and seed, averaged over tasks."""

    column: str = "test_accuracy"
    tasks: tuple[str, ...] = paper.TASKS
    overhead_vs: Cell | None = None
    higher_is_better: bool = True

    @property
    def unit(self) -> str:
        return "pp of step time" if self.overhead_vs is not None else "accuracy"


@dataclass(frozen=True)
class Difference:
    claim_id: str
    claim: str
    source: str
    a: Cell
    b: Cell | BestSingleScale
    paper_effect: float
    metric: Metric = field(default_factory=Metric)
    direction: int | None = None  # None: the sign of paper_effect (0 when |paper_effect| ≤ NO_DIFFERENCE)
    margin: float = EQUIVALENCE_MARGIN

    @property
    def expected(self) -> int:
        if self.direction is not None:
            return self.direction
        return 0 if abs(self.paper_effect) <= NO_DIFFERENCE else (1 if self.paper_effect > 0 else -1)

    kind = "difference"


@dataclass(frozen=True)
class Best:
    claim_id: str
    claim: str
    source: str
    target: Cell
    others: tuple[Cell, ...]
    paper_effect: float
    metric: Metric = field(default_factory=Metric)

    kind = "best"


@dataclass(frozen=True)
class Ranking:
    claim_id: str
    claim: str
    source: str
    cells: tuple[Cell, ...]
    reference_rank: dict[str, int]  # variant → rank, 1 = best
    paper_effect: float
    metric: Metric = field(default_factory=Metric)

    kind = "ranking"


Claim = Difference | Best | Ranking


def _pct(a: float, b: float) -> float:
    return 100.0 * (a - b)


def _paper_claims() -> tuple[Claim, ...]:
    """The paper's claims. Every paper number comes from pdelra.paper; none is typed here."""
    avg = paper.TABLE6
    positions = tuple(Cell(v) for v in paper.POSITIONS)
    base = Cell("none")
    listops = Metric(tasks=("listops",))
    claims: list[Claim] = [
        Difference(
            "after_embedding_gain",
            "After Embedding beats the baseline on the LRA average (+4.07 pp)",
            "Table 6, abstract",
            Cell("after_embedding"),
            base,
            avg["after_embedding"] - avg["none"],
        ),
        Difference(
            "after_attention_loss",
            "After Attention is below the baseline on the LRA average (−2.45 pp)",
            "Table 6",
            Cell("after_attention"),
            base,
            avg["after_attention"] - avg["none"],
        ),
        Best(
            "after_embedding_best",
            "After Embedding is the best of the seven positions on the LRA average",
            "Table 6",
            Cell("after_embedding"),
            tuple(c for c in positions if c.variant != "after_embedding"),
            avg["after_embedding"] - max(avg[v] for v in paper.POSITIONS if v != "after_embedding"),
        ),
        Ranking(
            "position_ranking",
            "The seven positions rank as in the paper's measurements (Kendall τ with Table 6)",
            "Table 6",
            positions,
            paper.table6_rank(),
            1.0,
        ),
        Ranking(
            "position_ranking_theory",
            "The seven positions rank as the theory predicts (Kendall τ with Table 4)",
            "Table 4, §3.3",
            positions,
            paper.TABLE4_PREDICTED_RANK,
            _kendall_tau(paper.table6_rank(), paper.TABLE4_PREDICTED_RANK),
        ),
    ]
    for variant, per_scale in paper.TABLE12.items():
        best_single = max(per_scale[s] for s in ("h1", "h2", "h4"))
        claims.append(
            Difference(
                f"multiscale_gain_{variant}",
                f"On ListOps, multi-scale {paper.VARIANT_LABELS[variant]} beats its best single scale",
                "Tables 7, 12",
                Cell(variant, "multi"),
                BestSingleScale(variant),
                per_scale["multi"] - best_single,
                metric=listops,
                direction=1,
            )
        )
    cost = Metric(column="median_step_time_s", tasks=("listops",), overhead_vs=base, higher_is_better=False)
    t14 = paper.TABLE14
    claims += [
        Best(
            "cost_after_embedding_cheapest",
            "After Embedding has the smallest step-time overhead of the seven positions (ListOps)",
            "Table 14",
            Cell("after_embedding"),
            tuple(c for c in positions if c.variant != "after_embedding"),
            t14[("after_mlp", "h1")]["time_overhead_pct"]
            - t14[("after_embedding", "h1")]["time_overhead_pct"],
            metric=cost,
        ),
        Difference(
            "cost_multiscale_above_single",
            "Multi-scale After Embedding costs more per step than single-scale (ListOps)",
            "Table 14",
            Cell("after_embedding", "multi"),
            Cell("after_embedding"),
            t14[("after_embedding", "multi")]["time_overhead_pct"]
            - t14[("after_embedding", "h1")]["time_overhead_pct"],
            metric=cost,
            direction=1,
        ),
    ]
    for variant, per_task in paper.TABLE11.items():
        for task, cell in per_task.items():
            claims.append(
                Difference(
                    f"table11_sign_{variant}_{task}",
                    f"{paper.VARIANT_LABELS[variant]} vs baseline on {paper.TASK_LABELS[task]}: "
                    + (
                        "no difference"
                        if abs(cell["delta"]) <= NO_DIFFERENCE
                        else "gain"
                        if cell["delta"] > 0
                        else "loss"
                    ),
                    "Table 11",
                    Cell(variant),
                    base,
                    cell["delta"],
                    metric=Metric(tasks=(task,)),
                )
            )
    return tuple(claims)


def _kendall_tau(rank_a: dict[str, int], rank_b: dict[str, int]) -> float:
    from scipy.stats import kendalltau

    keys = sorted(set(rank_a) & set(rank_b))
    return float(kendalltau([rank_a[k] for k in keys], [rank_b[k] for k in keys]).statistic)


CLAIMS: tuple[Claim, ...] = _paper_claims()


def all_claims() -> tuple[Claim, ...]:
    """`CLAIMS` plus the `CLAIMS` tuple of every importable module in `CLAIM_PROVIDERS`, ids unique."""
    claims = list(CLAIMS)
    for name in CLAIM_PROVIDERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        claims.extend(getattr(module, "CLAIMS", ()))
    ids = [c.claim_id for c in claims]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"claim ids must be unique; repeated: {duplicates}")
    return tuple(claims)


# ----------------------------------------------------------------------------------------------------
# Per-seed values
# ----------------------------------------------------------------------------------------------------
@dataclass
class SeedValues:
    """Per-seed values of one cell: `values` (seed → value) for seeds usable on every task, `missing`
    (tasks with no run at all) and `excluded` (runs that exist but did not complete)."""

    values: dict[int, float]
    missing: list[str]
    excluded: int


def _select(runs: pd.DataFrame, cell: Cell, task: str) -> pd.DataFrame:
    setting = runs["setting"] if "setting" in runs.columns else BASE_SETTING
    mask = (
        (runs["variant"] == cell.variant)
        & (runs["scale"] == cell.scale)
        & (setting == cell.setting)
        & (runs["task"] == task)
    )
    return runs[mask]


def _usable(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    return rows[(rows["status"] == COMPLETED) & rows[column].notna()]


def seed_values(runs: pd.DataFrame, cell: Cell, metric: Metric) -> SeedValues:
    """The cell's value per seed, averaged over the metric's tasks; only seeds usable on all of them."""
    per_task: list[dict[int, float]] = []
    missing: list[str] = []
    excluded = 0
    for task in metric.tasks:
        rows = _select(runs, cell, task)
        if rows.empty:
            missing.append(task)
            continue
        usable = _usable(rows, metric.column)
        excluded += len(rows) - len(usable)
        values = dict(zip(usable["seed"].astype(int), usable[metric.column].astype(float), strict=True))
        if metric.overhead_vs is not None:
            ref_rows = _select(runs, metric.overhead_vs, task)
            if ref_rows.empty:
                missing.append(f"{task} ({metric.overhead_vs.label()})")
                continue
            ref_usable = _usable(ref_rows, metric.column)
            ref = dict(
                zip(ref_usable["seed"].astype(int), ref_usable[metric.column].astype(float), strict=True)
            )
            values = {s: 100.0 * (x / ref[s] - 1.0) for s, x in values.items() if s in ref and ref[s] > 0}
        per_task.append(values)
    if missing or not per_task:
        return SeedValues({}, missing, excluded)
    seeds = set.intersection(*(set(v) for v in per_task))
    return SeedValues({s: sum(v[s] for v in per_task) / len(per_task) for s in sorted(seeds)}, [], excluded)


def _resolve(runs: pd.DataFrame, b: Cell | BestSingleScale, metric: Metric) -> tuple[Cell, SeedValues, str]:
    """A `BestSingleScale` becomes the single-scale cell with the highest mean; a Cell stays itself."""
    if isinstance(b, Cell):
        return b, seed_values(runs, b, metric), ""
    candidates = []
    for scale in b.scales:
        cell = Cell(b.variant, scale, b.setting)
        sv = seed_values(runs, cell, metric)
        if sv.missing:
            return cell, sv, ""
        candidates.append((cell, sv))
    scored = [(c, sv) for c, sv in candidates if sv.values]
    if not scored:
        return candidates[0][0], candidates[0][1], ""
    sign = 1 if metric.higher_is_better else -1
    cell, sv = max(scored, key=lambda c: sign * sum(c[1].values.values()) / len(c[1].values))
    return cell, sv, f"best single scale: {cell.scale}"


# ----------------------------------------------------------------------------------------------------
# Intervals
# ----------------------------------------------------------------------------------------------------
@dataclass
class Interval:
    effect: float
    low: float
    high: float
    n: int
    method: str


def difference_interval(a: dict[int, float], b: dict[int, float], confidence: float = CONFIDENCE) -> Interval:
    """Mean difference a − b with its t-interval: paired over shared seeds when ≥ 2, else Welch."""
    from scipy import stats

    shared = sorted(set(a) & set(b))
    if len(shared) >= 2:
        d = [a[s] - b[s] for s in shared]
        n = len(d)
        mean = sum(d) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
        half = stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
        return Interval(mean, mean - half, mean + half, n, "paired t")
    xa, xb = list(a.values()), list(b.values())
    if len(xa) >= 2 and len(xb) >= 2:
        ma, mb = sum(xa) / len(xa), sum(xb) / len(xb)
        va = sum((x - ma) ** 2 for x in xa) / (len(xa) - 1) / len(xa)
        vb = sum((x - mb) ** 2 for x in xb) / (len(xb) - 1) / len(xb)
        se = math.sqrt(va + vb)
        if se == 0:
            return Interval(ma - mb, ma - mb, ma - mb, min(len(xa), len(xb)), "Welch t")
        dof = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1))
        half = stats.t.ppf(0.5 + confidence / 2, dof) * se
        return Interval(ma - mb, ma - mb - half, ma - mb + half, min(len(xa), len(xb)), "Welch t")
    effect = (sum(xa) / len(xa) - sum(xb) / len(xb)) if xa and xb else math.nan
    return Interval(effect, math.nan, math.nan, len(shared), "none (n < 2)")


def bootstrap_interval(
    seeds: Sequence[int],
    statistic: Any,
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[float, float]:
    """Percentile bootstrap over seeds of `statistic(list_of_seeds) -> float`, fixed generator."""
    import numpy as np

    if len(seeds) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, len(seeds), size=(resamples, len(seeds)))
    values = np.array([statistic([seeds[i] for i in row]) for row in picks], dtype=float)
    values = values[~np.isnan(values)]
    if not len(values):
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    return float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))


# ----------------------------------------------------------------------------------------------------
# The verdict rule
# ----------------------------------------------------------------------------------------------------
def verdict(
    expected: int,
    low: float,
    high: float,
    n: int,
    missing: bool = False,
    margin: float = EQUIVALENCE_MARGIN,
) -> str:
    """The verdict from the paper's direction (+1, −1, or 0 = no difference) and our CI [low, high]."""
    if missing:
        return "not run"
    if n < 2 or math.isnan(low) or math.isnan(high):
        return "inconclusive"
    if expected == 0:
        if -margin <= low and high <= margin:
            return "reproduced"
        if high < -margin or low > margin:
            return "contradicted"
        return "inconclusive"
    if (expected > 0 and low > 0) or (expected < 0 and high < 0):
        return "reproduced"
    if (expected > 0 and high < 0) or (expected < 0 and low > 0):
        return "contradicted"
    return "inconclusive"


def _paper_in_ci(paper_effect: float, low: float, high: float) -> bool | None:
    if math.isnan(low) or math.isnan(high) or math.isnan(paper_effect):
        return None
    return bool(low <= paper_effect <= high)


def _row(claim: Claim, **values: Any) -> dict[str, Any]:
    row = {
        "claim_id": claim.claim_id,
        "claim": claim.claim,
        "source": claim.source,
        "kind": claim.kind,
        "unit": "Kendall τ" if isinstance(claim, Ranking) else claim.metric.unit,
        "paper_effect": claim.paper_effect,
        "effect": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "n": 0,
        "verdict": "not run",
        "paper_in_ci": None,
        "method": "",
        "n_excluded": 0,
        "detail": "",
    }
    row.update(values)
    row["paper_in_ci"] = _paper_in_ci(row["paper_effect"], row["ci_low"], row["ci_high"])
    return row


def _missing_detail(pairs: list[tuple[str, SeedValues]]) -> str:
    return "; ".join(f"{label}: no run on {', '.join(sv.missing)}" for label, sv in pairs if sv.missing)


def evaluate_difference(runs: pd.DataFrame, claim: Difference) -> dict[str, Any]:
    a = seed_values(runs, claim.a, claim.metric)
    b_cell, b, chosen = _resolve(runs, claim.b, claim.metric)
    excluded = a.excluded + b.excluded
    if a.missing or b.missing:
        detail = _missing_detail([(claim.a.label(), a), (b_cell.label(), b)])
        return _row(claim, verdict="not run", n_excluded=excluded, detail=detail)
    iv = difference_interval(a.values, b.values)
    word = verdict(claim.expected, iv.low, iv.high, iv.n, margin=claim.margin)
    detail = [chosen] if chosen else []
    if claim.expected == 0:
        detail.append(f"no-difference claim: equivalence within ±{claim.margin:g}")
    if excluded:
        detail.append(f"{excluded} run(s) not completed (diverged/failed) left out")
    return _row(
        claim,
        effect=iv.effect,
        ci_low=iv.low,
        ci_high=iv.high,
        n=iv.n,
        verdict=word,
        method=iv.method,
        n_excluded=excluded,
        detail="; ".join(detail),
    )


def evaluate_best(runs: pd.DataFrame, claim: Best) -> dict[str, Any]:
    """Target vs each other cell (oriented so > 0 favours the target); IUT for reproduced, Bonferroni for
    contradicted. The effect and CI reported are those of the comparison with the runner-up."""
    sign = 1.0 if claim.metric.higher_is_better else -1.0
    target = seed_values(runs, claim.target, claim.metric)
    others = [(c, seed_values(runs, c, claim.metric)) for c in claim.others]
    excluded = target.excluded + sum(sv.excluded for _, sv in others)
    if target.missing or any(sv.missing for _, sv in others):
        detail = _missing_detail([(claim.target.label(), target)] + [(c.label(), sv) for c, sv in others])
        return _row(claim, verdict="not run", n_excluded=excluded, detail=detail)
    k = len(others)
    oriented = {s: sign * v for s, v in target.values.items()}
    comparisons = []
    for cell, sv in others:
        other = {s: sign * v for s, v in sv.values.items()}
        iv = difference_interval(oriented, other)
        strict = difference_interval(oriented, other, confidence=1 - (1 - CONFIDENCE) / k)
        comparisons.append((cell, iv, strict))
    runner_up = min(comparisons, key=lambda c: c[1].effect if not math.isnan(c[1].effect) else math.inf)
    n = min(iv.n for _, iv, _ in comparisons)
    if n < 2 or any(math.isnan(iv.low) for _, iv, _ in comparisons):
        word = "inconclusive"
    elif all(iv.low > 0 for _, iv, _ in comparisons):
        word = "reproduced"
    elif any(strict.high < 0 for _, _, strict in comparisons):
        word = "contradicted"
    else:
        word = "inconclusive"
    better = [c.label() for c, iv, _ in comparisons if iv.effect < 0]
    detail = f"runner-up: {runner_up[0].label()}"
    if better:
        detail += f"; better than the target on average: {', '.join(better)}"
    if excluded:
        detail += f"; {excluded} run(s) not completed left out"
    iv = runner_up[1]
    return _row(
        claim,
        effect=iv.effect,
        ci_low=iv.low,
        ci_high=iv.high,
        n=n,
        verdict=word,
        method=f"{iv.method} per pair (all {k} > 0: reproduced; Bonferroni ×{k} for contradicted)",
        n_excluded=excluded,
        detail=detail,
    )


def evaluate_ranking(runs: pd.DataFrame, claim: Ranking) -> dict[str, Any]:
    import numpy as np

    values = [(c, seed_values(runs, c, claim.metric)) for c in claim.cells]
    excluded = sum(sv.excluded for _, sv in values)
    if any(sv.missing for _, sv in values):
        return _row(
            claim,
            verdict="not run",
            n_excluded=excluded,
            detail=_missing_detail([(c.label(), sv) for c, sv in values]),
        )
    seeds = sorted(set.intersection(*(set(sv.values) for _, sv in values)))
    sign = 1.0 if claim.metric.higher_is_better else -1.0
    reference = [claim.reference_rank[c.variant] for c, _ in values]

    def tau(sample: Sequence[int]) -> float:
        from scipy.stats import kendalltau

        means = [sign * float(np.mean([sv.values[s] for s in sample])) for _, sv in values]
        # rank 1 = best: the reference ranks go the opposite way to the means
        return float(-kendalltau(means, reference).statistic)

    if not seeds:
        return _row(
            claim, verdict="inconclusive", n_excluded=excluded, detail="no seed complete in every cell"
        )
    effect = tau(seeds)
    low, high = bootstrap_interval(seeds, tau)
    word = verdict(1, low, high, len(seeds))
    order = sorted(values, key=lambda c: -sign * float(np.mean([c[1].values[s] for s in seeds])))
    detail = "ours: " + " > ".join(c.label() for c, _ in order)
    return _row(
        claim,
        effect=effect,
        ci_low=low,
        ci_high=high,
        n=len(seeds),
        verdict=word,
        method=f"percentile bootstrap over seeds ({BOOTSTRAP_RESAMPLES} resamples)",
        n_excluded=excluded,
        detail=detail,
    )


def evaluate(runs: pd.DataFrame, claims: Sequence[Claim] | None = None) -> pd.DataFrame:
    """claims.csv as a frame: one row per claim, columns `CLAIM_COLUMNS`, in the claims' order."""
    import pandas as pd

    rows = []
    for claim in all_claims() if claims is None else claims:
        if isinstance(claim, Difference):
            rows.append(evaluate_difference(runs, claim))
        elif isinstance(claim, Best):
            rows.append(evaluate_best(runs, claim))
        elif isinstance(claim, Ranking):
            rows.append(evaluate_ranking(runs, claim))
        else:
            raise TypeError(f"not a claim: {claim!r}")
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))
