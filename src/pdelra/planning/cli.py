"""The subcommands that read a workflow config before it runs: `config check` and `plan`.

Only argparse here: each handler is imported when its command runs (pdelra.planning.config_check,
pdelra.planning.plan, which imports torch to calibrate). The defaults the help shows live here and the
implementations import them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# `pdelra plan`
DEFAULT_RETRIES = 2  # `retries` of profiles/slurm/profile.yaml when it cannot be read
SLURM_PROFILE = Path("profiles/slurm/profile.yaml")
CACHE_NAME = "plan/calibration.json"  # under results/{experiment}
# Calibration (pdelra.planning.calibration): untimed warm-up steps per timed batch size (the first step
# allocates AdamW's moments and the shapes' buffers, and compiles the fused operator), then the median of
# the timed steps (one slow step, another process taking the core, does not move it).
WARMUP_STEPS = 1
DEFAULT_STEPS = {"cuda": 3, "cpu": 5}
MIN_TIMED_S = 0.5  # short steps are timed until they add up to this (at most MAX_TIMED_STEPS)
MAX_TIMED_STEPS = 200
CPU_STEP_BUDGET_S = 2.0  # on the CPU, the longest step timed: larger batches are extrapolated from two

CONFIG_DESCRIPTION = """\
`pdelra config check FILE ...`: every check the workflow makes of a config, in plain words, up front.

`config_problems` is the one check: the workflow (workflow/rules/common.smk) calls it on the config it is
given and refuses to start on any problem, and this command calls it on each FILE, so "valid" here means
the workflow accepts the config. It covers the schema (every violation, with its key path), then what the
schema cannot see: grids named in run_grids exist and their tasks are configured, setting names mean one
thing, every selected run's model (and the LM's) can be built as configured, n_heads divides d_model,
generation settings can be met, and real data has its downloads. A variant of your own has each operator run
as training will, on CPU, in seconds: forward and backward at each task's real max_length on a padded batch,
refusing NaN or Inf in its output or gradients, a wrong shape or dtype, an exception, outputs at valid
positions that depend on the padding, and more memory at the job's batch than the job may use (its
resources.mem_mb, or on a GPU the card's) (pdelra.nn.operator_check); each probe is kept by the digest of the
operator's code ($XDG_CACHE_HOME/pdelra), so a repeated check does not run it again. The answer of the
checks that build models is kept too, by the digest of the config and of the code (pdelra's, your
operators'): a repeated check of the same config (every `snakemake -n`) does not import torch. What this
command adds is the line of a YAML syntax error in a `--configfile`: Snakemake reads that file before the
workflow starts and says only "Config file is not valid JSON or YAML". Exit 1 if any FILE has a problem.
"""

PLAN_DESCRIPTION = """\
`pdelra plan CONFIG`: what a workflow config will cost before it runs.

The jobs are the workflow's own (pdelra.planning.experiment, the expansion workflow/rules/common.smk uses):
every training rule's jobs (`train`/`train_pack`: the LRA runs of every grid in `run_grids`; `lm_train`:
PhysQK-AD's LM; `cta_official_train`, `cta_lm_train`: Continuous-Time Attention's own), and the other jobs
(data, diagnostics, tables, report, DVC) counted per rule. Per training rule and task: jobs, those already
finished (their metrics.json exists: the workflow will not run them again), the planned optimizer steps per
job (ceil(n_train / batch_size) × max_epochs, capped by max_steps, with each run's own setting: an upper
bound, since early stopping may end a run sooner), step time, device-hours in all and still to go, the
attempts a job needs within its `runtime`, peak memory and whether it needs micro-batching
(`train.micro_batch_size`) on this device, disk, and padding tokens ÷ real tokens without and with
length-bucketed batches (`train.length_buckets`). In total: device-hours and the wall-clock of the jobs to go
on `--gpus N`.

Where the numbers come from (each is labelled in the output):
- example counts: the processed data's manifest (`data.processed_dir/{task}/manifest.json`) when present
  (`manifest`), else the config's `data.generate` sizes for generated data (`config`), else the Long Range
  Arena's published split sizes for real data (`published`);
