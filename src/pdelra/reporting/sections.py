"""The report's sections: each function displays one part of the report in the notebook and saves its
tables and figures through `pdelra.reporting.io` (captions → artifacts.json → index.html).

`Report.load(tables_dir, out_dir, experiment)` reads the tables of `pdelra aggregate`; every section works on
whatever runs exist (a partial grid shows missing cells as "—" and claims as `not run`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import HTML, Markdown, display

from pdelra import claims as claims_mod
from pdelra import paper
from pdelra.reporting import spectral
from pdelra.reporting.io import MISSING, save_table, show_figure, show_table
from pdelra.runs import RUN_KEYS

BASE = "base"
COMPLETED = "completed"
ACC = "{:.4f}"
DELTA = "{:+.4f}"
VERDICT_COLOURS = {
    "reproduced": "#1a9850",
    "contradicted": "#d73027",
    "inconclusive": "#fdae61",
    "not run": "#bdbdbd",
}
SCALE_LABELS = {"h1": "Fast (h=1)", "h2": "Medium (h=2)", "h4": "Slow (h=4)", "multi": "Multi-scale"}


def _label(variant: str) -> str:
    return paper.VARIANT_LABELS.get(variant, variant)


def _task(task: str) -> str:
    return paper.TASK_LABELS.get(task, task)


def mean_std(mean: float, std: float, n: int | None = None) -> str:
    if mean is None or pd.isna(mean):
        return MISSING
    text = f"{mean:.4f}" if pd.isna(std) else f"{mean:.4f} ± {std:.4f}"
    return text


@dataclass
class Report:
    tables: Path
    out: Path
    experiment: str
    runs: pd.DataFrame
    main: pd.DataFrame
    multiscale: pd.DataFrame
    cost: pd.DataFrame
    alpha: pd.DataFrame
    partial: bool = False
    _metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(
        cls, tables_dir: str | Path, out_dir: str | Path, experiment: str, partial: bool = False
    ) -> Report:
        tables, out = Path(tables_dir), Path(out_dir)
        (out / "figures").mkdir(parents=True, exist_ok=True)
        (out / "tables").mkdir(parents=True, exist_ok=True)

        def read(name: str) -> pd.DataFrame:
            path = tables / f"{name}.csv"
            frame = pd.read_csv(path) if path.is_file() else pd.DataFrame()
            if len(frame.columns) and "setting" not in frame.columns and "scale" in frame.columns:
                frame.insert(list(frame.columns).index("scale") + 1, "setting", BASE)
            return frame

        sns.set_theme(style="whitegrid", context="notebook")
        return cls(
            tables,
            out,
            experiment,
            read("runs"),
            read("main"),
            read("multiscale"),
            read("cost"),
            read("alpha"),
            partial,
        )

    # ------------------------------------------------------------------------------------------------
    def base_runs(self) -> pd.DataFrame:
        return self.runs[self.runs["setting"] == BASE]

    def completed(self) -> pd.DataFrame:
        r = self.base_runs()
        return r[(r["status"] == COMPLETED) & r["test_accuracy"].notna()]

    def metrics_of(self, row: pd.Series) -> dict[str, Any] | None:
        """The run's metrics.json (the standard layout beside the tables, else its recorded path)."""
        from pdelra.runs import run_dir

        candidates = [
            run_dir(
                self.tables.parent / "runs",
                row["task"],
                row["variant"],
                row["scale"],
                row["setting"],
                row["seed"],
            )
            / "metrics.json",
            Path(str(row.get("metrics_path", ""))),
        ]
        for path in candidates:
            key = str(path)
            if key in self._metrics:
                return self._metrics[key]
            if path.is_file():
                try:
                    self._metrics[key] = json.loads(path.read_text())
                except json.JSONDecodeError:
                    continue
                return self._metrics[key]
        return None

    def positions_present(self) -> list[str]:
        present = set(self.runs["variant"]) if len(self.runs) else set()
        return [v for v in ("none", *paper.POSITIONS) if v in present]

    def tasks_present(self) -> list[str]:
        present = set(self.runs["task"]) if len(self.runs) else set()
        return [t for t in paper.TASKS if t in present]


# ----------------------------------------------------------------------------------------------------
# Claims
# ----------------------------------------------------------------------------------------------------
VERDICT_RULE = """\
**How a claim is judged.** Each claim compares cells of the grid through a per-seed value (test accuracy,
averaged over the claim's tasks; or the step-time overhead over the baseline). Differences are **paired by
seed** (the same seed gives the same initialisation stream and data order) and get a **Student t-interval**
(95 %) of the per-seed differences: with the paper's n = 5 seeds a bootstrap has only 126 distinct
resamples and under-covers, while the t-interval is exact for normal differences. Without two shared seeds
the Welch interval is used. Rankings (Kendall τ) and "best of" margins get a **percentile bootstrap over
seeds** (2,000 resamples). Runs that diverged or failed are left out and counted (`n_excluded`).

The verdict depends only on the direction: **reproduced** when the whole CI lies on the paper's side of 0
(for a paper Δ of 0: inside ±1 pp; for "best": every pairwise CI above 0; for a ranking: τ's CI above 0);
**contradicted** when the whole CI lies on the other side (for "best": another position better with a
Bonferroni-corrected CI); **inconclusive** otherwise or with fewer than 2 usable seeds; **not run** while a
cell the claim needs has no run. Whether the paper's own number lies inside our CI is the separate column
*paper in CI* (the magnitude).
"""


