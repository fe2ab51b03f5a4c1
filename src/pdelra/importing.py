"""A user's code named in a config as "module:attr" (an operator of a config variant, pdelra.nn.model; a
task's generator or reader, pdelra.tasks) or as a module (a config's `task_modules` and `parts`), imported
with every failure said in one line.

The module is found on sys.path or, failing that, as a file or package in the working directory: the
workflow's jobs run there (the project root, where a user keeps `myops.py`), and `pdelra` runs as a console
script, which does not put the working directory on sys.path."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def import_callable(spec: str, what: str = "callable") -> Callable[..., Any]:
    """The callable `attr` of `module` named by "module:attr"; ValueError names the spec and the problem (no
    colon, a module that does not import and why, an attribute it lacks, something not callable)."""
    found = import_object(spec, what)
    if not callable(found):
        kind = type(found).__name__
        raise ValueError(f"{what} {spec!r}: {spec.partition(':')[2]!r} is a {kind}, not callable")
    return found


def import_object(spec: str, what: str = "object") -> Any:
    """The attribute `attr` of `module` named by "module:attr"; ValueError as import_callable's."""
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        raise ValueError(f"{what} {spec!r}: write it as 'module:attr'")
    try:
        module = import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module raises while importing
        raise ValueError(
            f"{what} {spec!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        found = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{what} {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
    return found


def import_module(module_name: str) -> Any:
    """importlib.import_module, retried with the working directory on sys.path when the top-level package
    is what was not found there."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = str(Path.cwd())
        if exc.name != module_name.split(".")[0] or here in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(module_name)
