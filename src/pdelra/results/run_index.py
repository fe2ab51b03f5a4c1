"""The runs, indexed once for judging claims (`pdelra.results.claims`): each cell's per-seed values, the
failed runs (diverged, or at chance), each grid's variance model (`pdelra.results.design`)."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pdelra import paper
from pdelra.errors import UserError
from pdelra.results.claim_types import (
    ACCURACY,
    CHANCE_ACCURACY,
    DESIGN_VARIANTS,
    FAILURE_Z,
    Cell,
    Cells,
    Metric,
    Pooled,
)
from pdelra.results.design import (
    FEW_DF,
    GRIDS,
    CellKey,
    GridNoise,
    assume,
    binomial_floor,
    grid_noise,
    resolution_floor,
)
from pdelra.runs import BASE_SETTING, BASELINE, COMPLETED, DIVERGED, MAIN_SCALE

if TYPE_CHECKING:
    import pandas as pd


# ----------------------------------------------------------------------------------------------------
# The runs, indexed once
# ----------------------------------------------------------------------------------------------------
class ClaimsInputError(UserError, ValueError):
    """A runs table the claims cannot be judged on; the message names the rows."""


@dataclass
class SeedValues:
    """Per-seed values of one cell (or pooled cells) on the metric's tasks: `values` (seed → value) for
    seeds usable on every task, `missing` (what has no run at all), `excluded` (runs that exist but count
    nowhere), `notes` (what a reader must know: missing seeds), the `devices` the runs ran on, `failed`
    (seed → why, for the runs that diverged or sit at chance: left out of `values`) and `seeds` (its runs)."""

    values: dict[int, float]
    missing: list[str]
    excluded: int
    notes: list[str] = field(default_factory=list)
    devices: set[str] = field(default_factory=set)
    epoch_budgets: set[int] = field(default_factory=set)  # runs.csv's max_epochs of the runs used
    failed: dict[int, str] = field(default_factory=dict)
    seeds: int = 0  # runs of the cell with a seed, whatever became of them


# What a failed run is called: a diverged run, and a completed one whose accuracy a test on its test set
# cannot tell from chance (not "failed to learn": a run at 52 % on 2,000 examples may have learned a little).
DIVERGED_WORD = "diverged"
AT_CHANCE_WORD = "not distinguishable from chance"


def at_chance(accuracy: float, task: str, n_test: float) -> bool:
    """A completed run not distinguishable from chance: its test accuracy at or below the upper end of the
    95 % binomial interval around 1 / classes on its test set (unknown without n_test: then never)."""
    if task not in CHANCE_ACCURACY or _isnan(n_test) or n_test <= 0:
        return False
    p0 = CHANCE_ACCURACY[task]
    return accuracy <= p0 + FAILURE_Z * math.sqrt(p0 * (1 - p0) / n_test)


class RunIndex:
    """The runs table indexed once by (task, variant, scale, setting): every claim reads cells from here.

    Refused: two rows of one run (task, variant, scale, setting, seed). Left out with a note: rows without
    a seed. A run that failed — diverged, or completed at chance (`at_chance`) — is a finding, not
    noise: it is left out of its cell's values and named in the notes; a view that counts the failed runs of
    chosen cells (`counting`: a diverged run at chance accuracy) is how a claim reads a failure against its
    cell (`pdelra.results.judge`); other metrics leave a diverged run out (its step time and loss mean
    nothing)."""

    def __init__(self, runs: pd.DataFrame | None):
        self._rows: dict[tuple[str, str, str, str], list[tuple[int, str, dict[str, Any]]]] = {}
        self.notes: dict[tuple[str, str, str, str], list[str]] = {}
        self._n_test: dict[str, float] = {}
        self._noise: dict[tuple[str, str, str], GridNoise] = {}
        self._assumed: dict[str, float] = {}
        self._cells: dict[tuple[Cell, str, str], SeedValues | None] = {}
        self._seeds: dict[tuple[Cells, Metric], SeedValues] = {}  # seed_values' answers, by (cells, metric)
        # (task, cell) whose failed runs this view counts (`counting`), at chance accuracy when diverged
        self.counted: frozenset[tuple[str, Cell]] = frozenset()
        self._views: dict[frozenset[tuple[str, Cell]], RunIndex] = {}
        self._accuracy: dict[str, float] = {}  # task → mean test accuracy of its runs (the binomial guard)
        self._multiscale: dict[str, set[str]] = {}  # task → the positions it ran at several scales
        if runs is None or not len(runs):
            return
        records = runs.to_dict("records")
        seen: set[tuple[str, str, str, str, int]] = set()
        twice: list[str] = []
        n_test: dict[str, list[float]] = {}
        # every row's accuracy, seed or not: the task's level, for the binomial guard (`floor`)
        accuracy: dict[str, list[float]] = {}
        for record in records:
            if not _isnan(record.get(ACCURACY)):
                accuracy.setdefault(str(record["task"]), []).append(float(record[ACCURACY]))
            key = (
                str(record["task"]),
                str(record["variant"]),
                str(record["scale"]),
                str(record.get("setting", BASE_SETTING)),
            )
            if _isnan(record.get("seed")):
                self.notes.setdefault(key, []).append("a run without a seed left out")
                continue
            seed = int(record["seed"])
            if (*key, seed) in seen:
                twice.append("/".join(key) + f"/seed{seed}")
            seen.add((*key, seed))
            self._rows.setdefault(key, []).append((seed, str(record["status"]), record))
            if not _isnan(record.get("n_test")):
                n_test.setdefault(key[0], []).append(float(record["n_test"]))
        if twice:
            raise ClaimsInputError(
                f"the runs table lists {len(twice)} run(s) more than once: {', '.join(twice[:5])}"
                + (" …" if len(twice) > 5 else "")
                + "; each (task, variant, scale, setting, seed) must appear once (aggregate refuses them too)"
            )
        self._n_test = {task: float(np.median(v)) for task, v in n_test.items()}
        self._accuracy = {task: float(np.mean(v)) for task, v in accuracy.items()}
        for task, variant, scale, setting in self._rows:
            if setting == BASE_SETTING and scale != MAIN_SCALE and variant in DESIGN_VARIANTS:
                self._multiscale.setdefault(task, set()).add(variant)

    def counting(self, cells: frozenset[tuple[str, Cell]]) -> RunIndex:
        """The same runs, with the failed runs of `cells` ((task, cell) pairs) counted (a diverged one at
        chance accuracy) and every other failure set aside: a reading in which a failure counts against its
        cell (`pdelra.results.judge`). One view per set of cells, made once."""
        if not cells:
            return self
        if cells not in self._views:
            other = copy.copy(self)
            other.counted, other._cells, other._noise, other._views, other._seeds = cells, {}, {}, {}, {}
            self._views[cells] = other
        return self._views[cells]

    def run_keys(self) -> list[tuple[str, str, str, str]]:
        """Every (task, variant, scale, setting) with a run, in the runs table's order."""
        return list(self._rows)

    def names(self) -> tuple[set[str], set[str]]:
        """(tasks, variants) that have runs."""
        return {k[0] for k in self._rows}, {k[1] for k in self._rows}

    def cell(self, cell: Cell, task: str, column: str) -> SeedValues | None:
        """The cell's runs on one task (see `SeedValues`), or None when the cell has no run; read once (a
        claims table reads each cell for many comparisons)."""
        key = (cell, task, column)
        if key not in self._cells:
            self._cells[key] = self._read_cell(cell, task, column)
        return self._cells[key]

    def _read_cell(self, cell: Cell, task: str, column: str) -> SeedValues | None:
        key = (task, cell.variant, cell.scale, cell.setting)
        rows = self._rows.get(key)
        if not rows:
            return None
        values: dict[int, float] = {}
        failed: dict[int, str] = {}
        accuracy = column == ACCURACY and task in CHANCE_ACCURACY
        counted = (task, cell) in self.counted
        n_test = self._n_test.get(task, math.nan)
        for seed, status, record in rows:
            value = record.get(column)
            if status == COMPLETED and not _isnan(value):
                if accuracy and at_chance(float(value), task, record.get("n_test", n_test)):
                    failed[seed] = AT_CHANCE_WORD
                    if counted:
                        values[seed] = float(value)
                else:
                    values[seed] = float(value)
            elif status == DIVERGED and accuracy:
                failed[seed] = DIVERGED_WORD
                if counted:
                    values[seed] = CHANCE_ACCURACY[task]
        notes = list(self.notes.get(key, []))  # (failed runs: the claims' `failed_runs`, not a note)
        used = [r for s, _, r in rows if s in values]
        devices = {str(r.get("device")) for r in used if not _isnan_or_none(r.get("device"))}
        budgets = {int(r["max_epochs"]) for r in used if not _isnan(r.get("max_epochs"))}
        excluded = sum(1 for s, _, _ in rows if s not in values and s not in failed)
        return SeedValues(values, [], excluded, notes, devices, budgets, failed, len(rows))

    def grid(self, task: str, keys: set[CellKey]) -> str | None:
        """The grid of `task` that holds every cell of `keys` (`pdelra.results.design`): "main" (the baseline
        and the seven positions at h1, and beside them every other variant at h1: a config's own, a related
        system's), "scale" (the positions run at several scales, at every scale), or None."""
        return next(
            (g for g in GRIDS if all(self._in_grid(task, k, g) or self._beside(k, g) for k in keys)), None
        )

    def _in_grid(self, task: str, key: CellKey, grid: str) -> bool:
        variant, scale, setting = key
        if setting != BASE_SETTING or variant not in DESIGN_VARIANTS:
            return False
        return scale == MAIN_SCALE if grid == "main" else variant in self._multiscale.get(task, set())

    @staticmethod
    def _beside(key: CellKey, grid: str) -> bool:
        """A cell measured beside the main grid (`pdelra.results.design`, "cells beside the grid")."""
        variant, scale, setting = key
        main = grid == "main" and setting == BASE_SETTING and scale == MAIN_SCALE
        return main and variant not in DESIGN_VARIANTS

    def noise(self, task: str, grid: str, column: str) -> GridNoise:
        """The per-cell noise of one grid of one task (`pdelra.results.design`), computed once: each cell's
        variance against the grid's other cells, over its usable (learned) runs; the baseline keeps its own.
        Cells beside the main grid (a config's own variant, a related system's) are measured against its
        cells and borrow from its prior, entering neither, so that adding them changes no verdict of the
        paper's claims."""
        if (task, grid, column) not in self._noise:
            cells: dict[CellKey, dict[int, float]] = {}
            beside: dict[CellKey, dict[int, float]] = {}
            for where, variant, scale, setting in self._rows:
                key = (variant, scale, setting)
                if where != task or not (self._in_grid(task, key, grid) or self._beside(key, grid)):
                    continue
                found = self.cell(Cell(*key), task, column)
                if found is not None and found.values:
                    (cells if self._in_grid(task, key, grid) else beside)[key] = found.values
            baseline = frozenset({(BASELINE, MAIN_SCALE, BASE_SETTING)})
            noise = grid_noise(cells, self._n_test.get(task, math.nan), baseline, beside)
            if task in self._assumed:
                noise = assume(noise, self._assumed[task], baseline)
            self._noise[(task, grid, column)] = noise
        return self._noise[(task, grid, column)]

    def assume_noise(self, variances: Mapping[str, float]) -> None:
        """Assume each task's run-to-run variance (every cell alike) instead of measuring it, over the same
        cells and seeds, for planning seeds before any run (`pdelra.results.seeds`). Each cell's assumed
        variance carries its reference's share, 1 / (reference cells), as the measured one does."""
        self._assumed = dict(variances)
        self._noise = {}

    def floor(self, task: str, column: str, df: int) -> float:
        """The smallest variance one run's value on this task can be given, for a spread on `df` degrees of
        freedom (`pdelra.results.design`, "A floor"): for accuracy, the resolution of its test set, and on
        fewer than `FEW_DF` df the binomial variance; else 0."""
        if column != ACCURACY:
            return 0.0
        n_test = self._n_test.get(task, math.nan)
        if df < FEW_DF:
            return binomial_floor(self._accuracy.get(task, math.nan), n_test)
        return resolution_floor(n_test)


