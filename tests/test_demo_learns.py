"""The CPU demo (`make demo`, config/demo.yaml) shows what a finished study gives: every headline claim of its
landing page has a number of ours (n >= 1),
and every task's baseline learns, its test accuracy above chance by at least two binomial standard deviations
of its own test set: 1/classes + 2·sqrt(p(1 − p)/n_test), p the chance accuracy.

The demo's trained workspace is the repository's own `results/demo` (what `make demo` writes; `make demo` runs
this module after its DAG): training a second copy here would add minutes to `make test`. Without it the slow
test skips and says so; the check itself is tested on constructed tables below, so it can fail."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from pdelra import tasks
from pdelra.results.claim_types import FAMILIES

REPO = Path(__file__).resolve().parents[1]
DEMO_TABLES = REPO / "results" / "demo" / "tables"
DEMO_CONFIG = REPO / "config" / "demo.yaml"
BASELINE = {"variant": "none", "scale": "h1", "setting": "base"}  # grid `main`'s baseline runs
Tables = tuple[pd.DataFrame, pd.DataFrame]  # claims.csv, runs.csv


def learning_floor(task: str, n_test: int) -> float:
    """Chance plus two binomial standard deviations of a chance guess on `n_test` examples."""
    p = tasks.TASKS[task].chance
    return p + 2 * math.sqrt(p * (1 - p) / n_test)


def baseline_problems(runs: pd.DataFrame, task_names: list[str]) -> list[str]:
    """One line per task whose baseline run is missing or does not clear `learning_floor`."""
    base = runs[(runs[list(BASELINE)] == pd.Series(BASELINE)).all(axis=1)]
    problems = []
    for task in task_names:
        rows = base[base["task"] == task]
        if rows.empty:
            problems.append(f"{task}: no baseline run")
        for row in rows.itertuples():
            floor = learning_floor(task, int(row.n_test))
            if not row.test_accuracy >= floor:
                problems.append(f"{task} seed {row.seed}: test accuracy {row.test_accuracy:.3f} < "
                                f"{floor:.3f} (chance + 2 sd of n_test = {row.n_test})")  # fmt: skip
    return problems


def headline_problems(claims: pd.DataFrame) -> list[str]:
    """One line per headline claim (the families the landing page shows one by one) that no run of ours
    reached (n = 0), or that has no number of ours (every kind gives one at a single seed)."""
    headline = claims[claims["family"].map(lambda f: FAMILIES[f].headline if f in FAMILIES else False)]
    if headline.empty:
        return ["no headline claim at all"]
    return [f"{row.claim_id}: n = {row.n}, effect {row.effect}" for row in headline.itertuples()
            if not (row.n >= 1 and pd.notna(row.effect))]  # fmt: skip


@pytest.fixture(scope="module")
def demo_tables() -> Tables:
    claims, runs = DEMO_TABLES / "claims.csv", DEMO_TABLES / "runs.csv"
    if not (claims.is_file() and runs.is_file()):
        pytest.skip("no results/demo/tables: run `make demo` first (it runs this check after its DAG)")
    if min(claims.stat().st_mtime, runs.stat().st_mtime) < DEMO_CONFIG.stat().st_mtime:
        pytest.fail("results/demo/tables are older than config/demo.yaml: run `make demo` again")
    return pd.read_csv(claims), pd.read_csv(runs)


@pytest.mark.slow
def test_every_demo_task_baseline_learns(demo_tables: Tables) -> None:
    _, runs = demo_tables
    main_tasks = sorted(set(runs["task"]) & set(tasks.TASKS))
    assert len(main_tasks) == 5, f"the demo's runs cover {main_tasks}, not the five LRA tasks"
    assert baseline_problems(runs, main_tasks) == []


@pytest.mark.slow
def test_every_headline_claim_of_the_demo_has_our_number(demo_tables: Tables) -> None:
    claims, _ = demo_tables
    assert headline_problems(claims) == []


def test_the_checks_catch_a_baseline_at_chance_and_a_claim_without_a_number() -> None:
    runs = pd.DataFrame([
        {**BASELINE, "task": "text", "seed": 0, "test_accuracy": 0.60, "n_test": 100},  # floor 0.5 + 0.1
        {**BASELINE, "task": "listops", "seed": 0, "test_accuracy": 0.17, "n_test": 100},  # floor 0.16
        {**BASELINE, "task": "image", "seed": 0, "test_accuracy": 0.15, "n_test": 100},
        {**BASELINE, "setting": "official", "task": "retrieval", "seed": 0, "test_accuracy": 1, "n_test": 9},
    ])  # fmt: skip
    assert learning_floor("text", 100) == pytest.approx(0.6)
    assert baseline_problems(runs, ["text", "listops", "image", "retrieval"]) == [
        "image seed 0: test accuracy 0.150 < 0.160 (chance + 2 sd of n_test = 100)",
        "retrieval: no baseline run",
    ]
    nan = float("nan")
    claims = pd.DataFrame([
        {"claim_id": "a", "family": "primary", "kind": "difference", "n": 1, "effect": 0.01},
        {"claim_id": "b", "family": "ranking", "kind": "best", "n": 0, "effect": nan},
        {"claim_id": "c", "family": "table11", "kind": "difference", "n": 0, "effect": nan},  # not a headline
        {"claim_id": "d", "family": "multiscale", "kind": "best", "n": 1, "effect": nan},
        {"claim_id": "e", "family": "ranking", "kind": "pair order", "n": 1, "effect": nan},
        {"claim_id": "f", "family": "ranking", "kind": "pair order", "n": 0, "effect": nan},
    ])  # fmt: skip
    problems = [f"{c}: n = {n}, effect nan" for c, n in (("b", 0), ("d", 1), ("e", 1), ("f", 0))]
    assert headline_problems(claims) == problems
