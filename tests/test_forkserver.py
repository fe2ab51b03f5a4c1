"""`pdelra forkserver run -- CMD`: commands forked from one torch-loaded server behave like processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import tool_env

pytestmark = pytest.mark.slow

TIMING = {
    "wall_time_s",
    "median_step_time_s",
    "peak_memory_bytes",
    "peak_host_memory_bytes",  # a forked child shares the server's pages: a measurement, not the run's result
    "resumed_count",
    "code_version",
}


def run_config(epochs: int, **train: object) -> str:
    return json.dumps(
        {
            "task": "listops", "variant": "after_embedding", "scale": "h1", "setting": "base", "seed": 0,
            "model": {"d_model": 16, "n_layers": 2, "n_heads": 2, "d_mlp": 32, "dropout": 0.1,
                      "attn_dropout": 0.0, "alpha_init": 0.1},
            "train": {"batch_size": 16, "lr": 0.003, "betas": [0.9, 0.98], "weight_decay": 1e-5,
                      "warmup_steps": 5, "max_epochs": epochs, "max_steps": None, "patience": 4,
                      "grad_clip": 1.0, "eval_batch_size": 50, "checkpoint_minutes": 5, "compile": False,
                      "num_threads": 1, **train},
        }
    )  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fork")
    params = '{"n_train": 160, "n_val": 50, "n_test": 50, "min_length": 10, "max_length": 40, "seed": 0}'
    for cmd in (
        ["pdelra", "generate", "listops", "--out", str(root / "raw"), "--params", params],
        ["pdelra", "preprocess", "listops", "--raw", str(root / "raw"), "--out", str(root / "proc")],
    ):
        subprocess.run(cmd, env=tool_env(), check=True, capture_output=True)
    return root / "proc"


def train_line(data: Path, out: Path, config: str) -> str:
    return (
        f"pdelra train --run-config '{config}' --data {data} --out {out} --checkpoint-dir {out}.ckpt"
        f" > {out}.log 2>&1"
    )


def test_forked_runs_equal_separate_processes_and_relay_exit_status(data: Path, tmp_path: Path) -> None:
    config = run_config(2)
    subprocess.run(train_line(data, tmp_path / "direct", config), shell=True, env=tool_env(), check=True)
    script = tmp_path / "jobs.sh"
    script.write_text(
        train_line(data, tmp_path / "forked", config) + "\necho first=$?\n"
        + f"pdelra train --run-config '{{\"task\": 1}}' --data {data} --out {tmp_path}/bad"
        f" --checkpoint-dir {tmp_path}/bad.ckpt 2> {tmp_path}/bad.log\necho bad=$?\n"
    )  # fmt: skip
    done = subprocess.run(["pdelra", "forkserver", "run", "--", "bash", str(script)],
                          env=tool_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "first=0" in done.stdout and "bad=2" in done.stdout
    assert (
        "missing key variant" in (tmp_path / "bad.log").read_text()
    )  # the error went to the client's stderr file
    direct = json.loads((tmp_path / "direct" / "metrics.json").read_text())
    forked = json.loads((tmp_path / "forked" / "metrics.json").read_text())
    assert {k: v for k, v in direct.items() if k not in TIMING} == {
        k: v for k, v in forked.items() if k not in TIMING
    }
    assert "completed; test accuracy" in (tmp_path / "forked.log").read_text()


def test_sigterm_to_the_client_checkpoints_the_forked_run(data: Path, tmp_path: Path) -> None:
    """Preemption still works: the signal reaches the forked trainer, which checkpoints and exits 75."""
    out = tmp_path / "long"
    env = tool_env()
    job = f"{train_line(data, out, run_config(400))} & echo $! > {tmp_path}/pid; wait $!"
    server = subprocess.Popen(
        ["pdelra", "forkserver", "run", "--", "bash", "-c", f"{job}; echo rc=$? > {tmp_path}/rc"], env=env
    )
    try:
        log = Path(f"{out}.log")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "step 1 " not in (log.read_text() if log.exists() else ""):
            time.sleep(0.2)
        assert "step 1 " in log.read_text(), "the forked run did not start training"
        client = int((tmp_path / "pid").read_text().split()[0])
        os.kill(client, signal.SIGTERM)
        assert server.wait(timeout=120) == 0
    finally:
        if server.poll() is None:
            server.kill()
    assert (tmp_path / "rc").read_text().strip() == "rc=75"
    assert not (out / "metrics.json").exists()
    assert any(Path(f"{out}.ckpt").glob("checkpoint*.pt"))


def test_without_a_reachable_server_the_command_runs_by_itself(data: Path, tmp_path: Path) -> None:
    env = tool_env({"PDELRA_FORKSERVER": str(tmp_path / "no-such-socket")})
    done = subprocess.run(
        train_line(data, tmp_path / "alone", run_config(1)), shell=True, env=env, timeout=300
    )
    assert done.returncode == 0
    assert json.loads((tmp_path / "alone" / "metrics.json").read_text())["status"] == "completed"
    assert "unreachable" in (tmp_path / "alone.log").read_text()