def failure_note(cell: Cell, task: str, failed: Mapping[int, str], runs: int) -> str:
    """'After MLP on PathFinder: diverged in 1 of 5 seeds (seed 0); not distinguishable from chance in 2 of 5
    seeds (seeds 3, 4)': how a cell's failed runs are named wherever they are."""
    return f"{cell.label()} on {paper.TASK_LABELS.get(task, task)}: {failure_words(failed, runs)}"


def failure_words(failed: Mapping[int, str], runs: int) -> str:
    """'diverged in 1 of 5 seeds (seed 0); …': a cell's failed runs on one task, without the cell."""
    parts = []
    for why in (DIVERGED_WORD, AT_CHANCE_WORD):
        seeds = sorted(s for s, w in failed.items() if w == why)
        if seeds:
            which = f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
            parts.append(f"{why} in {len(seeds)} of {runs} seeds ({which})")
    return "; ".join(parts)


def _isnan(value: Any) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def _isnan_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def seed_values(index: RunIndex, cells: Cells, metric: Metric) -> SeedValues:
    """The per-seed value of a cell (or pooled cells), averaged over the metric's tasks; only seeds usable
    on every task (and every pooled cell). Seeds that some part lacks are named in the notes. Computed once
    per index (a claims table asks for each some four times; callers do not change it)."""
    key = (cells, metric)
    if key not in index._seeds:
        index._seeds[key] = _seed_values(index, cells, metric)
    return index._seeds[key]


