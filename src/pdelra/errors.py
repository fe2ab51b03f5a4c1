"""The project's one base for errors a user can fix."""

from __future__ import annotations


class UserError(Exception):
    """Bad input, config or environment that the user can fix; the message says what and where.

    `pdelra` prints the message as one line and exits with status 1 instead of showing a traceback; anything
    else that escapes a subcommand is a bug and keeps its traceback.
    """