def claims_section(r: Report) -> pd.DataFrame:
    """Evaluate every claim, write claims.csv (report tables), show the headline claims and the "
    "Table 11 grid."""
    table = claims_mod.evaluate(r.runs if len(r.runs) else _empty_runs())
    save_table(
        table,
        r.out,
        "claims",
        "Every claim of the paper with our effect, 95 % CI over seeds, n and verdict",
        formats=_claim_formats(table),
    )
    counts = table["verdict"].value_counts()
    summary = ", ".join(f"**{counts.get(v, 0)}** {v}" for v in claims_mod.VERDICTS)
    display(Markdown(f"{len(table)} claims: {summary}."))

    head = table[~table["claim_id"].str.startswith("table11_sign_")]
    shown = head[
        ["claim_id", "claim", "paper_effect", "effect", "ci_low", "ci_high", "n", "verdict", "paper_in_ci"]
    ]
    shown = shown.rename(columns={"paper_in_ci": "paper in CI", "paper_effect": "paper"})
    display(HTML(_verdict_table_html(shown)))
    ran = table[(table["unit"] == "accuracy") & (table["verdict"] != "not run")]
    _forest_plot(r, ran if len(ran) else head)

    signs = table[table["claim_id"].str.startswith("table11_sign_")].copy()
    if len(signs):
        signs["variant"] = [c.removeprefix("table11_sign_").rsplit("_", 1)[0] for c in signs["claim_id"]]
        signs["task"] = [c.rsplit("_", 1)[1] for c in signs["claim_id"]]
        grid = signs.pivot(index="variant", columns="task", values="verdict")
        grid = grid.reindex(index=list(paper.POSITIONS), columns=list(paper.TASKS))
        grid.index = [_label(v) for v in grid.index]
        grid.columns = [_task(t) for t in grid.columns]
        display(
            Markdown("**Table 11 signs**: does each position's gain over the baseline have the paper's sign?")
        )
        display(HTML(_verdict_grid_html(grid)))
    display(Markdown(VERDICT_RULE))
    return table


def _empty_runs() -> pd.DataFrame:
    return pd.DataFrame(columns=[*RUN_KEYS, "status", "test_accuracy", "median_step_time_s"])


def _claim_formats(table: pd.DataFrame) -> dict[str, Any]:
    def num(x: Any) -> str:
        return f"{x:+.4f}" if abs(x) < 1 else f"{x:+.2f}"

    return {"paper_effect": num, "effect": num, "ci_low": num, "ci_high": num}


def _verdict_table_html(df: pd.DataFrame) -> str:
    rows = []
    for _, row in df.iterrows():
        cells = []
        for col in df.columns:
            v = row[col]
            if col == "verdict":
                colour = VERDICT_COLOURS.get(v, "#fff")
                cells.append(f'<td style="background:{colour};color:#000;font-weight:bold">{v}</td>')
            elif isinstance(v, float | np.floating) and col != "n":
                text = MISSING if pd.isna(v) else (f"{v:+.4f}" if abs(v) < 1 else f"{v:+.2f}")
                cells.append(f'<td style="text-align:right">{text}</td>')
            elif v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append(f"<td>{MISSING}</td>")
            else:
                cells.append(f"<td>{v}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{c}</th>" for c in df.columns)
    return f'<table class="claims"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _verdict_grid_html(grid: pd.DataFrame) -> str:
    head = "<th></th>" + "".join(f"<th>{c}</th>" for c in grid.columns)
    body = []
    for idx, row in grid.iterrows():
        words = [v if isinstance(v, str) else "not run" for v in row]
        cells = "".join(f'<td style="background:{VERDICT_COLOURS[w]}">{w}</td>' for w in words)
        body.append(f"<tr><th>{idx}</th>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _forest_plot(r: Report, head: pd.DataFrame) -> None:
    """Each headline accuracy claim: our effect with its CI next to the paper's effect."""
    acc = head[head["unit"] == "accuracy"].iloc[::-1]
    if acc.empty:
        return
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(acc) + 1.5))
    y = np.arange(len(acc))
    has = acc["effect"].notna()
    err = np.vstack([acc["effect"] - acc["ci_low"], acc["ci_high"] - acc["effect"]])
    err = np.where(np.isnan(err), 0, err)
    colours = [VERDICT_COLOURS[v] for v in acc["verdict"]]
    ax.errorbar(
        acc["effect"][has],
        y[has.to_numpy()],
        xerr=err[:, has.to_numpy()],
        fmt="none",
        ecolor="black",
        capsize=3,
    )
    ax.scatter(acc["effect"], y, c=colours, s=60, zorder=3, edgecolor="black", label="ours (95 % CI)")
    ax.scatter(acc["paper_effect"], y, marker="D", color="crimson", s=30, zorder=4, label="paper")
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_yticks(y, acc["claim_id"])
    ax.set_xlabel("effect (test accuracy difference; τ for rankings)")
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title("Claims: our effect and 95 % CI (colour = verdict) vs the paper")
    show_figure(
        fig,
        r.out,
        "claims_forest",
        "Each claim's effect with its 95 % CI over seeds (colour = verdict) beside the paper's value",
    )


# ----------------------------------------------------------------------------------------------------
# Provenance
# ----------------------------------------------------------------------------------------------------
def provenance_section(r: Report) -> None:
    runs = r.runs
    if runs.empty:
        display(Markdown("_No runs yet._"))
        return
    status = ", ".join(f"{n} {s}" for s, n in runs["status"].value_counts().items())
    hashes = sorted(runs["config_hash"].dropna().astype(str).str[:12].unique())
    lines = [
        f"- **Experiment** `{r.experiment}`; report built {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
        + (" — **partial report** (the grid is still running)" if r.partial else ""),
        f"- **Runs**: {len(runs)} ({status}) over {runs['task'].nunique()} tasks, "
        f"{runs['variant'].nunique()} "
        f"variants, {runs['scale'].nunique()} scales, {runs['setting'].nunique()} settings, seeds "
        f"{', '.join(map(str, sorted(runs['seed'].unique())))}",
        f"- **Code version**: {', '.join(map(str, runs['code_version'].dropna().unique())) or MISSING}",
        f"- **Devices**: {', '.join(map(str, runs['device'].dropna().unique())) or MISSING}",
        f"- **Config hashes** (run configs, first 12 hex): {len(hashes)} distinct",
    ]
    display(Markdown("\n".join(lines)))
    data = runs.groupby("task")["data_hash"].agg(
        lambda s: ", ".join(sorted(s.dropna().astype(str).str[:16].unique()))
    )
    prov = pd.DataFrame({"task": data.index, "data manifest hash (first 16 hex)": data.to_numpy()})
    show_table(
        prov,
        r.out,
        "provenance_data",
        "Data manifest hash per task (sha256 of the processed data's manifest)",
    )
    counts = runs.assign(done=runs["status"] == COMPLETED).groupby(["task", "variant", "scale", "setting"])
    cells = counts.agg(runs=("seed", "count"), completed=("done", "sum")).reset_index()
    save_table(
        cells,
        r.out,
        "runs_per_cell",
        "Number of runs and completed runs per cell (task, variant, scale, setting)",
    )
    wide = cells[cells["setting"] == BASE].assign(
        cell=lambda d: d["completed"].astype(str) + "/" + d["runs"].astype(str)
    )
    wide = wide[wide["scale"] == "h1"].pivot(index="variant", columns="task", values="cell")
    wide = wide.reindex(index=[v for v in paper.VARIANT_LABELS if v in wide.index], columns=r.tasks_present())
    wide.index = [_label(v) for v in wide.index]
    wide.columns = [_task(t) for t in wide.columns]
    display(Markdown("Completed / total runs per cell at h = 1 (all cells: `tables/runs_per_cell.csv`):"))
    show_table(wide.reset_index(names="variant"))
    problems = runs[runs["status"] != COMPLETED]
    if len(problems):
        display(
            Markdown(
                "Runs that did not complete (left out of every mean, counted in `n_runs` and `n_excluded`):"
            )
        )
        show_table(problems[["task", "variant", "scale", "setting", "seed", "status"]])


