"""The handlers of `pdelra train` and of the LM trainers' commands (`pdelra lm train`, `pdelra cta-official
train-lm`), declared in pdelra.training.cli: a bad run config or data folder is one line and exit 2."""

from __future__ import annotations

import argparse
import importlib
import logging

from pdelra.data.errors import DataError
from pdelra.training.runconfig import RunConfigError, load_run_config

log = logging.getLogger("pdelra.training")


def train_command(args: argparse.Namespace) -> int:
    """`pdelra train`: the run config is checked before torch is imported, the device before the data."""
    try:
        cfg = load_run_config(args.run_config)
        # Imported here on purpose: torch (seconds) only once the run config is valid: a bad one fails fast.
        from pdelra.training import device, runner

        try:  # before the data, the lock or the checkpoint folder: a wrong machine fails in seconds
            chosen = device.choose_device(args.device, args.allow_cpu)
        except device.DeviceError as exc:
            raise RunConfigError(str(exc)) from exc
        return runner.train_run(cfg, args.data, args.out, args.checkpoint_dir, chosen)
    except (RunConfigError, DataError) as exc:
        log.error("%s", exc)
        return 2


def train_lm_command(args: argparse.Namespace) -> int:
    """One LM run by the trainer module the subcommand named (`lm_trainer`, its `train_from_args`)."""
    try:
        trainer = importlib.import_module(args.lm_trainer)  # the named trainer only (it imports torch)
        return trainer.train_from_args(
            args.run_config, args.data, args.out, args.checkpoint_dir, args.device, args.allow_cpu
        )
    except (RunConfigError, DataError) as exc:
        log.error("%s", exc)
        return 2
