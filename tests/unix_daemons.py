"""A listening pathname UNIX socket on the host, standing in for a daemon (an ssh agent, docker), for
the tests of the sandbox's socket allow-list."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

__all__ = ["Daemon"]


class Daemon:
    """A listening pathname socket on the host that answers each connection with its own name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(64)
        self.accepted = 0
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            with connection:
                connection.sendall(self.path.name.encode())