# ----------------------------------------------------------------------------------------------------
# Main results: Tables 6, 10, 11, 4; Figures 3, 6, 7
# ----------------------------------------------------------------------------------------------------
def _comparison(r: Report) -> pd.DataFrame:
    """Long frame: variant, task (+average), paper, mean, std, n, Δ (ours − paper)."""
    main = (
        r.main[(r.main["setting"] == BASE) & r.main["variant"].isin(paper.TABLE10)] if len(r.main) else r.main
    )
    rows = []
    for variant in paper.TABLE10:
        for task in (*paper.TASKS, "average"):
            hit = main[(main["variant"] == variant) & (main["task"] == task)] if len(main) else main
            mean = float(hit["mean"].iloc[0]) if len(hit) else math.nan
            std = float(hit["std"].iloc[0]) if len(hit) else math.nan
            n = int(hit["n"].iloc[0]) if len(hit) else 0
            p = paper.TABLE10[variant][task]
            rows.append(
                {
                    "variant": variant,
                    "task": task,
                    "paper": p,
                    "mean": mean,
                    "std": std,
                    "n": n,
                    "delta": mean - p,
                }
            )
    return pd.DataFrame(rows)


def table6_section(r: Report) -> pd.DataFrame:
    comp = _comparison(r)
    avg = comp[comp["task"] == "average"].copy()
    avg["position"] = avg["variant"].map(_label)
    avg["ours"] = [mean_std(m, s) for m, s in zip(avg["mean"], avg["std"], strict=True)]
    avg = avg.sort_values("paper", ascending=False)
    t6 = avg[["position", "paper", "ours", "delta", "n"]].rename(columns={"delta": "Δ"})
    show_table(
        t6,
        r.out,
        "table6",
        "Table 6: LRA average accuracy per position, paper | ours (mean ± std over seeds) | Δ = ours − paper",
        formats={"paper": ACC, "Δ": DELTA},
    )
    save_table(
        comp,
        r.out,
        "table10_comparison",
        "Table 10 long form: paper, our mean, std, n and Δ per variant and task",
        formats={"paper": ACC, "mean": ACC, "std": ACC, "delta": DELTA},
    )
    _figure3(r, avg)
    return comp


def _figure3(r: Report, avg: pd.DataFrame) -> None:
    if avg["mean"].notna().sum() == 0:
        display(Markdown("_Figure 3 needs every task for a variant: not run yet._"))
        return
    d = avg.sort_values("paper", ascending=True)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    y = np.arange(len(d))
    colours = ["#7f7f7f" if v == "none" else sns.color_palette("deep")[0] for v in d["variant"]]
    ax.barh(
        y - 0.2,
        d["mean"].fillna(0),
        height=0.4,
        xerr=d["std"].fillna(0),
        color=colours,
        capsize=3,
        label="ours (mean ± std)",
    )
    ax.barh(y + 0.2, d["paper"], height=0.4, color="#f4a582", label="paper (Table 6)")
    ax.set_yticks(y, d["position"])
    ns = sorted(set(d["n"]))
    ax.set_xlabel(f"LRA average test accuracy (ours: n = {', '.join(map(str, ns))} seeds per bar)")
    lo = min(d["mean"].min(skipna=True), d["paper"].min()) - 0.05
    ax.set_xlim(max(0.0, lo), None)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title("Figure 3: LRA average per position (error bars: std over seeds)")
    show_figure(
        fig,
        r.out,
        "figure3_average",
        "Figure 3: LRA average accuracy per position, ours (error bars = std over seeds) and the paper's",
    )


def table10_section(r: Report, comp: pd.DataFrame) -> None:
    tasks = [t for t in (*paper.TASKS, "average")]
    ours = comp.assign(cell=[mean_std(m, s) for m, s in zip(comp["mean"], comp["std"], strict=True)])
    wide = ours.pivot(index="variant", columns="task", values="cell").reindex(
        index=list(paper.TABLE10), columns=tasks
    )
    delta = comp.pivot(index="variant", columns="task", values="delta").reindex(
        index=list(paper.TABLE10), columns=tasks
    )
    out = pd.DataFrame({"position": [_label(v) for v in wide.index]})
    for t in tasks:
        out[f"{_task(t)}"] = wide[t].to_numpy()
        out[f"Δ {_task(t)}"] = delta[t].to_numpy()
    show_table(
        out,
        r.out,
        "table10",
        "Table 10: test accuracy per task (ours, mean ± std) and Δ = ours − paper; the paper's "
        "values are in table10_comparison.csv",
        formats={c: DELTA for c in out.columns if c.startswith("Δ")},
    )
    _figure6(r, comp)
    _figure7(r, comp)


