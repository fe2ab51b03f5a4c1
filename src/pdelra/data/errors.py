"""The one error type of the data layer: it names the file (and line or member) that is at fault."""

from __future__ import annotations

from pathlib import Path

from pdelra.errors import UserError


class DataError(UserError, ValueError):
    """Bad or missing input data. The message starts with `path[:line]: ` so a user can jump to it."""

    def __init__(self, path: str | Path | None, message: str, line: int | None = None) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        where = "" if path is None else (f"{path}:{line}: " if line is not None else f"{path}: ")
        super().__init__(where + message)
