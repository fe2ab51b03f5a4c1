"""Subcommands `train` (one run of the paper's training recipe, resumable, writing RUN_DIR/metrics.json) and
`train-pack` (K runs side by side), and the arguments of the LM trainers' commands: declared here (argparse
only), run by the handlers they name (pdelra.training.commands, pdelra.training.pack), which import torch only
when a run starts."""

from __future__ import annotations

import argparse
from pathlib import Path

# Cheap (no torch): the keys that --run-config's help names.
from pdelra.training.runconfig import REQUIRED_MODEL_KEYS, REQUIRED_TRAIN_KEYS, SCHEMA

DESCRIPTION = """\
Train one run (task, variant, scale, setting, seed) with the recipe of paper Tables 8-9: AdamW (betas
0.9/0.98), linear warmup then cosine decay to 0 at the planned last step, weight decay, gradient clipping,
at most max_epochs epochs (optionally capped at max_steps), early stopping on validation accuracy, and test
accuracy measured with the best-validation weights. Writes RUN_DIR/metrics.json atomically.

Seeds: run seed n seeds Python, NumPy and PyTorch with 42+n, 0+n, 1+n (the paper's 42/0/1 at n=0).
Same seed and config on CPU give bit-identical metrics.

Resuming: a checkpoint is written atomically to CKPT_DIR every `checkpoint_minutes` of wall time (and
every `checkpoint_every_steps` steps if set) and at each epoch end. Rerunning the same command resumes
from it when its config hash and data manifest hash match this run (otherwise it is moved aside and the
run starts fresh). A resumed run's metrics equal an uninterrupted run's except the timing fields and
resumed_count. When the run ends its final files (model.safetensors, metrics.json) are written to
CKPT_DIR/finished/, the checkpoint is removed, and they are linked (else copied) into RUN_DIR; a rerun that
finds them (same config hash, data manifest hash and code version) restores them instead of training, so a
job killed after the run finished loses nothing. The workflow removes CKPT_DIR/finished/ once it has stored
the run's outputs; by hand, delete CKPT_DIR to train a finished run again.

Lock: one process a run. CKPT_DIR/lock is flocked; where the file system has no flock (ENOLCK on Lustre
mounted noflock or NFS without lockd) it is a lock file created with O_EXCL, holding "pid P on HOST since T"
and touched every 30 s; a waiting process breaks it when that pid on its own host is gone, or when it has not
changed for 10 minutes. The lock file is removed when the run ends.

Exit status: 0 when the run completed or diverged (a NaN/inf loss: metrics.json has status "diverged"
and diverged_at_step); 75 (EX_TEMPFAIL) when SIGTERM or SIGUSR1 stopped it after the current step with a
checkpoint (rerun to resume); 2 for an invalid run config or data folder, or --device cuda without CUDA.

Device (--device): cuda (bf16 autocast, fused SDPA kernels, pinned-memory copies, torch.compile if
`compile: true`), cpu (train.num_threads, else $SLURM_CPUS_PER_TASK, else the CPU affinity), or auto (the
default: CUDA when available). The workflow passes cuda for a job that reserved a GPU (resources.gpu >= 1)
and cpu otherwise. A run that asked for cuda on a machine without CUDA exits 2 before training, unless the
CPU is allowed on purpose: --allow-cpu, or PDELRA_ALLOW_CPU=1 in the environment (which reaches every job).
"""

PACK_DESCRIPTION = """\
`pdelra train-pack`: the K runs of one pack (`resources.pack: K`) side by side on one job's GPU.

Each member is its own `pdelra train` process (own threads, log, checkpoint folder and metrics.json): the
run config given with its seed replaced by each of --seeds; output PACK_DIR/seed{n}, checkpoint folder
CKPT_ROOT/seed{n}, log LOG_DIR/seed{n}.log, where an unpacked run has them. The launcher waits for all of
them and prints each member's outcome. It outlives the SIGTERM/SIGUSR1 that Slurm sends at preemption or
a time limit: it passes the signal on to the members still training, waits for each to checkpoint, and
exits 75 so that a retry resumes them.

Exit status: 0 when every member completed (or diverged, which is a result); otherwise the status of the
first member that failed for another reason than an interruption (a signal that killed it: 128 + its
number), else 75. A member that finished keeps its final state in its checkpoint folder (pdelra.training.
finished), so when Snakemake deletes the failed pack's folder, the pack's retry restores the finished
members instead of training them again and trains only the rest.
"""