def _figure6(r: Report, comp: pd.DataFrame) -> None:
    per_task = comp[comp["task"] != "average"]
    if per_task["mean"].notna().sum() == 0:
        return
    tasks = [t for t in paper.TASKS if per_task[per_task["task"] == t]["mean"].notna().any()]
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.4 * len(tasks), 4.2), squeeze=False)
    order = list(paper.TABLE10)
    for ax, task in zip(axes[0], tasks, strict=True):
        d = per_task[per_task["task"] == task].set_index("variant").reindex(order)
        x = np.arange(len(d))
        colours = ["#7f7f7f" if v == "none" else sns.color_palette("deep")[0] for v in d.index]
        ax.bar(x, d["mean"].fillna(0), yerr=d["std"].fillna(0), color=colours, capsize=2)
        ax.scatter(x, d["paper"], marker="D", s=22, color="crimson", zorder=3, label="paper")
        ax.set_xticks(x, [_label(v) for v in d.index], rotation=60, ha="right", fontsize="small")
        ax.set_title(_task(task))
        lo = np.nanmin(np.concatenate([d["mean"].to_numpy(), d["paper"].to_numpy()]))
        ax.set_ylim(max(0.0, lo - 0.1), None)
    axes[0][0].set_ylabel("test accuracy")
    axes[0][0].legend(loc="lower left", fontsize="small")
    fig.suptitle(
        "Figure 6: test accuracy per task (bars: ours, mean ± std over seeds; grey = baseline; ◆ paper)"
    )
    fig.tight_layout()
    show_figure(
        fig,
        r.out,
        "figure6_per_task",
        "Figure 6: test accuracy per task and position, ours (bars, ± std) with the paper's "
        "values (diamonds)",
    )


def _ours_beside_paper_heatmaps(
    ours: pd.DataFrame, theirs: pd.DataFrame, paper_title: str, title: str, figsize: tuple[float, float]
) -> plt.Figure:
    """Two annotated accuracy heatmaps of the same layout: our means (left) and the paper's (right)."""
    fig, axes = plt.subplots(1, 2, figsize=figsize)
    for ax, data, panel in ((axes[0], ours, "ours (mean over seeds)"), (axes[1], theirs, paper_title)):
        sns.heatmap(data, annot=True, fmt=".3f", cmap="rocket", ax=ax, cbar_kws={"label": "test accuracy"})
        ax.set_title(panel)
        ax.set_xlabel("")
        ax.set_ylabel("")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _figure7(r: Report, comp: pd.DataFrame) -> None:
    tasks = [*paper.TASKS, "average"]
    ours = comp.pivot(index="variant", columns="task", values="mean").reindex(
        index=list(paper.TABLE10), columns=tasks
    )
    if ours.notna().sum().sum() == 0:
        return
    theirs = comp.pivot(index="variant", columns="task", values="paper").reindex(
        index=list(paper.TABLE10), columns=tasks
    )
    fig = _ours_beside_paper_heatmaps(
        ours.rename(index=_label, columns=_task),
        theirs.rename(index=_label, columns=_task),
        "paper (Table 10)",
        "Figure 7: accuracy heatmap (each panel on its own colour scale; warmer = higher)",
        figsize=(13, 4.5),
    )
    show_figure(
        fig,
        r.out,
        "figure7_heatmap",
        "Figure 7: accuracy heatmap of every position and task, ours beside the paper's",
    )


def table11_section(r: Report, comp: pd.DataFrame) -> None:
    per_task = comp[comp["task"] != "average"]
    ours = per_task.pivot(index="variant", columns="task", values="mean")
    rows = []
    for v in paper.POSITIONS:
        row: dict[str, Any] = {"position": _label(v)}
        for t in paper.TASKS:
            base = ours.loc["none", t] if "none" in ours.index else math.nan
            mine = ours.loc[v, t] if v in ours.index else math.nan
            d = mine - base
            row[f"{_task(t)} Δ"] = d
            row[f"{_task(t)} %"] = 100 * d / base if base and not pd.isna(base) else math.nan
            row[f"{_task(t)} paper Δ"] = paper.TABLE11[v][t]["delta"]
            row[f"{_task(t)} paper %"] = paper.TABLE11[v][t]["relative_pct"]
        rows.append(row)
    t11 = pd.DataFrame(rows)
    fmt = {c: ("{:+.2f}" if c.endswith("%") else DELTA) for c in t11.columns if c != "position"}
    save_table(
        t11,
        r.out,
        "table11",
        "Table 11: absolute (Δ) and relative (%) gain over the baseline per task, ours and the paper's",
        formats=fmt,
    )
    compact = pd.DataFrame({"position": t11["position"]})
    for t in paper.TASKS:
        compact[_task(t)] = [
            f"{MISSING if pd.isna(a) else f'{a:+.4f}'} ({p:+.4f})"
            for a, p in zip(t11[f"{_task(t)} Δ"], t11[f"{_task(t)} paper Δ"], strict=True)
        ]
    display(Markdown("Gain over the baseline, **ours (paper)**; relative % columns in `tables/table11.csv`:"))
    show_table(compact)


def ranking_section(r: Report, comp: pd.DataFrame) -> None:
    avg = comp[(comp["task"] == "average") & comp["variant"].isin(paper.POSITIONS)].set_index("variant")
    ours = avg["mean"].rank(ascending=False, method="min")
    t4 = pd.DataFrame(
        {
            "position": [_label(v) for v in paper.POSITIONS],
            "predicted rank (Table 4)": [paper.TABLE4_PREDICTED_RANK[v] for v in paper.POSITIONS],
            "paper measured rank (Table 6)": [paper.table6_rank()[v] for v in paper.POSITIONS],
            "our rank": [ours.get(v, math.nan) for v in paper.POSITIONS],
            "our average": [avg["mean"].get(v, math.nan) for v in paper.POSITIONS],
        }
    )
    show_table(
        t4,
        r.out,
        "table4_ranking",
        "Table 4's predicted ranking of the seven positions, the paper's measured ranking (Table 6) and ours",
        formats={"our rank": "{:.0f}", "our average": ACC},
    )


