"""toolrt's side of the fork server: start it once per process, hand it one request per tool process.

The server is a child of toolrt started with `subprocess` (fork and exec done safely in C), so it is
single-threaded from its first instruction; see `forkserver` for what it does with a request. It
kills every process it started that is still running when toolrt closes its end of the control
socket, or dies (the kernel closes it then), and exits once they are reaped.

Runtimes hold it (`hold_fork_server`, taken by a Runtime's first call): it is closed, its process
ended and reaped, when the last holder lets go (`Runtime.close`, or the Runtime collected unclosed)
and no process runs on it (`running_on_fork_server`: closing it would kill them), and at interpreter
exit in any case, so nothing outlives toolrt and no warning is printed at exit.
A server started with no holder (a `run_process` outside any Runtime) lasts until the next last
holder lets go, or until the interpreter exits.
"""

from __future__ import annotations

import atexit
import json
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ForkServer",
    "KernelSupport",
    "close_fork_server",
    "fork_server",
    "hold_fork_server",
    "running_on_fork_server",
]

_HERE = str(Path(__file__).parent)
# Run as top-level modules from this directory: the package's __init__ imports third-party modules,
# which `-S` (no site-packages, for a fast start) cannot see.
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); import forkserver; sys.exit(forkserver.main(sys.argv[1:]))"
_HELLO_TIMEOUT = 20.0
_EXIT_TIMEOUT = 5.0
"""Seconds a closed server may take to reap the children it killed before it is killed itself (its
children, asked to die with it, follow)."""


@dataclass(frozen=True, slots=True)
class KernelSupport:
    """What the fork server found it can enforce on this machine."""

    landlock_abi: int
    """0: no Landlock."""
    mount_namespace: bool
    net_namespace: bool
    user_namespace: bool
    """True when the server had to enter a user namespace to get the others."""
    pid_namespace: bool = False


class ForkServer:
    """A running fork server and the control socket to it."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _BOOT, _HERE, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.control = ours
        ours.settimeout(_HELLO_TIMEOUT)
        try:
            hello = json.loads(ours.recv(4096) or b"null")
        except (OSError, ValueError) as error:
            self.close()
            raise OSError(f"the sandbox fork server did not start: {error}") from error
        if not isinstance(hello, dict):
            self.close()
            raise OSError(f"the sandbox fork server did not start (exit status {self.process.wait()})")
        ours.settimeout(None)
        self.support = KernelSupport(
            landlock_abi=int(hello["abi"]),
            mount_namespace=bool(hello["mount"]),
            net_namespace=bool(hello["net"]),
            user_namespace=bool(hello["userns"]),
            pid_namespace=bool(hello.get("pid")),
        )

    def submit(self, request: Mapping[str, Any], stdio: Sequence[int]) -> socket.socket:
        """Ask for one process with `stdio` as its fds 0, 1, 2; returns the status channel (see forkserver)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with theirs:
                socket.send_fds(self.control, [b"spawn"], [*stdio, theirs.fileno()])
            payload = json.dumps(request).encode()
            mine.sendall(struct.pack(">I", len(payload)) + payload)
        except BaseException:
            mine.close()
            raise
        return mine

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """Close the control socket and end the server: it kills the children still running, reaps them
        and exits. Idempotent."""
        self.control.close()
        try:
            self.process.wait(_EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_lock = threading.RLock()
"""Reentrant: creating the server can run a collected Runtime's finalizer in the same thread, whose release
takes it too (a plain lock deadlocked there)."""
_server: ForkServer | None = None
_holders = 0
_running = 0
"""Processes running on the server now: a close the last holder asked for waits until they end."""
_close_pending = False


def fork_server() -> ForkServer:
    """The process's fork server, started on first use and again if it ever died (or was closed).

    One per toolrt process: it serves every Runtime (each request carries its own policy)."""
    global _server
    with _lock:
        if _server is None or not _server.alive():
            if _server is not None:
                _server.close()  # died: reap it, close our end
            _server = ForkServer()
        return _server


def hold_fork_server() -> Callable[[], None]:
    """Count one more user of the fork server (started only when a process needs it); returns the
    idempotent release: the last release closes the server, once no process runs on it."""
    global _holders, _close_pending
    with _lock:
        _holders += 1
        _close_pending = False
    released = False

    def release() -> None:
        global _holders, _close_pending
        nonlocal released
        with _lock:
            if released:
                return
            released = True
            _holders -= 1
            _close_pending = not _holders
        _close_if_idle()

    return release


def running_on_fork_server() -> Callable[[], None]:
    """Count one more process running on the server; returns the idempotent end. The server closes only
    when no process runs on it: closing it kills its children (a Runtime collected while another one's
    process, or a process started without a Runtime, still ran would have ended that process)."""
    global _running
    with _lock:
        _running += 1
    ended = False

    def end() -> None:
        global _running
        nonlocal ended
        with _lock:
            if ended:
                return
            ended = True
            _running -= 1
        _close_if_idle()

    return end


def _close_if_idle() -> None:
    global _server, _close_pending
    server = None
    with _lock:
        if _close_pending and not _holders and not _running:
            server, _server, _close_pending = _server, None, False
    if server is not None:
        server.close()


def close_fork_server() -> None:
    """End the fork server if one is running (the next `fork_server()` starts a new one)."""
    global _server
    with _lock:
        server, _server = _server, None
    if server is not None:
        server.close()


atexit.register(close_fork_server)