def _seed_values(index: RunIndex, cells: Cells, metric: Metric) -> SeedValues:
    parts = cells.cells if isinstance(cells, Pooled) else (cells,)
    per_part: list[tuple[str, dict[int, float], set[int]]] = []
    missing: list[str] = []
    notes: list[str] = []
    devices: set[str] = set()
    budgets: set[int] = set()
    excluded = 0
    for cell in parts:
        for task in metric.tasks:
            where = f"{cell.label()} on {paper.TASK_LABELS.get(task, task)}"
            found = index.cell(cell, task, metric.column)
            if found is None:
                missing.append(where)
                continue
            values = found.values
            excluded += found.excluded
            notes += found.notes
            devices |= found.devices
            budgets |= found.epoch_budgets
            if metric.overhead_vs is not None:
                ref = index.cell(metric.overhead_vs, task, metric.column)
                if ref is None:
                    missing.append(f"{metric.overhead_vs.label()} on {paper.TASK_LABELS.get(task, task)}")
                    continue
                devices |= ref.devices
                values = {
                    s: 100.0 * (x / ref.values[s] - 1.0)
                    for s, x in values.items()
                    if ref.values.get(s, 0) > 0
                }
            per_part.append((where, values, set(found.failed)))
    if missing or not per_part:
        return SeedValues({}, missing, excluded, notes, devices, budgets)
    every = set.union(*(set(v) for _, v, _ in per_part))
    seeds = set.intersection(*(set(v) for _, v, _ in per_part))
    failed = set.union(*(f for _, _, f in per_part))
    for where, v, f in per_part:  # a failed seed is no missing one: `failed_runs` names it
        if lacking := sorted(every - set(v) - f):
            notes.append(f"{where} lacks seed(s) {', '.join(map(str, lacking))}")
    values = {s: sum(v[s] for _, v, _ in per_part) / len(per_part) for s in sorted(seeds)}
    return SeedValues(values, [], excluded, notes, devices, budgets, dict.fromkeys(sorted(failed), "failed"))
