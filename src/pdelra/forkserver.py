"""A fork server for the heavy subcommands: pay for `import torch` once, not once per job.

Every `pdelra train` / `pdelra diagnose` process spends ~3-4 s importing torch and torch._dynamo (which
`torch.optim` pulls in) before it does any work: on a CPU demo of ~120 small jobs that is most of the wall
time. `pdelra forkserver run -- CMD …` starts a server that imports them once, runs CMD (e.g. snakemake)
with PDELRA_FORKSERVER=<socket> in its environment, and stops the server when CMD ends. While that
variable is set, `pdelra train|diagnose|lm|cta-official …` (the rules' unchanged shell lines) send their
arguments, working directory, environment and stdin/stdout/stderr file descriptors to the server, which forks
a fresh copy of itself to run the command there (`pdelra.cli.main(argv)`) and reports its exit status back.
The client side, in every `pdelra` process, is `pdelra.forkclient`.

The forked command behaves like a separate process: its own cwd, environment, output files (the rule's
`> {log} 2>&1`), exit status and signal handling (SIGTERM/SIGINT/SIGUSR1/SIGHUP sent to the client are
forwarded, so preemption still checkpoints and exits 75). If the client dies, the command is terminated.
If the server cannot be reached the client runs the command itself, so results never depend on it.

The server never runs a torch operation itself (no thread pools exist to be broken by fork); each command
seeds its own RNGs as usual, so its metrics equal those of a separate process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pdelra.builtin_parts import BUILTIN
from pdelra.cli import forked_commands, main
from pdelra.forkclient import ENV, FORWARDED_SIGNALS
from pdelra.operator_code import training_code

log = logging.getLogger(__name__)

# What the server imports once for every forked command: torch and the pipeline's trainer and diagnostics;
# each part adds the modules its forked commands run (pdelra.parts: PRELOAD, e.g. CTA's LM trainer).
PRELOAD = (
    "torch",
    "torch._dynamo",
    "torch.optim",
    "pdelra.training.runner",
    "pdelra.nn.model",
    "pdelra.steps.diagnose",
)
_MAX_REQUEST = 4 * 2**20


def _recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, _MAX_REQUEST + 8, 3)
    size = int.from_bytes(data[:8], "big")
    body = data[8:]
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise ConnectionError("request cut short")
        body += more
    return json.loads(body), list(fds)


def _run_command(request: dict[str, Any], fds: list[int]) -> None:
    """In the grandchild: become the command's process and run it; never returns."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({k: v for k, v in request["env"].items() if k != ENV})  # never delegate again
        for s in (*FORWARDED_SIGNALS, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(s, signal.SIG_DFL if s != signal.SIGINT else signal.default_int_handler)
        sys.argv = ["pdelra", *request["argv"]]
        logging.root.handlers.clear()  # the command configures logging afresh, onto the new stderr
        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # a crash must look like a crashed process: traceback on its stderr, status 1
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(int(code) & 0xFF)


def _handle(conn: socket.socket) -> None:
    """In the per-request child: fork the command, relay signals, report its exit status; never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        request, fds = _recv_request(conn)
    except (OSError, ValueError, ConnectionError):
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run_command(request, fds)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    buffer = b""
    while True:
        ready, _, _ = select.select([conn, pidfd], [], [])
        if pidfd in ready:
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # killed by signal N → 128 + N, as a shell reports it
            try:
                conn.sendall(f"exit {code}\n".encode())
            finally:
                os._exit(0)
        chunk = conn.recv(256)
        if not chunk:  # the client is gone: so must the command be
            _terminate(pid)
            os._exit(0)
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            parts = line.split()
            if len(parts) == 2 and parts[0] == b"signal":
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, int(parts[1]))


def _terminate(pid: int, grace_s: float = 10.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def serve(path: Path, ready_fd: int | None = None) -> None:
    """Import the heavy modules, then fork one child per request until SIGTERM."""
    import importlib

    for name in (*PRELOAD, *(module for part in BUILTIN for module in part.preload)):
        importlib.import_module(name)
    # The digest of the training code, once here rather than in every forked run: `training_code` parses
    # the ~100 modules a training process imports (about 0.6 s, a third of a demo ListOps run's CPU), and
    # caches it per process, so each child inherits it. The children run the code imported above.
    training_code()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # request children are reaped automatically
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if ready_fd is not None:
        os.write(ready_fd, b"ready\n")
        os.close(ready_fd)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except InterruptedError:
                continue
            if os.fork() == 0:  # never return into this loop (or its finally) from a request child
                try:
                    server.close()
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    _handle(conn)
                finally:
                    os._exit(1)
            conn.close()
    finally:
        server.close()
        path.unlink(missing_ok=True)


def run_with_server(command: list[str]) -> int:
    """Start a server, run `command` with PDELRA_FORKSERVER set, stop the server; command's exit status."""
    with tempfile.TemporaryDirectory(prefix="pdelra-fork.") as tmp:
        path = Path(tmp) / "socket"
        read_end, write_end = os.pipe()
        server = subprocess.Popen(
            [sys.executable, "-m", "pdelra.forkserver", "serve", str(path), str(write_end)],
            pass_fds=(write_end,),
        )
        os.close(write_end)
        with os.fdopen(read_end) as ready:
            if ready.readline().strip() != "ready":
                server.wait()
                log.warning("the fork server did not start: running the command without it")
                return subprocess.call(command)
        try:
            return subprocess.call(command, env={**os.environ, ENV: str(path)})
        finally:
            server.terminate()
            server.wait(timeout=30)


# ----------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------
def run_command(args: argparse.Namespace) -> int:
    """`pdelra forkserver run -- COMMAND`."""
    command = [c for c in args.command if c != "--"]
    if not command:
        log.error("give the command to run, e.g. `pdelra forkserver run -- snakemake ...`")
        return 2
    return run_with_server(command)


def register(subparsers: Any) -> None:
    # Declared here, not in a thin cli module: this module imports only the standard library and the light
    # pdelra.cli (whose main a forked command runs).
    parser = subparsers.add_parser(
        "forkserver",
        help="run a command (e.g. snakemake) with a fork server that imports torch once for all jobs",
        description=(
            "Start a server that imports torch and the training code once, run COMMAND with "
            f"{ENV} set so that every `pdelra {'|'.join(forked_commands())}` it starts is forked from that "
            "server instead of importing torch again (~3-4 s each), then stop the server. Results are those "
            "of separate processes; without a reachable server each command simply runs by itself."
        ),
    )
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="run COMMAND with a fork server")
    run.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments, after --")
    run.set_defaults(handler="pdelra.forkserver:run_command")


if __name__ == "__main__":  # the server process: python -m pdelra.forkserver serve SOCKET READY_FD
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit("usage: python -m pdelra.forkserver serve SOCKET READY_FD")
