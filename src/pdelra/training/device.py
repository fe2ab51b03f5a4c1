"""One device decision for a run, and everything that follows from it.

CUDA is used whenever it is present; the runner never asks "are we on CUDA?" itself, it asks the
`DeviceSetup` for an autocast context, for batch transfer, and for peak memory. The CUDA branches cannot
be exercised on the CPU-only development machines, so each is a single, plain library call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import resource
from collections.abc import Iterator
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)


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


def setup_device(num_threads: int | None) -> DeviceSetup:
    """Choose the device for this process (CUDA when available) and configure it."""
    if torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
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


def _cpu_name() -> str:
    """The CPU model from /proc/cpuinfo where available; platform.processor() is often empty on Linux."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                return "cpu: " + line.split(":", 1)[1].strip()
    return "cpu: " + (platform.processor() or platform.machine())
