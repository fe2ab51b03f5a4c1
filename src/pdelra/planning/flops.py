"""A job's GPU time from the work it does (`pdelra plan --gpu MODEL`): the LRA classifier's FLOPs per
training step, a GPU's datasheet peak, and a stated utilisation of that peak.

The model (what is counted, and what is not):
- forward FLOPs of one example = towers × n_layers × L × (8·d² + 4·d·d_mlp + 4·L·d), a multiply-add
  counted as 2 FLOPs: per token and layer the QKV projection (2·d·3d) and the output projection (2·d·d),
  the MLP's two matrices (2·2·d·d_mlp), and attention's scores QKᵀ and their product with V (2·L·d each,
  over the whole padded row: the kernel computes the padding it masks). L is the sequence length: the mean
  width of one epoch's training batches (each trimmed to its longest example) when the data is processed,
  else max_length (an upper bound). Retrieval encodes two documents (towers = 2). Embeddings, LayerNorms,
  softmax, the classifier head and the optimizer are left out (O(L·d) or O(d²) per example, well under 1 %
  at the paper's sizes);
- a training step = 3 × forward × batch (the backward pass costs about twice the forward);
- the PDE diffusion operators are not counted (the baseline's FLOPs: diffusion variants cost 1-6 % more in
  time, `pdelra bench train-step`; CTA variants more with more pseudo-time steps);
- step time = step FLOPs ÷ (peak × utilisation). Models of d_model = 128 keep a GPU's tensor cores far from
  busy (small matrices, memory-bound softmax and LayerNorms, kernel launches): DEFAULT_UTILISATION is set
  from the one GPU measurement of the paper grid (docs/measurements.md, "The paper grid on one GPU": a plan
  calibrated on an H200, about 364 GPU-hours for the 245 jobs at max_length; its per-task step times were
  not recorded), the utilisation at which this model gives that total (8.3 %, rounded to 8 %). Finished
  runs on the same GPU model, or a calibration on it, replace it (`fit_utilisation`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from pdelra.errors import UserError

TRAIN_FACTOR = 3  # forward + backward ≈ 3 × forward
DEFAULT_UTILISATION = 0.08  # of the bf16 dense peak; from the H200 calibration of the paper grid (above)
# Datasheet peak dense (no sparsity) bf16 tensor-core throughput, TFLOP/s (fp16 where the card has no bf16).
GPU_PEAK_TFLOPS = {
    "A100": 312.0,  # NVIDIA A100 Tensor Core GPU datasheet: BF16 312 TFLOPS (624 with sparsity)
    "A40": 149.7,  # NVIDIA A40 datasheet: BF16 149.7 TFLOPS (299.4 with sparsity)
    "A6000": 154.8,  # NVIDIA RTX A6000 datasheet: BF16 tensor 154.8 TFLOPS (309.7 with sparsity)
    "B200": 2250.0,  # NVIDIA DGX B200 / HGX B200: FP16/BF16 2.25 PFLOPS dense per GPU (4.5 with sparsity)
    "H100": 989.0,  # NVIDIA H100 SXM datasheet: BF16 1,979 TFLOPS with sparsity, 989 dense (PCIe: 756)
    "H200": 989.0,  # NVIDIA H200 datasheet: the H100's compute (BF16 1,979 with sparsity), more HBM
    "L4": 121.0,  # NVIDIA L4 datasheet: BF16 242 TFLOPS with sparsity, 121 dense
    "L40S": 362.0,  # NVIDIA L40S datasheet: BF16 362.05 TFLOPS dense (733 with sparsity)
    "V100": 125.0,  # NVIDIA V100 SXM2 datasheet: FP16 tensor 125 TFLOPS (no bf16)
}
# Memory of each card (GB, the datasheets' largest variant: A100 80 GB, not 40): what `pdelra config check`
# lets one GPU job's operator use (pdelra.planning.config_check.job_memory), an upper bound.
GPU_MEMORY_GB = {
    "A100": 80.0,
    "A40": 48.0,
    "A6000": 48.0,
    "B200": 180.0,
    "H100": 80.0,
    "H200": 141.0,
    "L4": 24.0,
    "L40S": 48.0,
    "V100": 32.0,
}
DEFAULT_MARGIN = 2.0  # cluster.runtime_margin: a runtime derived from the estimate asks for this × it


class GPUError(UserError, ValueError):
    """A GPU model the table does not know."""


def gpu_model(name: str) -> str:
    """The table's name of GPU `name` (case-insensitive); GPUError in one line listing the known ones."""
    for known in GPU_PEAK_TFLOPS:
        if name.strip().upper() == known.upper():
            return known
    raise GPUError(f"--gpu {name}: unknown GPU model; known: {', '.join(GPU_PEAK_TFLOPS)}")


def peak_flops(gpu: str) -> float:
    return GPU_PEAK_TFLOPS[gpu_model(gpu)] * 1e12


def same_gpu(device_name: str | None, gpu: str) -> bool:
    """Whether a device name (torch.cuda.get_device_name, a run's metrics.json `device`) is GPU model `gpu`
    ("NVIDIA H200" is H200; "NVIDIA H100 80GB HBM3" is H100, not H200)."""
    if not device_name:
        return False
    words = device_name.upper().replace("-", " ").split()
    return gpu_model(gpu).upper() in words


def forward_flops(model: Mapping[str, Any], length: float, two_tower: bool) -> float:
    """Forward FLOPs of one example of `length` tokens (see the module's docstring)."""
    d, d_mlp, layers = int(model["d_model"]), int(model["d_mlp"]), int(model["n_layers"])
    per_token = 8 * d * d + 4 * d * d_mlp + 4 * length * d
    return (2 if two_tower else 1) * layers * length * per_token


def step_flops(model: Mapping[str, Any], length: float, two_tower: bool, batch_size: int) -> float:
    """FLOPs of one training step (forward and backward) of `batch_size` examples."""
    return TRAIN_FACTOR * batch_size * forward_flops(model, length, two_tower)


def step_seconds(flops: float, gpu: str, utilisation: float) -> float:
    return flops / (peak_flops(gpu) * utilisation)


def fit_utilisation(gpu: str, samples: Iterable[tuple[float, float]]) -> tuple[float, str]:
    """(utilisation, where it comes from): the median of the measured (step FLOPs, step seconds) `samples`
    on GPU model `gpu` (finished runs, a calibration), else DEFAULT_UTILISATION."""
    implied = [flops / (seconds * peak_flops(gpu)) for flops, seconds in samples if seconds > 0]
    if implied:
        return statistics.median(implied), f"fitted to {len(implied)} measured step time(s) on {gpu}"
    return DEFAULT_UTILISATION, "default: the H200 calibration of the paper grid, docs/measurements.md"
