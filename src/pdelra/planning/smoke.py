"""`pdelra smoke CONFIG`: one job's worth of checks on the device it runs on, before a campaign.

On a GPU node (`srun --gpus 1 pdelra smoke config/config.yaml`, profiles/slurm/README.md): CUDA is visible
(when the config's training jobs ask for a GPU), this GPU has bf16 kernels (a matmul under bf16 autocast),
and one training step (forward under the jobs' autocast, loss, backward, clipping, AdamW) of each LRA task's
baseline model at its config's batch (train.micro_batch_size where set: what one forward holds) and
max_length, on random tokens, with a finite loss and gradients. The model is the one the plan's calibration
times (pdelra.planning.calibration). One line per check; exit 1 at the first failure, which the last line
names. With `--device cpu` (tests, a laptop) the GPU checks are skipped and say so, and so they are where a
GPU was asked for but the CPU is allowed on purpose (PDELRA_ALLOW_CPU=1, as for a training job).

A node where torch finds no CUDA device is recorded as bad the way a training job records it
(pdelra.training.bad_nodes): the workflow's retry of the smoke job, and every GPU job after it, then carries
`--exclude=NODE`, so a black-hole node cannot take all three attempts and stop the campaign at the smoke gate.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from pdelra.planning import experiment
from pdelra.planning.calibration import _baseline_model
from pdelra.planning.plan import load_config, task_data
from pdelra.training import bad_nodes
from pdelra.training.device import ALLOW_CPU_ENV, cpu_allowed, cpu_threads


class SmokeFailure(Exception):
    """A check failed; the message says what it found."""


def run(args: argparse.Namespace) -> int:
    import torch

    config = load_config(args.config)
    tasks = smoke_tasks(config)
    wants_gpu = any(int(experiment.merged(config, "resources", task)["gpu"]) >= 1 for task in tasks)
    device_name = args.device
    allowed = not torch.cuda.is_available() and cpu_allowed()
    if device_name == "auto":
        device_name = "cuda" if (wants_gpu and not allowed) or torch.cuda.is_available() else "cpu"
    checks: list[tuple[str, Callable[[], str]]] = []
    if device_name == "cuda":
        checks += [("cuda", _cuda_visible), ("bf16", _bf16_autocast)]
    else:
        why = (
            "--device cpu"
            if args.device == "cpu"
            else f"no CUDA, and the CPU is allowed by {ALLOW_CPU_ENV}"
            if wants_gpu
            else "no training job asks for a GPU"
        )
        print(f"skip  cuda, bf16: the GPU checks were skipped ({why})", flush=True)
    device = torch.device(device_name)
    for task in tasks:
        checks.append((task, lambda task=task: task_step(config, task, device)))
    for name, check in checks:
        try:
            line = check()
        except Exception as exc:  # any failure of a check is its verdict
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"FAIL  {name}: {type(exc).__name__}: {message}", flush=True)
            print(f"smoke test failed at {name}", flush=True)
            return 1
        print(f"ok    {name}: {line}", flush=True)
    print(f"smoke test passed: {len(checks)} check(s) on {device_name}", flush=True)
    return 0


def smoke_tasks(config: Mapping[str, Any]) -> list[str]:
    """The LRA tasks the selected grids train, in the config's order."""
    used = {run[0] for run in experiment.lra_runs(config)}
    return [task for task in config["tasks"] if task in used]


def _cuda_visible() -> str:
    import torch

    if not torch.cuda.is_available():
        build = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        recorded = bad_nodes.record_from_env()  # the retry and every later GPU job exclude this node
        where = f"; node {bad_nodes.node_name()} recorded in {recorded}" if recorded else ""
        raise SmokeFailure(f"no CUDA device visible to torch {torch.__version__} ({build}){where}")
    return f"{torch.cuda.get_device_name(0)} (torch {torch.__version__}, CUDA {torch.version.cuda})"


def _bf16_autocast() -> str:
    import torch

    if not torch.cuda.is_bf16_supported():
        raise SmokeFailure(f"{torch.cuda.get_device_name(0)} has no bf16 support (the jobs train in bf16)")
    a = torch.randn(64, 64, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = a @ a
    torch.cuda.synchronize()
    if out.dtype != torch.bfloat16 or not torch.isfinite(out.float()).all():
        raise SmokeFailure(
            f"a matmul under bf16 autocast gave {out.dtype}, finite={bool(out.isfinite().all())}"
        )
    return "a matmul under bf16 autocast"


def task_step(config: Mapping[str, Any], task: str, device: Any) -> str:
    """One training step of `task`'s baseline at its batch and max_length on `device`; its line."""
    import torch
    import torch.nn.functional as F

    model_cfg = experiment.merged(config, "model", task)
    train = experiment.merged(config, "train", task)
    batch = int(train.get("micro_batch_size") or train["batch_size"])
    data = task_data(config, task)
    length = int(data["max_length"])
    if device.type == "cpu":
        torch.set_num_threads(cpu_threads(train.get("num_threads")))  # the job's threads, not the node's
    fused = bool(model_cfg.get("fused_diffusion", True))
    model, opt, cfg = _baseline_model(task, data, model_cfg, fused, device)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.vocab_size, (batch, length), generator=gen).to(device)
    lengths = torch.full((batch,), length).to(device)
    labels = torch.randint(0, cfg.num_classes, (batch,), generator=gen).to(device)
    inputs = (tokens, lengths, tokens, lengths) if cfg.two_tower else (tokens, lengths)
    started = time.perf_counter()
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        logits = model(*inputs)
    loss = F.cross_entropy(logits.float(), labels)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    if not math.isfinite(loss.item()) or not math.isfinite(norm.item()):
        raise SmokeFailure(f"loss {loss.item():g}, gradient norm {norm.item():g} at batch {batch} × {length}")
    return f"one step at batch {batch} × {length} tokens, loss {loss.item():.3f}, {seconds:.2f} s"
