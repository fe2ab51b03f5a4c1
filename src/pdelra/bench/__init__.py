"""`pdelra bench`: benchmarks that print figures and ratios measured side by side in one process.

They are not tests: speed goals are judged from their printed ratios, never from timed assertions that
flake on a noisy machine.
"""

from __future__ import annotations

import argparse
import importlib

# subcommand name -> module providing add_arguments(parser) and run(args) -> int
BENCHMARKS = {
    "train-step": "pdelra.bench.train_step",
    "layer": "pdelra.bench.layer",
    "preprocess": "pdelra.bench.preprocess",
    "workflow-scale": "pdelra.bench.workflow_scale",
    "buckets": "pdelra.bench.buckets",
    "pack": "pdelra.bench.pack",
    "cta-block": "pdelra.bench.cta_block",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help=f"run a benchmark ({', '.join(BENCHMARKS)})",
        description=__doc__,
    )
    benches = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        summary = " ".join(module.__doc__.strip().split("\n\n")[0].split())  # the whole first paragraph
        sub = benches.add_parser(name, help=summary, description=module.__doc__)
        module.add_arguments(sub)
        sub.set_defaults(func=module.run)
