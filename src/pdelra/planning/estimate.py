"""A run's time from its work, without a GPU: the facts of a task the plan counts with (its example counts
and max_length), a run's seconds from its step time, and the runtime an LRA job asks for.

`cluster.runtime_from` (config/README.md): `config` (the default) asks each job's `resources.runtime`;
`estimate` asks, for each LRA run (rules train and train_pack), its FLOPs estimate on `cluster.gpu_model`
(pdelra.planning.flops at its default utilisation, the H200 calibration's, and the task's max_length, the
length that calibration was fitted at) times `cluster.runtime_margin`, rounded up to a minute, at least
MIN_ESTIMATED_RUNTIME, at most `cluster.max_runtime`. A pack asks K such runs' time / pack_gain, as it does
of configured runtimes. The related systems' jobs (lm_train, cta_official_train, cta_lm_train: other
models, which the FLOPs model does not count) keep their configured runtime either way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pdelra import tasks
from pdelra.data.settings import generate_defaults
from pdelra.errors import UserError
from pdelra.planning import flops
from pdelra.training.schedule import planned_steps

EVAL_COST = 1 / 3  # an evaluation example costs about a third of a training example (forward only)
# The least an estimated request asks for: a job also starts Python, loads its data and writes checkpoints,
# which the FLOPs do not count, and a toy run's estimate is seconds.
MIN_ESTIMATED_RUNTIME = 30  # minutes


class EstimateError(UserError, ValueError):
    """`cluster.runtime_from: estimate` without a GPU model the FLOPs table knows."""


def task_data(config: Mapping[str, Any], task: str) -> dict[str, Any]:
    """Example counts, vocabulary, classes and max_length of a task, with where the counts came from.

    A task outside the config's LRA tasks (the LM's `lm_{corpus}`, Continuous-Time Attention's own) has no
    counts (None): its jobs are timed by finished runs or counted at their runtime."""
    if task not in config["tasks"]:
        return {"counts": None, "source": "-"}
    manifest_file = Path(config["data"]["processed_dir"]) / task / "manifest.json"
    if manifest_file.exists():
        manifest = json.loads(manifest_file.read_text())
        return {
            "counts": dict(manifest["counts"]),
            "vocab_size": int(manifest["vocab_size"]),
            "num_classes": int(manifest["num_classes"]),
            "max_length": int(manifest["max_length"]),
            "source": "manifest",
        }
    if config["data"].get("source") == "generated":
        sizes = {**generate_defaults()[task], **(config["data"].get("generate", {}).get(task) or {})}
        counts = {"train": sizes["n_train"], "val": sizes["n_val"], "test": sizes["n_test"]}
        source = "config"
    else:
        # the published split sizes (pdelra.tasks), used only without a manifest or generate sizes
        counts, source = dict(tasks.TASKS[task].splits), "published"
    return {
        "counts": counts,
        "vocab_size": tasks.TASKS[task].vocab_size,
        "num_classes": tasks.TASKS[task].num_classes,
        "max_length": int(config["tasks"][task]["max_length"]),
        "source": source,
    }


def planned_job_steps(n_train: int, train: Mapping[str, Any]) -> int:
    return planned_steps(math.ceil(n_train / train["batch_size"]), train["max_epochs"], train["max_steps"])


def run_seconds(train: Mapping[str, Any], counts: Mapping[str, int], steps: int, step_s: float) -> float:
    """One run's seconds: its training steps, and its evaluations (validation each epoch, test once) at
    EVAL_COST of a training example each."""
    epochs = min(train["max_epochs"], math.ceil(steps / math.ceil(counts["train"] / train["batch_size"])))
    per_example = step_s / train["batch_size"]
    return steps * step_s + per_example * EVAL_COST * (epochs * counts["val"] + counts["test"])


def run_flops(run: Mapping[str, Any], data: Mapping[str, Any]) -> float:
    """One LRA run's FLOPs at max_length: its training steps and its evaluations (`run_seconds` at one FLOP
    a second)."""
    train, counts = run["train"], data["counts"]
    steps = planned_job_steps(counts["train"], train)
    work = flops.step_flops(
        run["model"], data["max_length"], tasks.is_two_tower(run["task"]), train["batch_size"]
    )
    return run_seconds(train, counts, steps, work)


def estimated_seconds(run: Mapping[str, Any], data: Mapping[str, Any], gpu: str) -> float:
    """One LRA run's seconds on GPU model `gpu` from its FLOPs at max_length and the default utilisation."""
    return flops.step_seconds(run_flops(run, data), gpu, flops.DEFAULT_UTILISATION)


def run_minutes(
    config: Mapping[str, Any],
    run: Mapping[str, Any],
    resources: Mapping[str, Any],
    data: Mapping[str, Any] | None = None,
) -> int:
    """Minutes one LRA run asks for (first attempt; a pack asks K of these / pack_gain): its `resources`'
    runtime, or with `cluster.runtime_from: estimate` its estimate x margin within [floor, max_runtime].
    `data`: the task's `task_data`, read here when not given (and only for an estimate)."""
    cluster = config.get("cluster") or {}
    if cluster.get("runtime_from", "config") == "config":
        return int(resources["runtime"])
    data = task_data(config, run["task"]) if data is None else data
    gpu = estimate_gpu(cluster)
    margin = float(cluster.get("runtime_margin", flops.DEFAULT_MARGIN))
    minutes = math.ceil(estimated_seconds(run, data, gpu) * margin / 60)
    return min(max(minutes, MIN_ESTIMATED_RUNTIME), int(cluster.get("max_runtime", minutes)))


def estimate_gpu(cluster: Mapping[str, Any]) -> str:
    """The FLOPs table's name of `cluster.gpu_model`; EstimateError naming the key when it is unset or
    unknown."""
    name = cluster.get("gpu_model")
    if not name:
        raise EstimateError(
            "cluster.runtime_from is estimate but cluster.gpu_model is not set: name the GPU model the jobs "
            f"run on ({', '.join(flops.GPU_PEAK_TFLOPS)})"
        )
    try:
        return flops.gpu_model(name)
    except flops.GPUError:
        known = ", ".join(flops.GPU_PEAK_TFLOPS)
        raise EstimateError(f"cluster.gpu_model {name}: unknown GPU model; known: {known}") from None


def cluster_problems(config: Mapping[str, Any]) -> list[str]:
    """The config check's line when runtime_from: estimate cannot be estimated (no or an unknown GPU)."""
    cluster = config.get("cluster") or {}
    if cluster.get("runtime_from", "config") != "estimate":
        return []
    try:
        estimate_gpu(cluster)
    except EstimateError as err:
        return [str(err)]
    return []
