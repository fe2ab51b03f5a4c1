"""One device decision for a run, and everything that follows from it.

The run asks for `cuda`, `cpu` or `auto` (CUDA when present). The workflow asks for `cuda` exactly when the
job reserved a GPU (its `gpu` resource), and for `cpu` otherwise, so a CPU job never shares the card with a
GPU job. A job that asked for CUDA where there is none stops before training, unless the CPU is allowed on
purpose (`--allow-cpu`, or PDELRA_ALLOW_CPU=1 in the environment): a paper-sized run on the CPU would
otherwise go unnoticed for days, its only trace a "device: cpu" log line.

The runner never asks "are we on CUDA?" itself, it asks the `DeviceSetup` for an autocast context, for batch
transfer, and for peak memory. The CUDA branches cannot be exercised on the CPU-only development machines, so
each is a single, plain library call.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import platform
import resource
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import torch

from pdelra.errors import UserError
from pdelra.training import bad_nodes

log = logging.getLogger(__name__)

# Set to 1: a run that asked for CUDA trains on the CPU where there is none.
ALLOW_CPU_ENV = "PDELRA_ALLOW_CPU"
GPU_LOCK_DIR_ENV = "PDELRA_GPU_LOCK_DIR"  # where the per-card lock files live (default: the temp folder)
_HELD_CARDS: list[IO[str]] = []  # the lock of the card this process trains on, held until it exits


class DeviceError(UserError):
    """The run asked for a device this machine does not have."""


def cpu_threads(requested: int | None) -> int:
    """Threads for CPU math: the run config's num_threads, else what Slurm granted, else the affinity mask.

    torch's default (all cores of the node) oversubscribes a shared node and makes step times noisy.
    """
    if requested is not None:
        return requested
    slurm = os.environ.get("SLURM_CPUS_PER_TASK", "").strip()
    if slurm.isdigit() and int(slurm) > 0:
        return int(slurm)
    return len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class DeviceSetup:
    device: torch.device
    name: str
    threads: int | None  # CPU math threads; None on CUDA (the GPU does the work)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """bf16 autocast on CUDA (A100/H100 class GPUs; no loss scaling needed); full fp32 on CPU."""
        if self.is_cuda:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def attention_kernels(self) -> Iterator[None]:
        """On CUDA allow only the fused SDPA kernels (flash, memory-efficient, cuDNN).

        The math fallback materialises the L×L matrix; at L=2000-4000 with large batches it would silently
        multiply memory use, so failing with torch's "no available kernel" message is the better outcome.
        """
        if not self.is_cuda:
            yield
            return
        from torch.nn.attention import SDPBackend, sdpa_kernel

        fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
        with sdpa_kernel(fused):
            yield

    def to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """Move a CPU batch tensor to the device: via pinned memory and an asynchronous copy on CUDA."""
        if self.is_cuda:
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor

    def synchronize(self) -> None:
        """Wait for queued GPU work, so that step timings measure the work and not the launch."""
        if self.is_cuda:
            torch.cuda.synchronize(self.device)

    def peak_memory(self) -> tuple[int, str]:
        """(bytes, kind): CUDA max allocated by tensors on GPU; the process's peak resident set on CPU."""
        if self.is_cuda:
            return int(torch.cuda.max_memory_allocated(self.device)), "cuda_max_allocated"
        # ru_maxrss is in KiB on Linux (bytes on macOS).
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if platform.system() == "Darwin" else peak * 1024), "cpu_peak_rss"


def cpu_allowed(flag: bool = False) -> bool:
    """True when a run that asked for CUDA may fall back to the CPU: `--allow-cpu` or PDELRA_ALLOW_CPU=1."""
    return flag or os.environ.get(ALLOW_CPU_ENV, "").strip() not in ("", "0")


def choose_device(requested: str = "auto", allow_cpu: bool = False) -> str:
    """'cuda' or 'cpu' for a run that asked for `requested` (pdelra.training.cli.DEVICES); DeviceError when
    it asked for CUDA, there is none, and the CPU is not allowed on purpose."""
    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    build = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    if cpu_allowed(allow_cpu):
        log.warning("this run asked for a GPU but there is none (torch %s, %s): training on the CPU, as "
                    "allowed by --allow-cpu or %s", torch.__version__, build, ALLOW_CPU_ENV)  # fmt: skip
        return "cpu"
    recorded = bad_nodes.record_from_env()  # the workflow's next submissions exclude this node
    where = f"; node {bad_nodes.node_name()} recorded in {recorded}" if recorded else ""
    raise DeviceError(
        f"this run asked for a GPU (--device cuda: the workflow asks for one when the job's resources.gpu "
        f"is >= 1) but torch finds no CUDA device (torch {torch.__version__}, {build}); to train on the CPU "
        f"on purpose set {ALLOW_CPU_ENV}=1 or pass --allow-cpu, or set resources.gpu: 0 in the config{where}"
    )


def setup_device(num_threads: int | None, requested: str = "auto", allow_cpu: bool = False) -> DeviceSetup:
    """Choose the device for this process (`choose_device`) and configure it."""
    if choose_device(requested, allow_cpu) == "cuda":
        device = torch.device("cuda", claim_cuda_device())
        torch.cuda.set_device(device)
        torch.cuda.reset_peak_memory_stats(device)
        # TF32 for the fp32 work autocast leaves alone (optimizer, norms), as was default in the paper's era.
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        setup = DeviceSetup(device, torch.cuda.get_device_name(device), None)
    else:
        threads = cpu_threads(num_threads)
        torch.set_num_threads(threads)
        setup = DeviceSetup(torch.device("cpu"), _cpu_name(), threads)
    log.info("device: %s%s", setup.name, f" ({setup.threads} threads)" if setup.threads else "")
    return setup


def claim_cuda_device() -> int:
    """The index of a visible CUDA device that no other pdelra process on this machine trains on.

    Snakemake rations cards as a count (`--resources gpu=2`) but does not say which card a job holds, so
    each job takes the first card whose lock file it can lock (flock: the kernel releases it when the process
    ends, however it ends). With one visible device (a Slurm job, a one-card workstation) that is device 0.
    """
    count = torch.cuda.device_count()
    if count <= 1:
        return 0
    folder = Path(os.environ.get(GPU_LOCK_DIR_ENV) or tempfile.gettempdir())
    for index in range(count):
        card = torch.cuda.get_device_properties(index).uuid  # the same card under any CUDA_VISIBLE_DEVICES
        handle = open(folder / f"pdelra-cuda-{card}.lock", "a")  # noqa: SIM115 (held for the process's life)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        _HELD_CARDS.append(handle)
        return index
    log.warning("all %d CUDA devices are in use by other pdelra processes: sharing device 0", count)
    return 0


def _cpu_name() -> str:
    """The CPU model from /proc/cpuinfo where available; platform.processor() is often empty on Linux."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                return "cpu: " + line.split(":", 1)[1].strip()
    return "cpu: " + (platform.processor() or platform.machine())
