"""`pdelra train-pack`: the K runs of one pack (`resources.pack: K`) side by side on one job's GPU, each its
own `pdelra train` process; what the command does and its exit status: pdelra.training.cli.PACK_DESCRIPTION.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from pdelra.training.interrupts import EXIT_INTERRUPTED, HANDLED_SIGNALS
from pdelra.training.runconfig import RunConfigError, read_run_config, validate_run_config

log = logging.getLogger("pdelra.training.pack")

LOG_TAIL_LINES = 20


@dataclass
class Member:
    seed: int
    config: dict[str, Any]
    out: Path
    checkpoint_dir: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None
    status: int | None = None


def members(config: dict[str, Any], seeds: list[int], args: argparse.Namespace) -> list[Member]:
    return [
        Member(
            seed=seed,
            config={**config, "seed": seed},
            out=args.out / f"seed{seed}",
            checkpoint_dir=args.checkpoint_dir / f"seed{seed}",
            log=args.log_dir / f"seed{seed}.log",
        )
        for seed in seeds
    ]


def train_pack_command(args: argparse.Namespace) -> int:
    """`pdelra train-pack` (pdelra.training.cli): a bad run config or seed list is one line and exit 2."""
    try:
        config, source = read_run_config(args.run_config)
        validate_run_config(config, source)  # before any process starts: a bad key fails once, here
    except RunConfigError as exc:
        log.error("%s", exc)
        return 2
    if len(set(args.seeds)) != len(args.seeds):
        log.error("--seeds: a seed appears twice (%s)", " ".join(map(str, args.seeds)))
        return 2
    pack = members(config, args.seeds, args)
    threads = args.threads or max(1, _job_cpus() // len(pack))
    return train_pack(pack, args.data, args.device, args.allow_cpu, threads)


def _job_cpus() -> int:
    given = os.environ.get("SLURM_CPUS_PER_TASK")
    return int(given) if given and given.isdigit() else len(os.sched_getaffinity(0))


def train_pack(pack: list[Member], data: Path, device: str, allow_cpu: bool, threads: int) -> int:
    """Start every member, wait for all (passing SIGTERM/SIGUSR1 on), report each; the pack's exit status."""
    for member in pack:
        member.out.parent.mkdir(parents=True, exist_ok=True)
        member.log.parent.mkdir(parents=True, exist_ok=True)
    received: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        for member in pack:
            if member.process is not None and member.process.poll() is None:
                member.process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in HANDLED_SIGNALS}
    try:
        for member in pack:
            if received:  # stopped while starting: the rest are left to the retry
                member.status = EXIT_INTERRUPTED
                continue
            member.process = _start(member, data, device, allow_cpu, threads)
            print(f"seed{member.seed}: pid {member.process.pid}, log {member.log}", flush=True)
        for member in pack:
            if member.process is not None:
                member.status = _exit_status(member.process.wait())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for member in pack:
        print(_outcome(member), flush=True)
        if member.status not in (0, EXIT_INTERRUPTED):
            _print_tail(member.log, sys.stdout)
    return pack_status([m.status or 0 for m in pack])


def _start(member: Member, data: Path, device: str, allow_cpu: bool, threads: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "pdelra.cli", "train"]
    command += ["--run-config", json.dumps(member.config, sort_keys=True, separators=(",", ":"))]
    command += ["--data", str(data), "--out", str(member.out), "--checkpoint-dir", str(member.checkpoint_dir)]
    command += ["--device", device] + (["--allow-cpu"] if allow_cpu else [])
    env = {**os.environ, "SLURM_CPUS_PER_TASK": str(threads)}  # each member's threads (training.device)
    with open(member.log, "ab") as log_file:  # the child keeps its own descriptor
        return subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env)


def _exit_status(returncode: int) -> int:
    """A shell's view of an exit: a process killed by signal N (the OOM killer: 9) is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def pack_status(statuses: list[int]) -> int:
    """0 when all succeeded; the first real failure's status; else 75 (interrupted: the retry resumes)."""
    failures = [s for s in statuses if s not in (0, EXIT_INTERRUPTED)]
    if failures:
        return failures[0]
    return EXIT_INTERRUPTED if EXIT_INTERRUPTED in statuses else 0


def _outcome(member: Member) -> str:
    if member.status == 0:
        try:
            metrics = json.loads((member.out / "metrics.json").read_text())
        except (OSError, ValueError):
            return f"seed{member.seed}: exit 0 but no readable {member.out / 'metrics.json'}"
        accuracy = metrics.get("test_accuracy")
        return (
            f"seed{member.seed}: {metrics.get('status')}, test accuracy {accuracy}, "
            f"{metrics.get('steps_run')} steps (metrics in {member.out})"
        )
    if member.process is None:
        return f"seed{member.seed}: not started (the pack was stopped first; a retry trains it)"
    if member.status == EXIT_INTERRUPTED:
        return f"seed{member.seed}: interrupted, checkpoint in {member.checkpoint_dir} (a retry resumes it)"
    return f"seed{member.seed}: failed with exit {member.status}; log {member.log}, its end:"


def _print_tail(path: Path, stream: IO[str]) -> None:
    try:
        lines = path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
    except OSError:
        return
    for line in lines:
        print(f"    {line}", file=stream)
    stream.flush()