# ----------------------------------------------------------------------------------------------------
# Multi-scale: Tables 7, 12; Figures 8, 9, 10
# ----------------------------------------------------------------------------------------------------
def multiscale_section(r: Report) -> None:
    ms = r.multiscale
    ms = ms[(ms["task"] == "listops") & (ms["setting"] == BASE)] if len(ms) else ms
    rows = []
    base = r.main[(r.main["variant"] == "none") & (r.main["task"] == "listops")] if len(r.main) else r.main
    base_mean = float(base["mean"].iloc[0]) if len(base) else math.nan
    for v, per_scale in paper.TABLE12.items():
        for s in ("h1", "h2", "h4", "multi"):
            hit = ms[(ms["variant"] == v) & (ms["scale"] == s)] if len(ms) else ms
            mean = float(hit["mean"].iloc[0]) if len(hit) else math.nan
            std = float(hit["std"].iloc[0]) if len(hit) else math.nan
            n = int(hit["n"].iloc[0]) if len(hit) else 0
            rows.append(
                {
                    "position": _label(v),
                    "variant": v,
                    "scale": s,
                    "paper": per_scale[s],
                    "mean": mean,
                    "std": std,
                    "n": n,
                    "delta": mean - per_scale[s],
                    "gain_over_baseline": mean - base_mean,
                    "paper_gain_over_baseline": per_scale[s] - paper.TABLE10["none"]["listops"],
                }
            )
    long = pd.DataFrame(rows)
    save_table(
        long,
        r.out,
        "table12_comparison",
        "Table 12 long form: ListOps accuracy per position and scale, paper, ours, Δ and gains "
        "over the baseline",
        formats={c: DELTA for c in ("delta", "gain_over_baseline", "paper_gain_over_baseline")},
    )
    t7 = pd.DataFrame({"position": [_label(v) for v in paper.TABLE12]})
    for s in ("h1", "h2", "h4", "multi"):
        d = long[long["scale"] == s]
        t7[SCALE_LABELS[s]] = [
            f"{mean_std(m, sd)} ({p:.4f})" for m, sd, p in zip(d["mean"], d["std"], d["paper"], strict=True)
        ]
    display(Markdown("Table 7 / 12: ListOps accuracy per scale, **ours (paper)**:"))
    show_table(
        t7,
        r.out,
        "table7",
        "Table 7/12: ListOps test accuracy per position and diffusion scale, ours (mean ± std) "
        "with the paper's in brackets",
    )
    if long["mean"].notna().sum() == 0:
        display(Markdown("_No multi-scale runs yet: Figures 8–10 not drawn._"))
        return
    _figure8(r, long)
    _figure9_10(r, long, base_mean)


def _figure8(r: Report, long: pd.DataFrame) -> None:
    ours, theirs = (
        long.pivot(index="position", columns="scale", values=col)
        .reindex(index=[_label(v) for v in paper.TABLE12], columns=["h1", "h2", "h4", "multi"])
        .rename(columns=SCALE_LABELS)
        for col in ("mean", "paper")
    )
    fig = _ours_beside_paper_heatmaps(
        ours, theirs, "paper (Table 12)", "Figure 8: multi-scale ablation on ListOps", figsize=(11, 3.4)
    )
    show_figure(
        fig,
        r.out,
        "figure8_multiscale_heatmap",
        "Figure 8: ListOps accuracy per position and diffusion scale, ours beside the paper's",
    )


def _figure9_10(r: Report, long: pd.DataFrame, base_mean: float) -> None:
    scales = ["h1", "h2", "h4", "multi"]
    positions = [_label(v) for v in paper.TABLE12]
    width = 0.2
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    palette = sns.color_palette("deep", 4)
    for i, s in enumerate(scales):
        d = long[long["scale"] == s].set_index("position").reindex(positions)
        x = np.arange(len(positions)) + (i - 1.5) * width
        axes[0].bar(
            x,
            d["gain_over_baseline"].fillna(0),
            width,
            yerr=d["std"].fillna(0),
            capsize=2,
            color=palette[i],
            label=SCALE_LABELS[s],
        )
        axes[0].scatter(
            x,
            d["paper_gain_over_baseline"],
            marker="D",
            color="crimson",
            s=16,
            zorder=3,
            label="paper" if i == 0 else None,
        )
        axes[1].bar(
            x,
            d["mean"].fillna(0),
            width,
            yerr=d["std"].fillna(0),
            capsize=2,
            color=palette[i],
            label=SCALE_LABELS[s],
        )
        axes[1].scatter(
            x, d["paper"], marker="D", color="crimson", s=16, zorder=3, label="paper" if i == 0 else None
        )
    axes[0].axhline(0, color="black", linewidth=0.8)
    axes[0].set_ylabel("gain over the baseline (accuracy)")
    axes[0].set_title("Figure 9: improvement over the baseline (ListOps)")
    axes[1].set_ylabel("test accuracy")
    if not math.isnan(base_mean):
        axes[1].axhline(base_mean, color="grey", linestyle=":", label="baseline (ours)")
    lo = np.nanmin(np.concatenate([long["mean"].to_numpy(), long["paper"].to_numpy()]))
    axes[1].set_ylim(max(0.0, lo - 0.05), None)
    axes[1].set_title("Figure 10: accuracy per position and scale (ListOps)")
    for ax in axes:
        ax.set_xticks(np.arange(len(positions)), positions)
        ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    show_figure(
        fig,
        r.out,
        "figure9_10_multiscale",
        "Figures 9 and 10: ListOps gain over the baseline and accuracy per position and scale "
        "(bars ± std over seeds; diamonds: paper)",
    )


