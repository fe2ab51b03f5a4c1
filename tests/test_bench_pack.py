"""`pdelra bench pack` (several training processes on one GPU): its figures from the processes' answers."""

from __future__ import annotations

import pytest

from pdelra.bench import pack


def test_runs_per_hour_add_up_the_processes_of_a_pack() -> None:
    # Two processes side by side: 100 steps in 10 s and 60 steps in 12 s = 15 steps/s together; one run of
    # 18,750 steps (96,000 / 256 × 50 epochs) then takes 1,250 s: 2.88 runs an hour.
    answers = [
        {"rank": 0, "steps": 100, "seconds": 10.0, "step_s": 0.1, "peak_bytes": 2 * 2**30},
        {"rank": 1, "steps": 60, "seconds": 12.0, "step_s": 0.2, "peak_bytes": 3 * 2**30},
    ]
    row = pack.summarise(2, answers, steps_per_run=18_750)
    assert row["steps_per_s"] == pytest.approx(15.0)
    assert row["runs_per_hour"] == pytest.approx(2.88)
    assert row["peak_gib"] == pytest.approx(3.0)


def test_a_failed_process_fails_its_pack_with_its_reason() -> None:
    answers = [{"rank": 0, "steps": 10, "seconds": 1.0, "step_s": 0.1, "peak_bytes": None},
               {"rank": 1, "error": "OutOfMemoryError: CUDA out of memory"}]  # fmt: skip
    assert pack.summarise(2, answers, steps_per_run=100) == {
        "k": 2,
        "error": "OutOfMemoryError: CUDA out of memory",
    }


def test_bench_help_gives_each_benchmark_its_whole_summary(capsys: pytest.CaptureFixture[str]) -> None:
    from pdelra.bench.cli import BENCHMARKS
    from pdelra.cli import main

    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for name, (_, description, _) in BENCHMARKS.items():
        summary = " ".join(description.strip().split("\n\n")[0].split())
        assert summary in shown, f"`pdelra bench --help` cuts {name}'s summary short"
