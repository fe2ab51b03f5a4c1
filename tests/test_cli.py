"""The `pdelra` command: every subcommand's handler resolves, and declaring the commands stays cheap."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from collections.abc import Iterator

from pdelra.cli import build_parser


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every runnable command line prefix (`train`, `diagnose run`, `bench layer`, ...) with its parser."""
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield path, parser
        return
    for name, child in subcommands[0].choices.items():
        yield from _leaves(child, (*path, name))


def test_every_subcommand_names_a_handler_that_imports_and_is_callable() -> None:
    leaves = list(_leaves(build_parser()))
    assert len(leaves) > 20  # data, training, steps, planning, LM, CTA-official, bench, forkserver
    for path, parser in leaves:
        spec = parser.get_default("handler")
        assert isinstance(spec, str) and spec.count(":") == 1, f"pdelra {' '.join(path)}: handler {spec!r}"
        module, function = spec.split(":")
        assert callable(getattr(importlib.import_module(module), function)), f"pdelra {' '.join(path)}"


def test_declaring_the_commands_imports_no_torch_numpy_or_pandas() -> None:
    # `pdelra --help` and the data rules must not pay for the model stack: the thin cli modules are argparse.
    code = (
        "import sys; from pdelra.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'numpy', 'pandas', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