# ----------------------------------------------------------------------------------------------------
# Table 15 (seeds), Table 13 (cross-task correlation)
# ----------------------------------------------------------------------------------------------------
def table15_section(r: Report) -> None:
    main = r.main[(r.main["task"] == "listops") & (r.main["setting"] == BASE)] if len(r.main) else r.main
    rows = []
    for v, (pm, ps) in paper.TABLE15.items():
        hit = main[main["variant"] == v] if len(main) else main
        mean = float(hit["mean"].iloc[0]) if len(hit) else math.nan
        std = float(hit["std"].iloc[0]) if len(hit) else math.nan
        rows.append(
            {
                "position": _label(v),
                "paper": f"{pm:.4f} ± {ps:.4f}",
                "ours": mean_std(mean, std),
                "n": int(hit["n"].iloc[0]) if len(hit) else 0,
                "Δ mean": mean - pm,
                "std ratio (ours/paper)": std / ps,
            }
        )
    show_table(
        pd.DataFrame(rows),
        r.out,
        "table15",
        "Table 15: ListOps accuracy mean ± std over seeds, paper | ours | Δ",
        formats={"Δ mean": DELTA, "std ratio (ours/paper)": "{:.2f}"},
    )


def table13_section(r: Report) -> None:
    done = r.completed()
    done = done[done["scale"] == "h1"]
    rows = []
    for v in ("after_embedding", "after_mlp", "between_layers", "none"):
        wide = done[done["variant"] == v].pivot_table(index="seed", columns="task", values="test_accuracy")
        for (t1, t2), p in paper.TABLE13[v].items():
            pair = wide[[t1, t2]].dropna() if {t1, t2} <= set(wide.columns) else pd.DataFrame()
            ours = pair[t1].corr(pair[t2]) if len(pair) >= 3 else math.nan
            rows.append(
                {
                    "variant": v,
                    "pair": f"{_task(t1)} ↔ {_task(t2)}",
                    "n_seeds": len(pair),
                    "paper": p,
                    "ours": ours,
                }
            )
    long = pd.DataFrame(rows)
    long["Δ"] = long["ours"] - long["paper"]
    save_table(
        long,
        r.out,
        "table13_comparison",
        "Table 13 long form: cross-task Pearson correlation across seeds per variant and task "
        "pair, paper and ours",
        formats={"paper": "{:.2f}", "ours": "{:+.2f}", "Δ": "{:+.2f}"},
    )
    wide = pd.DataFrame({"pair": long["pair"].unique()})
    for v in ("after_embedding", "after_mlp", "between_layers", "none"):
        d = long[long["variant"] == v].set_index("pair")
        wide[_label(v)] = [
            f"{MISSING if pd.isna(o) else f'{o:+.2f}'} ({p:.2f})"
            for o, p in zip(d["ours"], d["paper"], strict=True)
        ]
    display(
        Markdown(
            "The paper does not say what it correlates. Ours: the Pearson correlation, **across "
            "seeds**, of one "
            "variant's test accuracies on two tasks (needs ≥ 3 seeds complete on both; — "
            "otherwise). **Ours (paper)**:"
        )
    )
    show_table(wide)


# ----------------------------------------------------------------------------------------------------
# Cost: Table 14
# ----------------------------------------------------------------------------------------------------
def cost_section(r: Report, bench_dir: Path | None = None) -> None:
    cost = r.cost
    cost = cost[(cost["setting"] == BASE) & (cost["task"] == "listops")] if len(cost) else cost
    rows = []
    for (v, s), p in [(("none", "h1"), None), *paper.TABLE14.items()]:
        hit = cost[(cost["variant"] == v) & (cost["scale"] == s)] if len(cost) else cost
        get = lambda c, h=hit: float(h[c].iloc[0]) if len(h) else math.nan  # noqa: E731
        rows.append(
            {
                "configuration": f"{_label(v)}" + (" (multi-scale)" if s == "multi" else ""),
                "paper time OH %": p["time_overhead_pct"] if p else math.nan,
                "ours time OH %": get("time_overhead_pct") if v != "none" else math.nan,
                "paper memory OH %": p["memory_overhead_pct"] if p else math.nan,
                "ours memory OH %": get("memory_overhead_pct") if v != "none" else math.nan,
                "median step (ms)": 1000 * get("median_step_time_s"),
                "n": int(hit["n"].iloc[0]) if len(hit) else 0,
            }
        )
    t14 = pd.DataFrame(rows)
    show_table(
        t14,
        r.out,
        "table14",
        "Table 14: ListOps step-time and memory overhead over the baseline (%), paper | ours",
        formats={c: "{:+.1f}" for c in t14.columns if "OH" in c} | {"median step (ms)": "{:.1f}"},
    )
    display(
        Markdown(
            "Per-run step times of jobs sharing a machine vary by ±25 % or more (CPU demo); the "
            "reliable overhead is "
            "the interleaved micro-benchmark (`pdelra bench`, benchmarks/). Below: the overhead "
            "of every position "
            "on ListOps with the spread over seeds."
        )
    )
    all_cost = r.completed()
    all_cost = all_cost[all_cost["task"] == "listops"]
    base = all_cost[(all_cost["variant"] == "none") & (all_cost["scale"] == "h1")].set_index("seed")[
        "median_step_time_s"
    ]
    if base.empty:
        return
    d = all_cost[all_cost["variant"].isin(paper.POSITIONS)].copy()
    d["overhead_pct"] = [
        100 * (t / base[s] - 1) if s in base.index else math.nan
        for t, s in zip(d["median_step_time_s"], d["seed"], strict=True)
    ]
    d = d.dropna(subset=["overhead_pct"])
    if d.empty:
        return
    d["configuration"] = [f"{_label(v)} {s}" for v, s in zip(d["variant"], d["scale"], strict=True)]
    order = d.groupby("configuration")["overhead_pct"].mean().sort_values().index
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(order) + 1.5))
    sns.barplot(
        data=d,
        y="configuration",
        x="overhead_pct",
        order=order,
        errorbar="sd",
        color=sns.color_palette("deep")[0],
        ax=ax,
    )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("median step-time overhead over the baseline, same seed (%)")
    ax.set_ylabel("")
    ax.set_title("Step-time overhead on ListOps (error bars: std over seeds)")
    show_figure(
        fig,
        r.out,
        "cost_overhead",
        "Step-time overhead of each configuration over the baseline on ListOps (per-seed pairs; "
        "error bars = std over seeds)",
    )


