"""`pdelra train`: one run of the paper's training recipe, resumable, writing RUN_DIR/metrics.json."""

from __future__ import annotations

import argparse
import functools
import importlib
import logging
from pathlib import Path

log = logging.getLogger("pdelra.training")

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

DEVICES = ("auto", "cuda", "cpu")


def _run_config_help() -> str:
    """--run-config's help, its keys read from the run-config schema (so the help names every key)."""
    from pdelra.training.runconfig import REQUIRED_MODEL_KEYS, REQUIRED_TRAIN_KEYS, SCHEMA

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
    parser.set_defaults(func=run)


def add_lm_train_arguments(
    parser: argparse.ArgumentParser, trainer_module: str, run_config_help: str, data_help: str
) -> None:
    """The arguments of an LM trainer's command (`pdelra lm train`, `pdelra cta-official train-lm`), run by
    `trainer_module.train_from_args`, imported only when the command runs (it imports torch)."""
    parser.add_argument("--run-config", required=True, metavar="FILE_OR_JSON", help=run_config_help)
    parser.add_argument("--data", type=Path, required=True, help=data_help)
    parser.add_argument("--out", type=Path, required=True, help="run folder for metrics.json")
    parser.add_argument("--checkpoint-dir", type=Path, required=True, help="checkpoint folder")
    add_device_arguments(parser)
    parser.set_defaults(func=functools.partial(_train_lm, trainer_module))


def _train_lm(trainer_module: str, args: argparse.Namespace) -> int:
    """One LM run; a bad run config or data folder is one line and exit 2."""
    from pdelra.data.errors import DataError
    from pdelra.training.runconfig import RunConfigError

    try:
        train_from_args = importlib.import_module(trainer_module).train_from_args
        return train_from_args(
            args.run_config, args.data, args.out, args.checkpoint_dir, args.device, args.allow_cpu
        )
    except (RunConfigError, DataError) as exc:
        log.error("%s", exc)
        return 2


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


def run(args: argparse.Namespace) -> int:
    from pdelra.data.errors import DataError
    from pdelra.training.runconfig import RunConfigError, load_run_config

    try:
        cfg = load_run_config(args.run_config)
        # torch is imported only once the config is valid
        from pdelra.training.device import DeviceError, choose_device
        from pdelra.training.runner import train_run

        try:  # before the data, the lock or the checkpoint folder: a wrong machine fails in seconds
            device = choose_device(args.device, args.allow_cpu)
        except DeviceError as exc:
            raise RunConfigError(str(exc)) from exc
        return train_run(cfg, args.data, args.out, args.checkpoint_dir, device)
    except (RunConfigError, DataError) as exc:
        log.error("%s", exc)
        return 2
