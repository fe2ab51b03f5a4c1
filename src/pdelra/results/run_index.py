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
from pdelra.results.design import GRIDS, CellKey, GridNoise, assume, grid_noise
from pdelra.runs import BASE_SETTING, COMPLETED, DIVERGED, MAIN_SCALE

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
    nowhere), `notes` (what a reader must know: failed runs, missing seeds), the `devices` the runs ran on and
    `failed` (seed → why, for the runs that diverged or failed to learn: left out of `values`)."""

    values: dict[int, float]
    missing: list[str]
    excluded: int
    notes: list[str] = field(default_factory=list)
    devices: set[str] = field(default_factory=set)
    epoch_budgets: set[int] = field(default_factory=set)  # runs.csv's max_epochs of the runs used
    failed: dict[int, str] = field(default_factory=dict)


def failed_to_learn(accuracy: float, task: str, n_test: float) -> bool:
    """A completed run that sits at chance: its test accuracy at or below the upper end of the 95 % binomial
    interval around 1 / classes on its test set (unknown without n_test: then never)."""
    if task not in CHANCE_ACCURACY or _isnan(n_test) or n_test <= 0:
        return False
    p0 = CHANCE_ACCURACY[task]
    return accuracy <= p0 + FAILURE_Z * math.sqrt(p0 * (1 - p0) / n_test)


class RunIndex:
    """The runs table indexed once by (task, variant, scale, setting): every claim reads cells from here.

    Refused: two rows of one run (task, variant, scale, setting, seed). Left out with a note: rows without
    a seed. A run that failed — diverged, or completed at chance (`failed_to_learn`) — is a finding, not
    noise: it is left out of its cell's values and named in the notes, and the accuracy claims of its cell
    are judged with and without it (`judge`); other metrics leave a diverged run out (its step time and loss
    mean nothing)."""

    def __init__(self, runs: pd.DataFrame | None):
        self._rows: dict[tuple[str, str, str, str], list[tuple[int, str, dict[str, Any]]]] = {}
        self.notes: dict[tuple[str, str, str, str], list[str]] = {}
        self._n_test: dict[str, float] = {}
        self._noise: dict[tuple[str, str, str], GridNoise] = {}
        self._assumed: dict[str, float] = {}
        self._cells: dict[tuple[Cell, str, str], SeedValues | None] = {}
        self.failures = False  # `with_failures()`: failed runs counted (at chance when diverged)
        self._multiscale: dict[str, set[str]] = {}  # task → the positions it ran at several scales
        if runs is None or not len(runs):
            return
        records = runs.to_dict("records")
        seen: set[tuple[str, str, str, str, int]] = set()
        twice: list[str] = []
        n_test: dict[str, list[float]] = {}
        for record in records:
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
        for task, variant, scale, setting in self._rows:
            if setting == BASE_SETTING and scale != MAIN_SCALE and variant in DESIGN_VARIANTS:
                self._multiscale.setdefault(task, set()).add(variant)

    def with_failures(self) -> RunIndex:
        """The same runs, with every failed run counted (a diverged one at chance accuracy): the view in which
        a claim involving a failed cell is judged a second time."""
        other = copy.copy(self)
        other.failures, other._cells, other._noise = True, {}, {}
        return other

    def names(self) -> tuple[set[str], set[str]]:
        """(tasks, variants) that have runs."""
        return {k[0] for k in self._rows}, {k[1] for k in self._rows}

    def cell(self, cell: Cell, task: str, column: str) -> SeedValues | None:
        """The cell's runs on one task (see `SeedValues`), or None when the cell has no run; read once (a
        claims table reads each cell for many comparisons)."""
        if (cell, task, column) not in self._cells:
            self._cells[(cell, task, column)] = self._read_cell(cell, task, column)
        return self._cells[(cell, task, column)]

    def _read_cell(self, cell: Cell, task: str, column: str) -> SeedValues | None:
        key = (task, cell.variant, cell.scale, cell.setting)
        rows = self._rows.get(key)
        if not rows:
            return None
        values: dict[int, float] = {}
        failed: dict[int, str] = {}
        accuracy = column == ACCURACY and task in CHANCE_ACCURACY
        n_test = self._n_test.get(task, math.nan)
        for seed, status, record in rows:
            value = record.get(column)
            if status == COMPLETED and not _isnan(value):
                if accuracy and failed_to_learn(float(value), task, record.get("n_test", n_test)):
                    failed[seed] = "failed to learn"
                    if self.failures:
                        values[seed] = float(value)
                else:
                    values[seed] = float(value)
            elif status == DIVERGED and accuracy:
                failed[seed] = "diverged"
                if self.failures:
                    values[seed] = CHANCE_ACCURACY[task]
        notes = list(self.notes.get(key, []))
        if failed:
            where = f"{cell.label()} on {paper.TASK_LABELS.get(task, task)}"
            for why in ("diverged", "failed to learn"):
                if n := sum(w == why for w in failed.values()):
                    notes.append(f"{where}: {why} in {n} of {len(rows)} seeds")  # (FAILED_NOTE reads it)
        used = [r for s, _, r in rows if s in values]
        devices = {str(r.get("device")) for r in used if not _isnan_or_none(r.get("device"))}
        budgets = {int(r["max_epochs"]) for r in used if not _isnan(r.get("max_epochs"))}
        excluded = sum(1 for s, _, _ in rows if s not in values and s not in failed)
        return SeedValues(values, [], excluded, notes, devices, budgets, failed)

    def grid(self, task: str, keys: set[CellKey]) -> str | None:
        """The grid of `task` that holds every cell of `keys` (`pdelra.results.design`): "main" (the baseline
        and the seven positions at h1), "scale" (the positions run at several scales, at every scale), or
        None."""
        return next((g for g in GRIDS if all(self._in_grid(task, k, g) for k in keys)), None)

    def _in_grid(self, task: str, key: CellKey, grid: str) -> bool:
        variant, scale, setting = key
        if setting != BASE_SETTING or variant not in DESIGN_VARIANTS:
            return False
        return scale == MAIN_SCALE if grid == "main" else variant in self._multiscale.get(task, set())

    def noise(self, task: str, grid: str, column: str) -> GridNoise:
        """The per-cell noise of one grid of one task (`pdelra.results.design`), computed once: each cell's
        variance against the grid's other cells, over its usable (learned) runs. Cells outside the grids (a
        related system's, a config's own variant) are compared by their own paired tests, so that adding
        them changes no verdict of the paper's claims."""
        if (task, grid, column) not in self._noise:
            cells: dict[CellKey, dict[int, float]] = {}
            for where, variant, scale, setting in self._rows:
                key = (variant, scale, setting)
                if where != task or not self._in_grid(task, key, grid):
                    continue
                found = self.cell(Cell(*key), task, column)
                if found is not None and found.values:
                    cells[key] = found.values
            noise = grid_noise(cells, self._n_test.get(task, math.nan))
            if task in self._assumed:
                noise = assume(noise, self._assumed[task])
            self._noise[(task, grid, column)] = noise
        return self._noise[(task, grid, column)]

    def assume_noise(self, variances: Mapping[str, float]) -> None:
        """Assume each task's run-to-run variance (every cell alike) instead of measuring it, over the same
        cells and seeds, for planning seeds before any run (`pdelra.results.seeds`). Each cell's assumed
        variance carries its reference's share, 1 / (reference cells), as the measured one does."""
        self._assumed = dict(variances)
        self._noise = {}

    def floor(self, task: str, column: str) -> float:
        """The smallest variance of one run's value on this task (binomial, for accuracy; else 0)."""
        return self.noise(task, "main", column).floor if column == ACCURACY else 0.0


def _isnan(value: Any) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def _isnan_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def seed_values(index: RunIndex, cells: Cells, metric: Metric) -> SeedValues:
    """The per-seed value of a cell (or pooled cells), averaged over the metric's tasks; only seeds usable
    on every task (and every pooled cell). Seeds that some part lacks are named in the notes."""
    parts = cells.cells if isinstance(cells, Pooled) else (cells,)
    per_part: list[tuple[str, dict[int, float]]] = []
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
            per_part.append((where, values))
    if missing or not per_part:
        return SeedValues({}, missing, excluded, notes, devices, budgets)
    every = set.union(*(set(v) for _, v in per_part))
    seeds = set.intersection(*(set(v) for _, v in per_part))
    for where, v in per_part:
        if lacking := sorted(every - set(v)):
            notes.append(f"{where} lacks seed(s) {', '.join(map(str, lacking))}")
    values = {s: sum(v[s] for _, v in per_part) / len(per_part) for s in sorted(seeds)}
    return SeedValues(values, [], excluded, notes, devices, budgets)