DEVICES = ("auto", "cuda", "cpu")


def _run_config_help() -> str:
    """--run-config's help, its keys read from the run-config schema (so the help names every key)."""
    optional_train = sorted(set(SCHEMA["properties"]["train"]["properties"]) - set(REQUIRED_TRAIN_KEYS))
    return (
        "the run's config: a JSON/YAML file, or inline JSON starting with '{'. Keys: task, variant, scale, "
        'seed, optional setting (default "base"; a name only: its overrides are already in model/train), '
        f"model {{{', '.join(REQUIRED_MODEL_KEYS)}; optional: any other ModelConfig field, e.g. cta_steps}}, "
        f"train {{{', '.join(REQUIRED_TRAIN_KEYS)}; optional: {', '.join(optional_train)}}} "
        "(docs/interfaces.md, Run config)"
    )


RUN_CONFIG_HELP = _run_config_help()


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train one run and write its metrics.json (resumable; exit 75 = interrupted, rerun to resume)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run-config", required=True, metavar="FILE_OR_JSON", help=RUN_CONFIG_HELP)
    parser.add_argument(
        "--data",
        required=True,
        type=Path,
        metavar="PROCESSED_TASK_DIR",
        help="processed task folder with manifest.json and {train,val,test}_*.npy (pdelra preprocess)",
    )
    parser.add_argument("--out", required=True, type=Path, metavar="RUN_DIR", help="where metrics.json goes")
    parser.add_argument(
        "--checkpoint-dir",
        required=True,
        type=Path,
        metavar="CKPT_DIR",
        help="where checkpoints go; keep it outside the Snakemake rule's declared outputs",
    )
    add_device_arguments(parser)
    parser.set_defaults(handler="pdelra.training.commands:train_command")

    parser = subparsers.add_parser(
        "train-pack",
        help="train the K runs of a pack side by side (one `pdelra train` each); exit 75 = interrupted",
        description=PACK_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--run-config",
        required=True,
        metavar="FILE_OR_JSON",
        help="the members' run config; its seed is replaced by each of --seeds. " + RUN_CONFIG_HELP,
    )
    parser.add_argument("--seeds", required=True, type=int, nargs="+", help="the members' seeds")
    parser.add_argument("--data", required=True, type=Path, metavar="PROCESSED_TASK_DIR", help="as train's")
    parser.add_argument(
        "--out", required=True, type=Path, metavar="PACK_DIR", help="members' seed{n}/ go here"
    )
    parser.add_argument(
        "--checkpoint-dir",
        required=True,
        type=Path,
        metavar="CKPT_ROOT",
        help="members' checkpoint folders CKPT_ROOT/seed{n} (outside the rule's declared outputs)",
    )
    parser.add_argument(
        "--log-dir", required=True, type=Path, metavar="LOG_DIR", help="members' logs LOG_DIR/seed{n}.log"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads of each member (its SLURM_CPUS_PER_TASK; default: this job's, divided by K)",
    )
    add_device_arguments(parser)
    parser.set_defaults(handler="pdelra.training.pack:train_pack_command")


def add_lm_train_arguments(
    parser: argparse.ArgumentParser, trainer_module: str, run_config_help: str, data_help: str
) -> None:
    """The arguments of an LM trainer's command (`pdelra lm train`, `pdelra cta-official train-lm`), run by
    pdelra.training.commands.train_lm_command with `trainer_module.train_from_args`, imported only when the
    command runs (it imports torch)."""
    parser.add_argument("--run-config", required=True, metavar="FILE_OR_JSON", help=run_config_help)
    parser.add_argument("--data", type=Path, required=True, help=data_help)
    parser.add_argument("--out", type=Path, required=True, help="run folder for metrics.json")
    parser.add_argument("--checkpoint-dir", type=Path, required=True, help="checkpoint folder")
    add_device_arguments(parser)
    parser.set_defaults(handler="pdelra.training.commands:train_lm_command", lm_trainer=trainer_module)


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """--device and --allow-cpu, shared by `pdelra train` and `pdelra lm train`."""
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help="cuda: refuse to start without CUDA (what the workflow passes when a job reserved a GPU); "
        "cpu; auto (default): CUDA when available",
    )
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="with --device cuda, train on the CPU where there is no CUDA (also: PDELRA_ALLOW_CPU=1)",
    )
