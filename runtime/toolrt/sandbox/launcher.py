"""toolrt's side of the fork server: start it once per process, hand it one request per tool process.

The server is a child of toolrt started with `subprocess` (fork and exec done safely in C), so it is
single-threaded from its first instruction; see `forkserver` for what it does with a request. It
exits when toolrt closes its end of the control socket (or dies) and its last child has exited.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ForkServer", "KernelSupport", "fork_server"]

_HERE = str(Path(__file__).parent)
# Run as top-level modules from this directory: the package's __init__ imports third-party modules,
# which `-S` (no site-packages, for a fast start) cannot see.
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); import forkserver; sys.exit(forkserver.main(sys.argv[1:]))"
_HELLO_TIMEOUT = 20.0


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
        """Let the server go: it exits once its running children have."""
        self.control.close()


_lock = threading.Lock()
_server: ForkServer | None = None


def fork_server() -> ForkServer:
    """The process's fork server, started on first use and again if it ever died.

    One per toolrt process: it serves every Runtime (each request carries its own policy)."""
    global _server
    with _lock:
        if _server is None or not _server.alive():
            _server = ForkServer()
        return _server
