"""`pdelra part run NAME` and `pdelra part aggregate NAME`: the generic steps of a part that has no .smk file
and no subcommand of its own (pdelra.parts, `workflow = GENERIC`; workflow/rules/parts.smk runs them).

`run` hands one job's run config (the TrainingJob's, as the planner counted it) to the part's `run`, which
writes the run folder's `run_file`, and records the job's wall time beside it (pdelra.parts.TIMING_FILE,
what the plan prices the part from); `aggregate` hands the run files to its `build`, which writes its tables.
A config's own part is named by `--part MODULE`, as the config's `parts` list registers it."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from pdelra import parts
from pdelra.atomic import write_json_atomic
from pdelra.errors import UserError

log = logging.getLogger(__name__)


class PartError(UserError, ValueError):
    """No such part, or the part did not write what it declares."""


def part_of(args: argparse.Namespace) -> parts.Part:
    """The registered part `args.name` (the built-in ones and those `--part` names)."""
    try:
        found = parts.by_name({"parts": args.part})
    except ValueError as err:
        raise PartError(str(err)) from err
    if args.name not in found:
        raise PartError(f"no part {args.name!r}; registered: {', '.join(found)} (a config's own: --part)")
    return found[args.name]


def run_command(args: argparse.Namespace) -> int:
    """`pdelra part run NAME --run-config JSON --out DIR`: one job of the part."""
    part = part_of(args)
    if part.run is None:
        raise PartError(f"part {part.name} has no `run` (its jobs are its own rules')")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    part.run(json.loads(args.run_config), out, args.device)
    if not (out / part.run_file).is_file():
        raise PartError(f"part {part.name}'s run wrote no {out / part.run_file}")
    timing = {"wall_time_s": time.monotonic() - started, "device": args.device}
    write_json_atomic(out / parts.TIMING_FILE, timing)  # what `pdelra plan` prices its other jobs from
    log.info("part %s: %s", part.name, out / part.run_file)
    return 0


def aggregate_command(args: argparse.Namespace) -> int:
    """`pdelra part aggregate NAME --out TABLES RUN_FILE...`: the part's tables from its runs' files."""
    part = part_of(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    part.build([Path(f) for f in args.run_files], out)
    missing = [name for name in part.tables if not (out / f"{name}.csv").is_file()]
    if missing:
        raise PartError(f"part {part.name}'s builder wrote no {', '.join(missing)} in {out}")
    log.info("part %s: %d run(s) → %s", part.name, len(args.run_files), ", ".join(part.tables))
    return 0
