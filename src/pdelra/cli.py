"""The one `pdelra` command: every pipeline step is a subcommand, so each rule's shell line reads like a
sentence and any step can also be run by hand.

Each package has a thin `cli` module that declares its subcommands and names each one's handler as a string,
"module:function" (`set_defaults(handler=...)`). Only the chosen handler's module is imported, when it runs:
`pdelra --help` and the data rules do not pay for the model stack, and the implementation modules import
what they need at their top.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable

from pdelra import __version__, forkclient, tasks
from pdelra.builtin_parts import BUILTIN  # the built-in parts, declared to the registry (pdelra.parts)
from pdelra.errors import UserError
from pdelra.importing import import_callable

# Each module exposes `register(subparsers)`, adding its subcommand(s) with
# `set_defaults(handler="module:function")`: a function of the parsed arguments returning the exit status.
SUBCOMMAND_MODULES = (
    "pdelra.data.cli",  # generate, fetch, extract, preprocess, preprocess-cta, subset, data-summary
    "pdelra.training.cli",  # train, train-pack (K runs of a grid cell side by side on one GPU)
    "pdelra.steps.cli",  # aggregate, diagnose run | table, report, version
    "pdelra.results.cli",  # claims --tables DIR (claims.csv from aggregated tables)
    "pdelra.bench.cli",  # bench
    "pdelra.planning.cli",  # config check FILE (YAML syntax, schema); plan (jobs, device-hours, disk)
    "pdelra.forkserver",  # forkserver run -- CMD (one torch import for many jobs)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pdelra",
        # `pdelra aggregate --out T @FILE` reads arguments from FILE, one a line: the workflow gives the paths
        # of 10,000s of runs this way (one command line may not exceed 128 KiB).
        fromfile_prefix_chars="@",
        description=(
            "Reproduce 'Where to Add PDE Diffusion in Transformers' on the Long Range Arena. "
            "Each subcommand is one step of the Snakemake workflow; "
            "run `pdelra SUBCOMMAND --help` for its options."
        ),
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"pdelra {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    # Each built-in part's own (pdelra.parts, its `register`): lm prepare | train | aggregate (PhysQK-AD's LM
    # experiment), cta-official aggregate | train-lm (Continuous-Time Attention's own); a part without one
    # runs through `pdelra part run|aggregate` (pdelra.steps.cli).
    for part in BUILTIN:
        if part.register:
            part.register(subparsers)
    return parser


def forked_commands() -> tuple[str, ...]:
    """The subcommands worth forking from the fork server (they import torch): the pipeline's own and those
    each built-in part declares (pdelra.parts: FORKED)."""
    return (*forkclient.FORKED_COMMANDS, *(command for part in BUILTIN for command in part.forked))


def handler_of(args: argparse.Namespace) -> Callable[[argparse.Namespace], int | None]:
    """The function that runs the chosen subcommand, its module imported now (only that one)."""
    return import_callable(args.handler, "handler")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if forkclient.wants_server(argv, forked_commands()):  # PDELRA_FORKSERVER set: fork from one with torch
        code = forkclient.delegate(argv)
        if code is not None:
            return code
    # A config's own tasks (its task_modules, passed by the workflow through the environment): registered
    # before the parser, whose choices and defaults may name them, and before any step reads the registry.
    try:
        tasks.load_environment()
    except ValueError as err:
        print(f"pdelra: {err} (named by ${tasks.MODULES_ENV})", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(handler_of(args)(args) or 0)
    except UserError as err:
        logging.getLogger("pdelra").error("%s", err)
        return 1


if __name__ == "__main__":
    sys.exit(main())