- a job's time, best first: its own finished runs' `wall_time_s` (`finished`; a pack's runs side by side:
  the longest); the finished runs of its grid cell (rule folder, task, variant, scale, setting) under
  `results/{experiment}` (`runs`: their median `median_step_time_s` × the planned steps, or their median
  wall time where the steps are unknown, as for the LM's, Continuous-Time Attention's and every part's
  own runs: a part's jobs are timed only by runs of their own, never by the LRA model's, even on an LRA
  task, and otherwise count at their runtime, the output saying "not estimated" and why); a
  calibration on this device (`calibrated`, LRA tasks only): the median of a few timed forward + backward +
  clipping + AdamW steps (at least {min_timed} of them), after a warm-up, of the task's baseline model on
  random tokens, with the torch threads its jobs use (train.num_threads, else $SLURM_CPUS_PER_TASK, else the
  CPU affinity; `--threads` overrides). On a GPU it times the job's batch size or, when that does not fit, a
  smaller batch scaled up linearly. On the CPU it times a step's fixed cost (one example of a few tokens),
  batch 1, and the job's batch or, when a step of that would take longer than {cpu_budget}, the largest
  batch within it, whose time beyond the fixed cost is scaled up linearly (the fixed cost is not multiplied
  by the batch); else the job's requested `runtime` (`requested`), a bound, not an estimate. On the CPU,
  sequences are as long as the mean longest sequence of one epoch's batches when the data is processed
  (batches are trimmed to their longest); else (and on a GPU, whose peak memory is that of the widest batch)
  at max_length, an upper bound. Diffusion variants cost 1-6 % more than the baseline (`pdelra bench
  train-step`), CTA variants more with more pseudo-time steps; the calibration times the baseline only.
  Calibrations are kept in `results/{experiment}/plan/calibration.json`, keyed by the task's model, batch
  and data shape, the code, torch, the device and its threads, and reused (`--no-cache`: time afresh). With
  `--device auto` on a machine without CUDA, the tasks whose jobs ask for a GPU are not timed on the CPU
  (minutes, and nothing a GPU's time can be read from): they count at their runtime, and the output says how
  to time them (on a GPU node, or `--device cpu`);
- with `--gpu MODEL`, between the calibration and the runtime: the job's FLOPs (`flops`, LRA jobs only;
  pdelra.planning.flops states the model): forward per example n_layers × L × (8·d² + 4·d·d_mlp + 4·L·d),
  two towers for retrieval, L the mean trimmed batch width with processed data else max_length; a step
  3 × forward × batch; step time = FLOPs ÷ (the GPU's datasheet bf16 dense peak × a utilisation fitted to
  finished runs or a calibration on that GPU model, else a default set from the H200 calibration of the
  paper grid). The LM's and Continuous-Time Attention's own jobs stay at their runtime;
- evaluation: each epoch evaluates the validation split, at one third of a training step's cost per
  example (forward only), plus one test pass per job;
- wall-clock: the makespan of a greedy longest-job-first list schedule of the jobs' estimated times on
  N GPUs (each job on its `gpu` count of them), the standard estimate (within 4/3 of the best schedule).
  A job longer than its `runtime` is stopped at the limit and resumes from its checkpoint on the retry,
  which asks for attempt × runtime, at most `cluster.max_runtime` (a pack: K runs' runtime / pack_gain,
  as the workflow asks Slurm): it needs the attempts shown, and with more than
  retries + 1 it fails (listed), its time then counted up to its last attempt. Queueing, data preparation
  and the report are not included;
- disk: per job metrics.json (~50 kB) and model.safetensors (4 bytes per parameter); while a job trains,
  its checkpoint (weights, AdamW moments, best weights: 16 bytes per parameter);
- padding: from the processed length arrays (so only with a manifest), over one epoch of the job's batch
  size, with the task's `train.length_buckets` or, where it is off, REFERENCE_BUCKETS buckets.
""".replace("{cpu_budget}", f"{CPU_STEP_BUDGET_S:g} s").replace("{min_timed}", f"{MIN_TIMED_S:g} s")

SMOKE_DESCRIPTION = """\
`pdelra smoke CONFIG`: a one-job GPU smoke test before the campaign (`srun --gpus 1 pdelra smoke CONFIG`).

One line per check, in this order, stopping at the first failure (exit 1, the last line naming it): CUDA is
visible to torch (when a training job asks for a GPU), this GPU runs bf16 (a matmul under bf16 autocast, as
the jobs train), then per LRA task the selected grids train: one optimizer step (forward under the jobs'
autocast, loss, backward, gradient clipping, AdamW) of the task's baseline model at its train.batch_size (or
train.micro_batch_size) and max_length on random tokens, with a finite loss and gradient norm. `--device cpu`
runs the steps on the CPU and says that the GPU checks were skipped.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    register_config(subparsers)
    register_plan(subparsers)
    register_smoke(subparsers)


