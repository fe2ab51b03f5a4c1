"""The plan as text (`pdelra plan`): its per-rule-and-task table, the totals and sources, and with `--power`
the seeds each claim of the config needs and what seed counts cost (`pdelra.results.seeds`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pdelra.planning import experiment, priorities
from pdelra.results import seeds

if TYPE_CHECKING:
    import pandas as pd


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def hours_text(hours: float) -> str:
    """Hours as the plan prints them: whole hours from 100 on, else 3 significant digits."""
    return f"{hours:,.0f}" if hours >= 100 else f"{hours:.3g}"


def _fmt(value: Any, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


SOURCES = (
    "from: manifest = the processed data's counts; config = data.generate sizes; published = the LRA's "
    "split sizes.\ntime from: finished = the job's own finished runs (their wall time; not run again); "
    "runs = the finished runs of the job's grid cell (median step time x planned steps, or median wall "
    "time; a part's jobs: only runs of its own, never another model's time); calibrated = timed here on "
    "{device} (LRA jobs only; baseline model, every sequence at max_length: an upper bound); flops = "
    "estimated from the model's FLOPs on --gpu (pdelra.planning.flops); requested = the "
    "job's runtime (a bound, not an estimate).\nasks mem, cpus: each job's "
    "request (resources mem_mb, cpus_per_task; a pack K x one run's), set from measured peak host memory "
    "(runs.csv peak_host_memory_mb; config/README.md) with a margin; peak mem: the calibrated device memory."
)


def plan_table(plan: Mapping[str, Any]) -> list[dict[str, str]]:
    """The per-rule-and-task rows of a plan as display strings, with a total row."""
    rows = []
    for t in plan["tasks"]:
        micro = (
            "-"
            if t["needs_micro_batching"] is None
            else (str(t["suggested_micro_batch_size"]) if t["needs_micro_batching"] else "no")
        )
        padding = (
            "-"
            if t["padding_ratio"] is None
            else f"{t['padding_ratio']:.2f} -> {t['padding_ratio_bucketed']:.2f} ({t['length_buckets']})"
        )
        rows.append({
            "rule": t["rule"],
            "task": t["task"],
            "jobs": str(t["jobs"]),
            "done": str(t["done"]),
            "n_train": _fmt(t["n_train"]),
            "from": t["counts_source"],
            "steps/job": _fmt(t["steps_per_job"]),
            "s/step": _fmt(t["step_time_s"], ".3f"),
            "time from": t["step_time_source"],
            "device-h": hours_text(t["device_hours"]),
            "to go": hours_text(t["device_hours_to_go"]),
            "attempts": f"{t['failing_jobs']} fail" if t["failing_jobs"] else _fmt(t["max_attempts"]),
            "asks mem": _fmt_bytes(None if t["mem_mb"] is None else t["mem_mb"] * 1_000_000),  # MB
            "cpus": _fmt(t["cpus"]),
            "peak mem": _fmt_bytes(t["peak_memory_bytes"]),
            "micro": micro,
            "disk": _fmt_bytes(t["disk_bytes"]),
            "padding (buckets)": padding,
        })  # fmt: skip
    total = plan["total"]
    rows.append({
        "rule": "total", "task": "", "jobs": str(total["jobs"]), "done": str(total["done"]),
        "time from": total["device_hours_source"], "device-h": hours_text(total["device_hours"]),
        "to go": hours_text(total["device_hours_to_go"]), "disk": _fmt_bytes(total["disk_bytes"]),
    })  # fmt: skip
    return rows


TEXT_COLUMNS = ("rule", "task", "from", "time from", "padding (buckets)")  # aligned left; numbers right


def format_table(rows: list[dict[str, str]]) -> str:
    """Rows as fixed-width columns, two spaces apart, each as wide as its widest cell or heading."""
    columns = list(rows[0])
    widths = {col: max(len(col), *(len(row.get(col, "")) for row in rows)) for col in columns}

    def line(cells: Mapping[str, str]) -> str:
        return "  ".join(
            cells.get(col, "").ljust(widths[col])
            if col in TEXT_COLUMNS
            else cells.get(col, "").rjust(widths[col])
            for col in columns
        ).rstrip()

    return "\n".join([line({col: col for col in columns}), *map(line, rows)])


def print_plan(plan: Mapping[str, Any], title: str = "plan") -> None:
    gpus, total = plan["gpus"], plan["total"]
    other = sum(plan["other_jobs"].values())
    if "calibrated" in total["device_hours_source"]:
        title += f" (calibrated on {plan['device']})"
    print(
        f"{title}: {total['jobs']} training jobs ({total['done']} finished) and {other} other jobs; steps "
        f"are upper bounds (early stopping may end runs sooner); retries {plan['retries']} (attempt n asks "
        "for n x runtime, at most cluster.max_runtime)"
    )
    print(format_table(plan_table(plan)))
    print(
        f"wall-clock of the {total['jobs'] - total['done']} training jobs to go, {gpus} at a time (--gpus "
        f"{gpus}): {hours_text(total['wall_clock_hours'])} h (a greedy longest-job-first schedule of their "
        "times above; queueing and data preparation not included)"
    )
    print(
        "other jobs (data, diagnostics, tables, report, DVC): "
        + ", ".join(f"{rule} {count}" for rule, count in plan["other_jobs"].items())
    )
    if plan.get("uncalibrated_gpu_tasks"):
        print(
            f"not calibrated: {', '.join(plan['uncalibrated_gpu_tasks'])} (their jobs ask for a GPU and this "
            "machine has none: they count at their runtime; run the plan on a GPU node, e.g. `srun --gpus 1 "
            "pdelra plan ...`, or pass --device cpu to time them on this CPU)"
        )
    if plan["failing_jobs"]:
        print(
            f"warning: {len(plan['failing_jobs'])} job(s) need more than {plan['retries'] + 1} attempts of "
            "their runtime and would fail: raise tasks.TASK.resources.runtime (minutes)"
        )
    for t in plan["tasks"]:
        if t.get("not_estimated"):
            print(f"not estimated: {t['rule']} {t['task']}: {t['not_estimated']}")
    for deviation in plan["deviations"]:
        print(f"deviation: {deviation}")
    if plan.get("flops"):
        print(flops_lines(plan))
    if "priority" in plan:
        print(priorities.spending_line(plan))
    print(SOURCES.format(device=plan["device"]))


def flops_lines(plan: Mapping[str, Any]) -> str:
    """What `--gpu` estimated: its assumptions, and estimated beside requested GPU-hours."""
    est, total = plan["flops"], plan["total"]
    derived = sum(t.get("requested_hours_from_estimate", t["requested_hours"]) for t in plan["tasks"])
    lengths = ", ".join(f"{task} {length}" for task, length in est["lengths"].items())
    unmodelled = sorted({t["rule"] for t in plan["tasks"] if t["rule"] not in experiment.LRA_RULES})
    return "\n".join(
        [
            f"FLOPs estimate on {est['gpu']}: {est['peak_tflops']:g} TFLOP/s bf16 dense peak x utilisation "
            f"{est['utilisation']:.1%} ({est['utilisation_source']}); a step 3 x forward; lengths {lengths}; "
            "the baseline model's FLOPs (diffusion adds 1-6 %)",
            f"GPU-hours: {hours_text(total['device_hours'])} estimated, "
            f"{hours_text(total['requested_hours'])} requested (each job's runtime, first attempt); "
            f"requests of the estimate x cluster.runtime_margin {est['margin']:g} would total "
            f"{hours_text(derived)} (what they ask with cluster.runtime_from: estimate, before its "
            "30-min floor and max_runtime cap)"
            + (f" ({', '.join(unmodelled)}: FLOPs not modelled, at their runtime)" if unmodelled else ""),
        ]
    )


def print_power(
    config: Mapping[str, Any],
    pilot: pd.DataFrame | None,
    lra_hours: float,
    unit: str = "GPU-hours",
    effect: float | None = None,
) -> None:
    """The seeds each claim of the config needs (the paper's claims on the cells it runs, and its own
    variants', at `effect` where one is named; `pdelra.results.seeds`, from the `pilot` runs table when given)
    and what seed counts cost, priced from the plan: `lra_hours` of its LRA training jobs, finished or not (an
    extra seed costs what one ran or is expected to), per seed of the config."""
    import pandas as pd

    planned = experiment.lra_runs(config)
    n_seeds = len({run[4] for run in planned}) or 1
    cells = {run[:4] for run in planned}
    draws = seeds.POWER_DRAWS
    print(f"\nsimulating the claims engine on {draws} tables of the planned runs (the power of the paper's "
          "claims; ±3.5 pp at most) …", flush=True)  # fmt: skip
    table, unplanned = seeds.seeds_table(pilot, n_seeds, cells, seeds.own_positions(config), effect)
    hours_per_seed = lra_hours / n_seeds if lra_hours else None
    where = (
        "at the paper's effect, or for your own variants the one assumed or the pilot's"
        if effect is None
        else f"at the paper's effect, or for your own variants at the {100 * effect:+.2f} pp you named"
    )
    print(f"\nseeds each claim of this config needs for 80 % power {where} ({n_seeds} in this config):")
    if table.empty:
        print("  none: the config runs no cell a claim compares")
    else:
        print(_power_shown(table, n_seeds).to_string(index=False))
    if unplanned:
        print(f"\n{len(unplanned)} of the paper's claims compare cells this config does not run: "
              f"{', '.join(unplanned)}")  # fmt: skip
    if table.empty:
        return
    choices = seeds.choices(table, hours_per_seed, unit=unit)
    choices[f"{unit} (training)"] = choices[f"{unit} (training)"].map(
        lambda x: "—" if pd.isna(x) else hours_text(x)
    )
    what = f"this plan's {hours_text(lra_hours)} h of LRA training / {n_seeds} seed(s)"
    print(f"\nwhat seed counts buy ({unit}: {what}):")
    print(choices.to_string(index=False))


def _power_shown(table: Any, n_seeds: int) -> Any:
    """The power table as printed: effects and spreads in accuracy units, powers in percent."""
    import pandas as pd

    def number(spec: str) -> Any:
        return lambda x: "—" if pd.isna(x) else format(x, spec)

    return table.assign(
        effect_aimed_at=table["effect_aimed_at"].map(number("+.4f")),
        sd_per_seed=table["sd_per_seed"].map(number(".4f")),
        level=table["level"].map(number(".4f")),
        **{f"power_at_{n_seeds}": table[f"power_at_{n_seeds}"].map(number(".0%"))},
        seeds_for_80=[
            ("—" if pd.isna(p) else ">200") if pd.isna(x) else f"{int(x)}"  # —: no effect to aim at
            for x, p in zip(table["seeds_for_80"], table[f"power_at_{n_seeds}"], strict=True)
        ],
        **{f"detectable_at_{n_seeds}": table[f"detectable_at_{n_seeds}"].map(number(".4f"))},
    )