# ----------------------------------------------------------------------------------------------------
# Spectral view: Table 16, Figure 2
# ----------------------------------------------------------------------------------------------------
def _learned_alphas(r: Report) -> pd.DataFrame:
    """Per run and diffusion layer of the sequence-axis positions: scales, per-scale α (learned, mean over
    channels), initial α and the stencil scaling, from each run's metrics.json."""
    rows = []
    done = r.completed()
    done = done[done["variant"].isin(paper.POSITIONS)]
    for _, run in done.iterrows():
        metrics = r.metrics_of(run)
        if not metrics:
            continue
        history = [h for h in metrics.get("history") or [] if h.get("alpha")]
        best = [h for h in history if h.get("epoch") == metrics.get("best_epoch")]
        alpha = (best or history or [{}])[-1].get("alpha") or {}
        model_cfg = (metrics.get("run_config") or {}).get("model", {})
        scales = spectral.SCALES.get(run["scale"], (1,))
        init = spectral.initial_alphas(
            scales, float(model_cfg.get("alpha_init", 0.1)), model_cfg.get("multiscale_init", "paper")
        )
        for layer, stats in alpha.items():
            per_scale = stats.get("per_scale")
            if per_scale is None:
                if len(scales) > 1:
                    continue  # older metrics: only the mean over scales, not enough for H(ω)
                per_scale = [stats["mean"]]
            if list(stats.get("scales", scales)) != list(scales) or len(per_scale) != len(scales):
                continue  # not a sequence-axis layer of this scale (e.g. heads axis)
            rows.append(
                {
                    **{k: run[k] for k in ("task", "variant", "scale", "seed")},
                    "layer": layer,
                    "alphas": list(per_scale),
                    "init": init,
                    "stencil_scaling": model_cfg.get("stencil_scaling", "unit"),
                }
            )
    return pd.DataFrame(rows)


def spectral_section(r: Report) -> None:
    omega = np.linspace(0, np.pi, 400)
    rows = []
    for s in ("h1", "h2", "h4", "multi"):
        scales = spectral.SCALES[s]
        for scaling in ("unit", "inverse_h2"):
            e = spectral.band_energy(spectral.initial_alphas(scales, 0.1), scales, scaling)
            rows.append(
                {
                    "scale": SCALE_LABELS[s],
                    "stencil": "eq. 6 (unit)" if scaling == "unit" else "eq. 11 (1/h²)",
                    **e,
                }
            )
        rows.append(
            {
                "scale": SCALE_LABELS[s],
                "stencil": "paper Table 16",
                **dict(zip(paper.TABLE16_BANDS, paper.TABLE16[s], strict=True)),
            }
        )
    t16 = pd.DataFrame(rows)[["scale", "stencil", "low", "mid_low", "mid_high", "high"]]
    display(
        Markdown(
            "Table 16 gives band energies without defining the bands or their normalisation (its "
            "numbers exceed 1 "
            "for a filter with |H| ≤ 1), so they cannot be recomputed. Ours: the mean of |H(ω)|² "
            "over four equal "
            "bands of [0, π] for the layer at initialisation (α = 0.1; multi-scale 0.1 × (1, 0.6, "
            "0.3)), under "
            "eq. 6 (the layer as built, the default `stencil_scaling: unit`) and eq. 11 (`inverse_h2`)."
        )
    )
    show_table(
        t16,
        r.out,
        "table16",
        "Table 16: energy per frequency band of the layer's transfer function at initialisation, "
        "ours (eq. 6 and eq. 11) beside the paper's",
        formats={b: "{:.3f}" for b in ("low", "mid_low", "mid_high", "high")},
    )

    learned = _learned_alphas(r)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.3))
    palette = sns.color_palette("deep", 4)
    for i, s in enumerate(("h1", "h2", "h4", "multi")):
        scales = spectral.SCALES[s]
        init = spectral.initial_alphas(scales, 0.1)
        axes[0].plot(
            omega,
            spectral.transfer(omega, init, scales),
            color=palette[i],
            label=f"{SCALE_LABELS[s]} (eq. 6)",
            linestyle="--" if s == "multi" else "-",
        )
        axes[0].plot(
            omega,
            spectral.transfer(omega, init, scales, "inverse_h2"),
            color=palette[i],
            alpha=0.5,
            linestyle=":",
        )
    axes[0].set_title("At initialisation (solid/dashed: eq. 6 as built; dotted: eq. 11)", fontsize="small")
    if len(learned):
        positions = [v for v in paper.POSITIONS if v in set(learned["variant"])]
        colours = dict(zip(positions, sns.color_palette("tab10", len(positions)), strict=True))
        for v in positions:
            d = learned[(learned["variant"] == v) & (learned["scale"] == "h1")]
            if d.empty:
                continue
            curves = np.array(
                [
                    spectral.transfer(omega, a, (1,), sc)
                    for a, sc in zip(d["alphas"], d["stencil_scaling"], strict=True)
                ]
            )
            axes[1].plot(
                omega, curves.mean(0), color=colours[v], label=f"{_label(v)} (n={len(d)} layers×runs)"
            )
            axes[1].fill_between(omega, curves.min(0), curves.max(0), color=colours[v], alpha=0.15)
        axes[1].plot(
            omega,
            spectral.transfer(omega, [0.1], (1,)),
            color="black",
            linestyle="--",
            label="initial α = 0.1",
        )
        axes[1].set_title("Learned α per position, h = 1 (band: min–max over layers, runs)", fontsize="small")
        multi = learned[learned["scale"] == "multi"]
        for i, v in enumerate(sorted(set(multi["variant"]))):
            d = multi[multi["variant"] == v]
            curves = np.array(
                [
                    spectral.transfer(omega, a, (1, 2, 4), sc)
                    for a, sc in zip(d["alphas"], d["stencil_scaling"], strict=True)
                ]
            )
            axes[2].plot(
                omega, curves.mean(0), color=palette[i % 4], label=f"{_label(v)} learned (n={len(d)})"
            )
            axes[2].fill_between(omega, curves.min(0), curves.max(0), color=palette[i % 4], alpha=0.15)
        init = spectral.initial_alphas((1, 2, 4), 0.1)
        axes[2].plot(
            omega,
            spectral.transfer(omega, init, (1, 2, 4)),
            color="black",
            linestyle="--",
            label="initial (0.1, 0.06, 0.03)",
        )
        axes[2].set_title("Learned multi-scale α (h = 1, 2, 4)", fontsize="small")
    else:
        for ax in axes[1:]:
            ax.text(
                0.5, 0.5, "no trained diffusion layers yet", ha="center", va="center", transform=ax.transAxes
            )
    for ax in axes:
        ax.set_xlabel("ω (radians per token)")
        ax.set_ylabel("H(ω)")
        ax.set_xlim(0, np.pi)
        ax.axhline(0, color="grey", linewidth=0.6)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small")
    fig.suptitle("Figure 2: transfer function H(ω) of one diffusion step")
    fig.tight_layout()
    show_figure(
        fig,
        r.out,
        "figure2_spectral",
        "Figure 2: transfer function H(ω) = 1 − 4 Σ α_k w_k sin²(ω h_k/2) of the layer at "
        "initialisation and with the learned α per position",
    )