def register_config(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "config",
        help="check config files as the workflow does (YAML syntax with its line, schema, grids, models)",
        description=CONFIG_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = sub.add_parser(
        "check",
        help="every problem of each FILE the workflow would refuse (YAML syntax with FILE:LINE:COLUMN)",
    )
    check.add_argument("files", nargs="+", type=Path, metavar="FILE", help="config files (YAML)")
    check.set_defaults(handler="pdelra.planning.config_check:check_command")


def register_plan(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="jobs, optimizer steps, device-hours, wall-clock, disk and peak memory a config will cost",
        description=PLAN_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", type=Path, help="workflow config (e.g. config/config.yaml)")
    add_cost_arguments(parser)
    parser.set_defaults(handler="pdelra.planning.plan:run")


def register_smoke(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "smoke",
        help="before a campaign, on a GPU node: CUDA visible, bf16 autocast, one training step of each task",
        description=SMOKE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", type=Path, help="workflow config (e.g. config/config.yaml)")
    parser.add_argument(
        "--device",
        choices=("auto", "cuda", "cpu"),
        default="auto",
        help="cuda: the GPU checks and the steps on the GPU (fails without one); cpu: the steps on the CPU, "
        "GPU checks skipped; auto (default): cuda when a training job asks for a GPU or one is visible "
        "(cpu where none is and PDELRA_ALLOW_CPU=1); a node without CUDA is recorded in $PDELRA_BAD_NODES",
    )
    parser.set_defaults(handler="pdelra.planning.smoke:run")


def add_cost_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the cost plan (the default action of `pdelra plan`)."""
    parser.add_argument(
        "--device",
        default="auto",
        help="where to calibrate: cuda, cpu, or auto (cuda when available; without it the tasks whose jobs "
        "ask for a GPU are not timed on the CPU)",
    )
    parser.add_argument(
        "--gpus", type=int, default=1, help="training jobs at a time (GPUs they share), for the wall-clock"
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=None,
        help=f"resubmissions of a job that ran out of time (default: `retries` of {SLURM_PROFILE}, else "
        f"{DEFAULT_RETRIES})",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"timed calibration steps per batch size, after {WARMUP_STEPS} warm-up step(s), and more while "
        f"they take less than {MIN_TIMED_S:g} s; their median counts (default: {DEFAULT_STEPS['cuda']} on a "
        f"GPU, {DEFAULT_STEPS['cpu']} on the CPU)",
    )
    parser.add_argument(
        "--max-calibration-batch",
        type=int,
        default=None,
        help="time at most this many examples per step (default: the job's batch; on a GPU halved until it "
        "fits, then scaled up linearly; on the CPU, the largest batch whose step takes at most "
        f"{CPU_STEP_BUDGET_S:g} s, its time beyond a step's fixed cost scaled up linearly to the job's)",
    )
    parser.add_argument(
        "--no-calibration", action="store_true", help="jobs and steps only (and finished runs' times)"
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help="results/{experiment} folder with finished runs (default: that of the config's experiment)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help=f"calibrate afresh (default: reuse the calibrations in RESULTS/{CACHE_NAME} made with the "
        "same model, batch, code, torch, device and threads, and add new ones to it)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads for the CPU calibration (default: each task's train.num_threads, else "
        "$SLURM_CPUS_PER_TASK, else the CPU affinity: what its training jobs use)",
    )
    parser.add_argument(
        "--gpu",
        default=None,
        metavar="MODEL",
        help="estimate the LRA jobs that no finished run or calibration times on this GPU model (A100, H100, "
        "H200, L40S, ...: pdelra.planning.flops.GPU_PEAK_TFLOPS) from their FLOPs: 3 x forward per step, at "
        "the datasheet's bf16 dense peak x a utilisation fitted to finished runs or a calibration on that "
        "model, else the default from the H200 calibration of the paper grid (source `flops`); also "
        "prints the requested GPU-hours and those the estimate x cluster.runtime_margin would ask for",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the plan to this JSON file")
    parser.add_argument(
        "--power",
        action="store_true",
        help="also: the seeds each claim of the config needs for 80 %% power at its planned Holm level "
        "(the paper's claims on the cells the config runs, at the paper's effect; your own variants', at "
        "the effect of the paper's diffusion at their position or the pilot's; the rest listed as not "
        "planned), the smallest effect the config's seeds detect, and what 3-20 seeds cost in device-hours "
        "of the plan's LRA training jobs, finished ones included (pdelra.results.seeds)",
    )
    parser.add_argument(
        "--effect",
        type=float,
        default=None,
        metavar="X",
        help="with --power: the effect, in accuracy (0.01 = 1 pp), your own variants' claims are planned at: "
        "the one you care about (default: the config's power_effect; else the pilot's where its 95 %% "
        "interval is clear of 0, else the paper's diffusion at the variant's position)",
    )
    parser.add_argument(
        "--tables",
        type=Path,
        default=None,
        metavar="PILOT",
        help="with --power: a pilot's tables folder (its runs.csv): each task's run-to-run spread from its "
        "runs (the mean of its main grid's cell variances, where three cells or more have one), else Table "
        "15's; your own variants' comparisons take the pilot's own spread of each, or the table says why not",
    )
