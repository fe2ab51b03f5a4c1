"""`pdelra train`: one run of the paper's training recipe, resumable, writing RUN_DIR/metrics.json."""

from __future__ import annotations

import argparse
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
resumed_count. The checkpoint is removed once metrics.json is written.

Exit status: 0 when the run completed or diverged (a NaN/inf loss: metrics.json has status "diverged"
and diverged_at_step); 75 (EX_TEMPFAIL) when SIGTERM or SIGUSR1 stopped it after the current step with a
checkpoint (rerun to resume); 2 for an invalid run config or data folder.

Device: CUDA when available (bf16 autocast, fused SDPA kernels, pinned-memory copies, torch.compile if
`compile: true`); otherwise CPU with train.num_threads, else $SLURM_CPUS_PER_TASK, else the CPU affinity.
"""

RUN_CONFIG_HELP = """\
the run's config: a JSON/YAML file, or inline JSON starting with '{'. Keys: task, variant, scale, seed,
optional setting (default "base"; a name only: its overrides are already in model/train),
model {d_model, n_layers, n_heads, d_mlp, dropout, attn_dropout, alpha_init; optional: any other
ModelConfig field, e.g. cta_steps}, train {batch_size, lr,
betas, weight_decay, warmup_steps, max_epochs, max_steps, patience, grad_clip, eval_batch_size,
checkpoint_minutes, compile, num_threads; optional: checkpoint_every_steps, debug_nan_at_step}
"""


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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pdelra.data.errors import DataError
    from pdelra.training.runconfig import RunConfigError, load_run_config

    try:
        cfg = load_run_config(args.run_config)
        from pdelra.training.runner import train_run  # torch is imported only once the config is valid

        return train_run(cfg, args.data, args.out, args.checkpoint_dir)
    except (RunConfigError, DataError) as exc:
        log.error("%s", exc)
        return 2
