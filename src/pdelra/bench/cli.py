"""`pdelra bench NAME`: the benchmarks' arguments and descriptions, declared without importing them.

Only argparse here: a benchmark's module (which imports torch, or the data steps) is imported when it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from pdelra import bench, tasks
from pdelra.bench.args import bxld_shape, non_negative_int, positive_int
from pdelra.paper import POSITIONS

TRAIN_STEP_DESCRIPTION = """\
Benchmark: cost of PDE diffusion in a full train step (forward + backward + AdamW) of the ListOps model.

Every variant is timed against `none` in the same process, interleaved (none, A, none, B, …, round after
round), because round-to-round noise on a shared CPU (±5–10 %) is larger than one diffusion layer's cost:
each variant's ratio is its step time over the mean of the two `none` steps around it, and the median over
rounds is reported. The diffusion layer alone (forward + backward at the same shape) is timed the same way
and reported as a share of a `none` step.

Each diffusion variant runs on the eager reference operator and on the fused one (`--paths`, model key
`fused_diffusion`), and with `--paths compiled` as `train.compile: true` trains it: the fused operator in the
whole model through `torch.compile(model, dynamic=True)` (its ratio against the same eager `none` step, beside
the fused path's, is what compiling the model buys). `--autocast bf16` runs forward passes under bf16
autocast, as the trainer does on a GPU.

Goals: after_embedding ≤ 1.01×, single-scale per-block positions ≤ 1.03×,
multi-scale per-block ≤ 1.06×.
"""

LAYER_DESCRIPTION = """\
Benchmark: the diffusion layer alone (forward + backward) against a bare nn.LayerNorm of the same shape.

For each shape (B, L, d) and scale, three things are timed interleaved in one process, round after round
(LayerNorm, eager layer, LayerNorm, fused layer, LayerNorm, …): a bare `nn.LayerNorm(d)`, the eager reference
`DiffusionLayer(fused=False)` and the fused operator `DiffusionLayer(fused=True)`, each forward + backward
with a fixed output gradient. Each layer's ratio in a round is its time over the mean of the two LayerNorm
times around it; the median over rounds is reported. Warm-up rounds (untimed) compile the fused operator.

Goals: fused ≤ 1.5× LayerNorm at one scale, ≤ 2× at multi-scale.

`--official KIND ...` also times the Continuous-Time Attention authors' operator (`pdelra.nn.cta_official`,
one refinement step, official initial α and β) in the same rounds: eager, and compiled by `torch.compile`
(what `train.compile: true` does to it). It takes the lengths only when they are ragged, as in the model (full
batches carry no mask). It has no goal; its rows carry the kind in the scale column (`official-KIND`).
"""

PREPROCESS_DESCRIPTION = """\
Preprocessing throughput: ListOps rows, Pathfinder PNGs decoded from a tar stream, AAN byte tokenisation.

Data is generated in a temporary folder first (not timed). Goals on 2 cores: ListOps 100k rows < 10 s;
Pathfinder >= 10k images/s from a tar stream; AAN tokenisation >= 50 MB/s.
"""

WORKFLOW_SCALE_DESCRIPTION = """\
The workflow at a hundred times the paper's grid: DAG build and aggregation over >= 10,000 runs.

