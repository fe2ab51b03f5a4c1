"""`pdelra aggregate`: the tables every number of the report comes from."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pdelra.cli import handler_of
from pdelra.runs import BASE_SETTING, run_dir
from pdelra.steps.aggregate import MetricsError, aggregate, read_run
from pdelra.steps.cli import register_aggregate


def cli_main(argv: list[str]) -> int:
    """`pdelra aggregate ...` through its own subcommand registration (as pdelra.cli does it)."""
    parser = argparse.ArgumentParser(prog="pdelra")
    register_aggregate(parser.add_subparsers(required=True))
    args = parser.parse_args(argv)
    return handler_of(args)(args)


def write_metrics(
    runs: Path,
    task: str,
    variant: str,
    scale: str,
    seed: int,
    acc: float | None,
    *,
    status: str = "completed",
    step_time: float = 0.1,
    peak_bytes: int = 100 * 2**20,
    alpha: dict[str, Any] | None = None,
    setting: str = BASE_SETTING,
    **extra: Any,
) -> Path:
    """A metrics.json shaped like the trainer's (src/pdelra/training/runner.py) at the canonical path."""
    path = run_dir(runs, task, variant, scale, setting, seed) / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    history = [{"epoch": 1, "val_accuracy": 0.5, "alpha": alpha}] if alpha else []
    metrics = {
        "task": task,
        "variant": variant,
        "scale": scale,
        "setting": setting,
        "seed": seed,
        "status": status,
        "test_accuracy": acc,
        "best_val_accuracy": None if acc is None else acc + 0.01,
        "best_epoch": 1,
        "epochs_run": 1,
        "steps_run": 10,
        "history": history,
        "median_step_time_s": step_time,
        "peak_memory_bytes": peak_bytes,
        "peak_host_memory_bytes": 3 * peak_bytes,
        "wall_time_s": 12.0,
        "resumed_count": 0,
        "config_hash": "c" * 64,
        "data_manifest_hash": "d" * 64,
        "code_version": {"package": "0.1.0", "git": "abc123"},
        "device": "cpu",
        **extra,
    }
    path.write_text(json.dumps(metrics))
    return path