def alpha_section(r: Report) -> None:
    alpha = r.alpha
    alpha = alpha[alpha["setting"] == BASE] if len(alpha) else alpha
    if alpha.empty:
        display(Markdown("_No run with a diffusion layer yet._"))
        return
    a = alpha[alpha["variant"].isin(paper.POSITIONS)]
    if a.empty:
        return
    summary = a.groupby(["variant", "scale"], as_index=False)["mean"].agg(["mean", "min", "max", "count"])
    summary.insert(0, "position", summary["variant"].map(_label))
    show_table(
        summary.drop(columns="variant"),
        r.out,
        "learned_alpha",
        "Learned effective α (mean over channels and scales) per position and scale: mean, min, "
        "max over layers and runs",
    )
    fig, ax = plt.subplots(figsize=(9, 4))
    order = [v for v in paper.POSITIONS if v in set(a["variant"])]
    sns.stripplot(data=a, x="variant", y="mean", hue="scale", order=order, dodge=True, jitter=0.15, ax=ax)
    ax.axhline(0.1, color="grey", linestyle=":", label="initial α (h = 1)")
    ax.set_xticks(range(len(order)), [_label(v) for v in order], rotation=30, ha="right")
    ax.set_ylabel("learned α (mean over channels; one point per layer and run)")
    ax.set_xlabel("")
    ax.legend(fontsize="small", title="scale")
    show_figure(
        fig,
        r.out,
        "learned_alpha",
        "Learned diffusion coefficient α per position (one point per layer and run; dotted: initial value)",
    )


# ----------------------------------------------------------------------------------------------------
# Configuration: Tables 8 and 9 echoed, warm-up reached
# ----------------------------------------------------------------------------------------------------
def _general(value: Any) -> str:
    """Numbers like 1e-05 or 0.003 as written in a config ("{:g}"); anything else as it is."""
    return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def config_section(r: Report) -> None:
    done = r.base_runs()
    rows, warm = [], []
    for task in r.tasks_present():
        d = done[done["task"] == task]
        metrics = None
        for _, run in d.iterrows():
            metrics = r.metrics_of(run)
            if metrics:
                break
        cfg = (metrics or {}).get("run_config") or {}
        model, train = cfg.get("model", {}), cfg.get("train", {})
        p = paper.TABLE8.get(task, {})
        rows.append(
            {
                "task": _task(task),
                "dim (paper)": f"{model.get('d_model', MISSING)} ({p.get('d_model', MISSING)})",
                "layers (paper)": f"{model.get('n_layers', MISSING)} ({p.get('n_layers', MISSING)})",
                "heads (paper)": f"{model.get('n_heads', MISSING)} ({p.get('n_heads', MISSING)})",
                "batch (paper)": f"{train.get('batch_size', MISSING)} ({p.get('batch_size', MISSING)})",
                "lr": train.get("lr", MISSING),
                "epochs": train.get("max_epochs", MISSING),
                "warm-up": train.get("warmup_steps", MISSING),
                "weight decay": train.get("weight_decay", MISSING),
            }
        )
        if metrics and metrics.get("planned_steps"):
            planned, warmup = metrics["planned_steps"], train.get("warmup_steps") or 0
            warm.append(
                {
                    "task": _task(task),
                    "steps per epoch": metrics.get("steps_per_epoch"),
                    "planned steps": planned,
                    "warm-up steps": warmup,
                    "peak lr reached": "yes" if planned > warmup else "no",
                    "highest lr / peak": f"{min(1.0, planned / warmup):.2f}" if warmup else "1.00",
                }
            )
    if rows:
        show_table(
            pd.DataFrame(rows),
            r.out,
            "table8_9_config",
            "Tables 8 and 9: the model and training configuration actually used per task, with "
            "the paper's values in brackets",
            formats={"lr": _general, "weight decay": _general},
        )
    if warm:
        display(
            Markdown(
                "Warm-up against the planned number of steps, read from the runs (steps per epoch "
                "= ⌈training "
                "examples in the data manifest / batch size⌉, planned = that × max_epochs): where "
                "the plan is "
                "shorter than the warm-up, the peak learning rate is never reached."
            )
        )
        show_table(
            pd.DataFrame(warm),
            r.out,
            "warmup",
            "Planned optimiser steps per task (from the runs' data manifests) against the warm-up length",
        )


# ----------------------------------------------------------------------------------------------------
# Sections contributed by other modules
# ----------------------------------------------------------------------------------------------------
def contributed_section(module: str, r: Report) -> None:
    """Call `module.render(tables_dir, out_dir)` when the module exists; say "not run" otherwise."""
    import importlib
    import importlib.util

    if importlib.util.find_spec(module) is None:
        display(Markdown(f"_Not run: `{module}` is not part of this installation yet._"))
        return
    importlib.import_module(module).render(r.tables, r.out)
