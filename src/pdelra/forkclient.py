"""The client side of the fork server (`pdelra.forkserver`), inside every `pdelra` process: whether a command
goes to the server (PDELRA_FORKSERVER is set and the subcommand is a heavy one), and sending it there with
its working directory, environment and standard streams, forwarding signals, and returning its exit status.
Standard library only, so that `pdelra.cli` can ask it before importing anything heavy."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys

log = logging.getLogger(__name__)

ENV = "PDELRA_FORKSERVER"
# The pipeline's own heavy subcommands; each part adds those it declares (pdelra.parts: FORKED), given to
# `wants_server` by pdelra.cli, so this module names no system.
FORKED_COMMANDS = ("train", "diagnose")
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP)


def wants_server(argv: list[str], forked: tuple[str, ...] = FORKED_COMMANDS) -> bool:
    """True when PDELRA_FORKSERVER is set and argv's subcommand is one worth forking (`forked`)."""
    if not os.environ.get(ENV):
        return False
    command = next((a for a in argv if not a.startswith("-")), None)
    return command in forked


def delegate(argv: list[str]) -> int | None:
    """Run `pdelra argv` in the fork server; its exit status, or None when the server is unreachable."""
    path = os.environ[ENV]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError as exc:
        log.warning("fork server %s unreachable (%s): running the command in this process", path, exc)
        conn.close()
        return None
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    socket.send_fds(conn, [len(request).to_bytes(8, "big") + request], [0, 1, 2])
    previous = {s: signal.signal(s, lambda num, _frame: _forward(conn, num)) for s in FORWARDED_SIGNALS}
    try:
        reply = b""
        while not reply.endswith(b"\n"):
            try:
                chunk = conn.recv(64)
            except InterruptedError:
                continue
            if not chunk:
                log.error("the fork server closed the connection before the command finished")
                return 1
            reply += chunk
        return int(reply.decode().split()[1])
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        conn.close()


def _forward(conn: socket.socket, signum: int) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(f"signal {int(signum)}\n".encode())


# ----------------------------------------------------------------------------------------------------
# Server side
# ----------------------------------------------------------------------------------------------------