def test_runs_csv_has_one_row_per_run_including_diverged(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    files = [
        write_metrics(runs, "listops", "none", "h1", 0, 0.30),
        write_metrics(runs, "listops", "none", "h1", 1, 0.34),
        write_metrics(runs, "listops", "after_embedding", "h1", 0, None, status="diverged"),
    ]
    tables = aggregate(files, tmp_path / "tables")
    written = pd.read_csv(tmp_path / "tables" / "runs.csv")
    assert len(written) == 3
    diverged = written[written["variant"] == "after_embedding"].iloc[0]
    assert diverged["status"] == "diverged" and math.isnan(diverged["test_accuracy"])
    assert written["code_version"].tolist() == ["abc123"] * 3
    assert written["peak_memory_mb"].tolist() == pytest.approx([100.0] * 3)
    assert written["peak_host_memory_mb"].tolist() == pytest.approx([300.0] * 3)  # the measured host RSS
    # The diverged run is counted in n_runs but not in the mean.
    main = tables["main"].set_index(["variant", "task"])
    assert main.loc[("after_embedding", "listops"), "n"] == 0
    assert main.loc[("after_embedding", "listops"), "n_runs"] == 1
    assert main.loc[("none", "listops"), "mean"] == pytest.approx(0.32)
    assert main.loc[("none", "listops"), "std"] == pytest.approx(pd.Series([0.30, 0.34]).std())


def test_runs_csv_names_the_paper_position_an_own_variant_occupies(tmp_path: Path) -> None:
    """own_position: the paper's position whose points a config variant's operators occupy (a key is a point
    or a position), empty for a built-in variant and for operators at points of no single position."""

    def own(variant: str, operators: dict[str, Any] | None) -> Path:
        model = {"operators": {k: {"operator": "myops:Op"} for k in operators}} if operators else {}
        return write_metrics(runs, "listops", variant, "h1", 0, 0.4, run_config={"model": model})

    runs = tmp_path / "runs"
    files = [
        own("none", None),
        own("at_point", {"embedding": None}),
        own("at_position", {"before_layernorm": None}),
        own("both_points", {"attn_input": None, "mlp_input": None}),
        own("two_places", {"embedding": None, "mlp_output": None}),
    ]
    table = aggregate(files, tmp_path / "tables")["runs"].set_index("variant")
    assert table["own_position"].fillna("").to_dict() == {
        "none": "",
        "at_point": "after_embedding",
        "at_position": "before_layernorm",
        "both_points": "before_layernorm",
        "two_places": "",
    }


def test_main_average_is_over_tasks_and_needs_every_task(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    files = []
    for seed, (a, b) in enumerate([(0.4, 0.8), (0.5, 0.6)]):
        files.append(write_metrics(runs, "listops", "none", "h1", seed, a))
        files.append(write_metrics(runs, "text", "none", "h1", seed, b))
    files.append(write_metrics(runs, "listops", "after_mlp", "h1", 0, 0.45))  # no text run: no average
    main = aggregate(files, tmp_path / "t")["main"]
    average = main[main["task"] == "average"].set_index("variant")
    assert list(average.index) == ["none"]
    assert average.loc["none", "mean"] == pytest.approx((0.45 + 0.7) / 2)
    # std over seeds of the per-seed cross-task averages (0.6 and 0.55)
    assert average.loc["none", "std"] == pytest.approx(pd.Series([0.6, 0.55]).std())


def test_multiscale_gains_over_baseline_and_best_single_scale(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    files = [write_metrics(runs, "listops", "none", "h1", 0, 0.37)]
    for scale, acc in {"h1": 0.39, "h2": 0.40, "h4": 0.38, "multi": 0.42}.items():
        files.append(write_metrics(runs, "listops", "after_embedding", scale, 0, acc))
    files.append(write_metrics(runs, "listops", "after_mlp", "h1", 0, 0.38))  # one scale only: not swept
    ms = aggregate(files, tmp_path / "t")["multiscale"]
    assert set(ms["variant"]) == {"after_embedding"}
    assert ms["scale"].tolist() == ["h1", "h2", "h4", "multi"]
    multi = ms[ms["scale"] == "multi"].iloc[0]
    assert multi["best_single_scale"] == "h2"
    assert multi["multi_gain"] == pytest.approx(0.02)
    assert multi["gain_over_baseline"] == pytest.approx(0.05)


def test_cost_overhead_is_relative_to_the_task_baseline(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    files = [
        write_metrics(runs, "listops", "none", "h1", 0, 0.3, step_time=0.10, peak_bytes=200 * 2**20),
        write_metrics(runs, "listops", "after_mlp", "h1", 0, 0.3, step_time=0.112, peak_bytes=210 * 2**20),
    ]
    cost = aggregate(files, tmp_path / "t")["cost"].set_index("variant")
    assert cost.loc["after_mlp", "time_overhead_pct"] == pytest.approx(12.0)
    assert cost.loc["after_mlp", "memory_overhead_pct"] == pytest.approx(5.0)
    assert cost.loc["none", "time_overhead_pct"] == pytest.approx(0.0)


def test_learned_alpha_comes_from_the_best_epoch(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    alpha = {
        "embed": {"mean": 0.12, "min": 0.05, "max": 0.2},
        "block0": {"mean": 0.08, "min": 0.01, "max": 0.1},
    }
    files = [write_metrics(runs, "listops", "after_embedding", "h1", 0, 0.4, alpha=alpha)]
    tables = aggregate(files, tmp_path / "t")
    row = tables["runs"].iloc[0]
    assert (row["alpha_mean"], row["alpha_min"], row["alpha_max"]) == pytest.approx((0.10, 0.01, 0.2))
    assert sorted(tables["alpha"]["layer"]) == ["block0", "embed"]


def test_a_file_at_the_wrong_place_is_refused(tmp_path: Path) -> None:
    path = write_metrics(tmp_path / "runs", "listops", "none", "h1", 0, 0.3)
    for wrong in (("text", "none", "h1", "base"), ("listops", "none", "h1", "steps2")):
        moved = run_dir(tmp_path / "runs", *wrong, 0) / "metrics.json"
        moved.parent.mkdir(parents=True)
        path.rename(moved)
        with pytest.raises(MetricsError, match="/".join(wrong) + r"/seed0/metrics.json.*does not match"):
            read_run(moved)
        path = moved


def test_settings_are_grouped_apart_and_main_uses_the_base_setting(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    files = [
        write_metrics(runs, "listops", "none", "h1", 0, 0.30, step_time=0.10),
        write_metrics(runs, "listops", "cta_wave", "h1", 0, 0.40, setting="steps1", step_time=0.11),
        write_metrics(runs, "listops", "cta_wave", "h1", 1, 0.44, setting="steps1", step_time=0.11),
        write_metrics(runs, "listops", "cta_wave", "h1", 0, 0.50, setting="steps4", step_time=0.15),
    ]
    tables = aggregate(files, tmp_path / "t")
    assert list(tables["runs"].columns[:5]) == ["task", "variant", "scale", "setting", "seed"]
    assert set(tables["main"]["variant"]) == {"none"}  # non-base settings are ablations, not Table 10
    settings = tables["settings"].set_index(["variant", "setting"])
    assert settings.loc[("cta_wave", "steps1"), "mean"] == pytest.approx(0.42)
    assert settings.loc[("cta_wave", "steps1"), "n"] == 2
    assert settings.loc[("cta_wave", "steps4"), "mean"] == pytest.approx(0.50)
    cost = tables["cost"].set_index(["variant", "setting"])
    assert cost.loc[("cta_wave", "steps4"), "time_overhead_pct"] == pytest.approx(50.0)
    assert cost.loc[("cta_wave", "steps1"), "time_overhead_pct"] == pytest.approx(10.0)
    assert set(tables["alpha"].columns) >= {"setting"}


def test_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    path = run_dir(tmp_path / "runs", "listops", "none", "h1", BASE_SETTING, 0) / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text('{\n  "task": "listops",\n  oops\n}')
    with pytest.raises(MetricsError, match=r"metrics.json: line 3"):
        read_run(path)


def test_cli_scans_a_runs_folder_and_reports_errors_by_exit_status(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_metrics(runs, "image", "none", "h1", 0, 0.4)
    write_metrics(runs, "image", "in_attention", "h1", 0, 0.41)
    assert cli_main(["aggregate", "--runs", str(runs), "--out", str(tmp_path / "tables")]) == 0
    for name in ("runs", "main", "multiscale", "cost", "alpha", "settings"):
        assert (tmp_path / "tables" / f"{name}.csv").is_file()
    assert len(pd.read_csv(tmp_path / "tables" / "runs.csv")) == 2
    assert cli_main(["aggregate", "--runs", str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 1
    assert not (tmp_path / "x").exists()


def test_runs_csv_echoes_the_run_config_and_alpha_csv_the_alpha_per_scale(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    config = {
        "model": {
            "d_model": 64,
            "n_layers": 2,
            "n_heads": 4,
            "alpha_init": 0.2,
            "stencil_scaling": "inverse_h2",
        },
        "train": {"batch_size": 32, "lr": 0.003, "max_epochs": 3, "warmup_steps": 50, "weight_decay": 1e-5},
    }
    alpha = {
        "embed": {"mean": 0.1, "min": 0.03, "max": 0.2, "per_scale": [0.2, 0.06, 0.04], "scales": [1, 2, 4]},
        "heads": {"mean": 0.05, "min": 0.05, "max": 0.05, "per_scale": [0.05], "scales": [1]},
    }
    files = [
        write_metrics(runs, "listops", "after_embedding", "multi", 0, 0.4, alpha=alpha, run_config=config,
                      steps_per_epoch=10, planned_steps=30),
        write_metrics(runs, "listops", "none", "h1", 0, 0.4),  # written before the config echo: empty
    ]  # fmt: skip
    aggregate(files, tmp_path / "t")
    written = pd.read_csv(tmp_path / "t" / "runs.csv").set_index("variant")
    row = written.loc["after_embedding"]
    assert (row["d_model"], row["n_layers"], row["n_heads"], row["batch_size"]) == (64, 2, 4, 32)
    assert (row["alpha_init"], row["lr"], row["weight_decay"]) == pytest.approx((0.2, 0.003, 1e-5))
    assert row["stencil_scaling"] == "inverse_h2" and pd.isna(row["multiscale_init"])
    assert (row["steps_per_epoch"], row["planned_steps"], row["warmup_steps"]) == (10, 30, 50)
    assert written.loc["none", ["d_model", "alpha_init", "planned_steps"]].isna().all()
    per_layer = pd.read_csv(tmp_path / "t" / "alpha.csv").set_index("layer")
    assert per_layer.loc["embed", ["per_scale_h1", "per_scale_h2", "per_scale_h4"]].tolist() == pytest.approx(
        [0.2, 0.06, 0.04]
    )
    assert per_layer.loc["heads", "per_scale_h1"] == pytest.approx(0.05)
    assert per_layer.loc["heads", ["per_scale_h2", "per_scale_h4"]].isna().all()