Measures (each in its own process; wall time, CPU time and that process's peak RSS):
  dry_run      `snakemake -n` on the paper config with one grid widened to every variant x scale x enough
               seeds for --runs training jobs (data.source real: nothing is downloaded in a dry run), and
               again at --small-runs (default a quarter), so that the growth shows: `dry_run_growth` gives
               the ratio of the times beside the ratio of the jobs, and the exponent k of time ∝ jobs^k
               (linear: k <= 1, less with the fixed start-up; quadratic: near 2);
  aggregate    `pdelra aggregate --runs DIR` over as many generated metrics.json files (50 epochs of history
               with alpha of 6 layers each, like real ones);
  longest_command  the longest shell command the dry run prints, against Linux's 128 KiB limit on one
               argument (a rule passing every run's path on its command line would fail past it).
Goals on 2 cores: dry run of --runs < 30 s; aggregate < 30 s and < 2 GB. On a shared machine compare
`cpu_s` (the child's user + system time), which other load does not inflate as it does `wall_s`.
Prints one JSON object (also --json-out).
Not part of the test suite; run from the repository root (or give --workflow).
"""

BUCKETS_DESCRIPTION = """\
Benchmark: train-step time with length-bucketed batches against the plain shuffle, same model and data.

A synthetic split with lengths drawn uniformly from [--min-length, --max-length] (ListOps-like by default:
500-2,000 tokens) is batched two ways each round: the plain seeded shuffle and `train.length_buckets`
(pdelra.training.batches). The same number of batches of each is timed, interleaved (plain, bucketed,
plain, …), each batch trimmed to its longest sequence as the trainer does, picked at evenly spaced quantiles
of the epoch's batch widths (so their mean estimates the epoch's mean step); a round's ratio is its bucketed
time over its plain time, and the median over rounds is reported with the padding (padding ÷ real tokens)
of the batches timed and of the whole epoch. The model is Table 8's ListOps model (baseline).
"""

PACK_DESCRIPTION = """\
Benchmark: ListOps runs per hour when K training processes share one GPU (`resources.pack: K`).

For each K (`--packs`, default 1 2 4), K processes each build the Table 8 ListOps model and time its full
train step (forward + backward + AdamW, as `pdelra bench train-step` does) at `--length` and
`--batch-size`; after `--warmup` untimed steps they wait for each other, then all train side by side for
`--seconds`. Their steps per second together, over the steps of one paper ListOps run (the published
96,000 training examples / batch × `--epochs`; evaluation and early stopping left out), give runs per hour;
the gain is that over K = 1. A pack pays only where the gain is well above 1: a GPU that one run already
fills gives each of K runs 1/K of it.
"""

CTA_BLOCK_DESCRIPTION = """\
Benchmark: one Continuous-Time Attention block as its authors run it, forward only, against the same block
without the PDE refinement.

The block is theirs (pdelra.nn.cta_official): a post-LN `nn.TransformerEncoderLayer` followed by `--steps`
refinement steps of `--kind` (`PDERefinement`, official initial α and β); the baseline is the encoder layer
alone. Both are timed interleaved in one process, round after round (baseline, block, baseline, …), under
`torch.inference_mode`, with bf16 autocast on CUDA when `--dtype bfloat16`; a round's ratio is the block's
time over the mean of the two baseline times around it, and the median over rounds is reported. The
official README reports 1.63× at L = 4096 on an A800 for 4 diffusion steps: the defaults are that setting
(batch 1, L 4096, d 512, 8 heads, FFN 2048, bf16, 4 steps). `--compile` also times both through
`torch.compile`. It has no goal of its own: the ratio is a figure to set beside the official one.
"""


def add_train_step_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--lengths", type=positive_int, nargs="+", default=[1024, 2048], help="sequence lengths L"
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=4, help="batch size (default 4: fits a CPU)"
    )
    parser.add_argument("--variants", nargs="+", default=list(POSITIONS), help="variants timed against none")
    parser.add_argument("--scales", nargs="+", default=["h1", "multi"], help="scales (h1 h2 h4 multi)")
    parser.add_argument(
        "--rounds", type=positive_int, default=5, help="interleaved rounds; the median is reported"
    )
    parser.add_argument("--warmup", type=non_negative_int, default=1, help="untimed rounds first")
    parser.add_argument("--ragged", action="store_true", help="random lengths in [L/2, L] instead of full")
    parser.add_argument(
        "--threads", type=positive_int, default=None, help="torch threads (default: torch's choice)"
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall time (default), or this process's CPU time: steadier on a shared machine with --threads 1",
    )
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    parser.add_argument(
        "--paths",
        nargs="+",
        choices=["eager", "fused", "compiled"],
        default=["eager", "fused"],
        help="diffusion operators (compiled: fused, in the whole model compiled as train.compile does)",
    )
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none", help="bf16 autocast forward")
    # Table 8, ListOps.
    parser.add_argument("--d-model", type=positive_int, default=128)
    parser.add_argument("--n-layers", type=positive_int, default=6)
    parser.add_argument("--n-heads", type=positive_int, default=8)
    parser.add_argument("--d-mlp", type=positive_int, default=512)


def add_layer_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shapes", type=bxld_shape, nargs="+", default=[(4, 1024, 128), (32, 2048, 128)], help="BxLxD shapes"
    )
    parser.add_argument("--scales", nargs="+", default=["h1", "multi"], help="scales (h1 h2 h4 multi)")
    parser.add_argument(
        "--rounds", type=positive_int, default=15, help="interleaved rounds; the median is reported"
    )
    parser.add_argument("--warmup", type=non_negative_int, default=2, help="untimed rounds first")
    parser.add_argument("--ragged", action="store_true", help="random lengths in [L/2, L] instead of full")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="activations")
    parser.add_argument(
        "--threads", type=positive_int, default=None, help="torch threads (default: torch's choice)"
    )
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="wall or process CPU time")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument(
        "--official",
        nargs="+",
        default=[],
        metavar="KIND",
        help="also time the CTA authors' operator of these kinds (diffusion wave reaction-diffusion "
        "advection-diffusion), eager and compiled",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")


def add_preprocess_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listops-rows", type=positive_int, default=100_000, help="ListOps rows to preprocess"
    )
    parser.add_argument(
        "--pathfinder-images", type=positive_int, default=20_000, help="PNGs in the tar stream"
    )
    parser.add_argument(
        "--aan-mb", type=positive_int, default=200, help="approximate size of the AAN TSVs in MB"
    )


def add_workflow_scale_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs", type=positive_int, default=10_000, help="training jobs / metrics files (10000)"
    )
    parser.add_argument(
        "--workflow", type=Path, default=Path.cwd(), help="repository root with the Snakefile (cwd)"
    )
    parser.add_argument(
        "--small-runs",
        type=positive_int,
        default=None,
        help="the second, smaller grid of the dry run, for its growth (default: a quarter of --runs)",
    )
    parser.add_argument("--skip-dry-run", action="store_true", help="only measure aggregation")
    parser.add_argument("--skip-aggregate", action="store_true", help="only measure the DAG")
    parser.add_argument("--json-out", type=Path, help="also write the JSON result here")
    parser.add_argument("--keep", type=Path, help="build the workspace here and keep it (default: temporary)")


def add_buckets_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--min-length", type=int, default=500, help="shortest sequence (ListOps: 500)")
    listops = tasks.get("listops").max_length
    parser.add_argument("--max-length", type=int, default=listops, help=f"longest (ListOps: {listops})")
    parser.add_argument("--examples", type=int, default=4096, help="examples in the synthetic split")
    parser.add_argument("--batch-size", type=int, default=8, help="batch size (default 8: fits a CPU)")
    parser.add_argument("--buckets", type=int, default=8, help="train.length_buckets")
    parser.add_argument("--batches", type=int, default=4, help="batches of each kind timed per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is reported")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="wall or process CPU time")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    # Table 8, ListOps.
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--n-layers", type=int, default=6)
    parser.add_argument("--n-heads", type=int, default=8)
    parser.add_argument("--d-mlp", type=int, default=512)


def add_pack_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--packs", type=positive_int, nargs="+", default=[1, 2, 4], help="K: processes at once"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="timed seconds per K (default 20)")
    parser.add_argument("--warmup", type=non_negative_int, default=3, help="untimed steps per process first")
    listops = tasks.get("listops").max_length
    parser.add_argument("--length", type=positive_int, default=listops, help=f"length (ListOps: {listops})")
    parser.add_argument("--batch-size", type=positive_int, default=256, help="batch (Table 8: 256)")
    parser.add_argument("--epochs", type=positive_int, default=50, help="epochs of one run (config: 50)")
    parser.add_argument(
        "--variant", default="after_embedding", help="the diffusion position (default after_embedding)"
    )
    parser.add_argument("--scale", default="h1", help="h1, h2, h4 or multi")
    parser.add_argument("--path", choices=["eager", "fused"], default="fused", help="diffusion operator")
    parser.add_argument("--autocast", choices=["none", "bf16"], default="bf16", help="bf16 autocast forward")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--threads", type=positive_int, default=None, help="torch threads per process")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    # Table 8, ListOps.
    parser.add_argument("--d-model", type=positive_int, default=128)
    parser.add_argument("--n-layers", type=positive_int, default=6)
    parser.add_argument("--n-heads", type=positive_int, default=8)
    parser.add_argument("--d-mlp", type=positive_int, default=512)


def add_cta_block_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--length", type=positive_int, default=4096, help="sequence length L")
    parser.add_argument("--d-model", type=positive_int, default=512)
    parser.add_argument("--heads", type=positive_int, default=8)
    parser.add_argument("--d-mlp", type=positive_int, default=2048, help="the encoder layer's FFN width")
    parser.add_argument("--steps", type=positive_int, default=4, help="PDE refinement steps after the layer")
    parser.add_argument(
        "--kind", default="diffusion", help="diffusion, wave, reaction-diffusion or advection-diffusion"
    )
    parser.add_argument(
        "--dtype", choices=["float32", "bfloat16"], default="bfloat16", help="autocast on CUDA"
    )
    parser.add_argument("--compile", action="store_true", help="also time both through torch.compile")
    parser.add_argument(
        "--rounds", type=positive_int, default=20, help="interleaved rounds; the median is reported"
    )
    parser.add_argument("--warmup", type=non_negative_int, default=3, help="untimed rounds first")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")


# subcommand name -> (its handler "module:function", its description, the function adding its arguments)
BENCHMARKS: dict[str, tuple[str, str, Callable[[argparse.ArgumentParser], None]]] = {
    "train-step": ("pdelra.bench.train_step:run", TRAIN_STEP_DESCRIPTION, add_train_step_arguments),
    "layer": ("pdelra.bench.layer:run", LAYER_DESCRIPTION, add_layer_arguments),
    "preprocess": ("pdelra.bench.preprocess:run", PREPROCESS_DESCRIPTION, add_preprocess_arguments),
    "workflow-scale": (
        "pdelra.bench.workflow_scale:run",
        WORKFLOW_SCALE_DESCRIPTION,
        add_workflow_scale_arguments,
    ),
    "buckets": ("pdelra.bench.buckets:run", BUCKETS_DESCRIPTION, add_buckets_arguments),
    "pack": ("pdelra.bench.pack:run", PACK_DESCRIPTION, add_pack_arguments),
    "cta-block": ("pdelra.bench.cta_block:run", CTA_BLOCK_DESCRIPTION, add_cta_block_arguments),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help=f"run a benchmark ({', '.join(BENCHMARKS)})",
        description=bench.__doc__,
    )
    benches = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, (handler, description, add_arguments) in BENCHMARKS.items():
        summary = " ".join(description.strip().split("\n\n")[0].split())  # the whole first paragraph
        sub = benches.add_parser(name, help=summary, description=description)
        add_arguments(sub)
        sub.set_defaults(handler=handler)
