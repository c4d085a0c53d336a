"""The watchdog: ends the sandboxed processes toolrt started from its own threads when toolrt ends, even
by SIGKILL, when nothing in toolrt runs any more.

A process the thread launcher starts is the init of a PID namespace of its own: when it ends, everything
in the namespace ends. But its parent is a thread of toolrt that exits at once, so no parent-death
signal can tie it to toolrt; killed without cleanup (SIGKILL, or SIGHUP when the person closes the
terminal), toolrt would leave it running in the call's sandbox, writing after its lifetime in the
attribution journal ended. The watchdog is a small process of its own, started once per toolrt process
(`python -I -S`, standard library only, like the fork server): toolrt hands it a pidfd of each process
it starts (`watch`), and when toolrt's end of the control socket closes (toolrt exited or was killed:
the kernel closes it either way) it sends SIGKILL through every pidfd still open, then exits. A pidfd
names exactly that process, never a later one with a recycled pid; one whose process ended is closed
as soon as it is seen.

The fork server does the same for its own children (see `forkserver`).
"""

from __future__ import annotations

import atexit
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["close_watchdog", "main", "start_watchdog", "watch"]

_HERE = str(Path(__file__).parent)
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); import watchdog; sys.exit(watchdog.main(sys.argv[1:]))"
_HELLO_TIMEOUT = 20.0


def main(argv: list[str]) -> int:
    """The watchdog process: `argv[1]` is its end of the control socket."""
    control = socket.socket(fileno=int(argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for toolrt, which tells us by exiting
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    held: set[int] = set()
    control.send(b"ready")
    while True:
        for key, _ in selector.select():
            if key.fileobj is not control:  # a process ended: forget it
                selector.unregister(key.fd)
                held.discard(key.fd)
                os.close(key.fd)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(control, 16, 64)
            except OSError:
                message, fds = b"", []
            for fd in fds:
                held.add(fd)
                selector.register(fd, selectors.EVENT_READ)
            if not message:  # toolrt is gone
                for fd in held:
                    try:
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                    except OSError:
                        pass  # ended already
                return 0


class _Watchdog:
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
            hello = ours.recv(16)
        except OSError as error:
            self.close()
            raise OSError(f"the sandbox watchdog did not start: {error}") from error
        if hello != b"ready":
            self.close()
            raise OSError(f"the sandbox watchdog did not start (exit status {self.process.poll()})")
        ours.settimeout(None)

    def watch(self, pid: int) -> None:
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(self.control, [b"w"], [pidfd])
        finally:
            os.close(pidfd)

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_lock = threading.Lock()
_watchdog: list[_Watchdog] = []


def start_watchdog() -> None:
    """Start the watchdog if it is not running (before a process is started: `watch` is then one send).

    Raises:
        OSError: it could not be started (the process must then not be started)."""
    with _lock:
        if _watchdog and _watchdog[0].process.poll() is not None:
            _watchdog.pop().close()
        if not _watchdog:
            _watchdog.append(_Watchdog())


def watch(pid: int) -> None:
    """Have the watchdog end process `pid` if toolrt ends before it does.

    Raises:
        OSError: the watchdog could not be started or told (the caller must then end the process)."""
    start_watchdog()
    with _lock:
        _watchdog[0].watch(pid)


def close_watchdog() -> None:
    """End the watchdog, and with it every process it still watches (at interpreter exit)."""
    with _lock:
        if _watchdog:
            _watchdog.pop().close()


atexit.register(close_watchdog)
