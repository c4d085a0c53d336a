"""The warden: a helper process that ends what the thread launcher started when toolrt dies.

A process the thread launcher starts is toolrt's own child, the init of a PID namespace of its own
(see `namespaces.enter_from_thread`). Its parent-death signal cannot be set (no Python may run
between fork and exec in a threaded process, and it would follow the launching thread, which ends at
once), so when toolrt is killed nothing in the kernel ends it. The warden does: one stdlib-only
process per toolrt (`python -I -S warden.py FD`, started on first use, in a session of its own),
holding the other end of a UNIX socket that only toolrt has. The kernel closes that socket when
toolrt dies, however it dies; the warden then SIGKILLs each process it was told of that still runs,
and its process group, and exits. Killing a namespace's init ends everything in it: `setsid`,
`nohup`, double forks and `disown` included.

Per process one message, `p <pid>` with a pidfd of it, sent by the launching thread as soon as
`subprocess` returns (the program is then running: a toolrt killed in those microseconds leaves it
unwatched, the one gap; see docs/sandbox.md). The pidfd becomes readable when the process exits: the
warden then forgets it. The fork server needs no warden: it is a helper itself, watching the same
kind of socket (see `forkserver`).
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

__all__ = ["main", "start", "watch"]

_EXIT_TIMEOUT = 5.0


def _kill_process(pidfd: int, pid: int) -> None:
    """SIGKILL a watched process and, while it lives (so its group id is still its own), its group."""
    selector = selectors.DefaultSelector()
    try:
        selector.register(pidfd, selectors.EVENT_READ)
        alive = not selector.select(0)
    finally:
        selector.close()
    if alive:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """The warden's loop: hold what toolrt sends until toolrt's end of the socket closes, then kill it."""
    control = socket.socket(fileno=int(argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for toolrt, whose exit closes the socket
    processes: dict[int, int] = {}
    """pidfd → pid."""
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, None)
    while True:
        for key, _ in selector.select():
            if key.data is not None:  # a watched process exited (with it, its PID namespace)
                del processes[key.data]
                selector.unregister(key.data)
                os.close(key.data)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(control, 64, 1)
            except OSError:
                message, fds = b"", []
            if not message:
                for pidfd, pid in processes.items():
                    _kill_process(pidfd, pid)
                return 0
            kind, _, number = message.partition(b" ")
            if kind == b"p" and fds and number.isdigit():
                processes[fds[0]] = int(number)
                selector.register(fds[0], selectors.EVENT_READ, fds[0])


class _Warden:
    """toolrt's end: the running warden and the socket to it."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.control = ours

    def close(self) -> None:
        """Close the socket: the warden kills what still runs and exits; reap it."""
        self.control.close()
        try:
            self.process.wait(_EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_lock = threading.Lock()
_warden: _Warden | None = None


def _running() -> _Warden:
    """The running warden, started if none runs (or it died). Call it outside any sandbox: the warden
    inherits what the calling thread has entered."""
    global _warden
    if _warden is None or _warden.process.poll() is not None:
        if _warden is not None:
            _warden.close()
            _warden = None
        _warden = _Warden()
    return _warden


def start() -> None:
    """Have a warden running (from a thread that has entered no sandbox).

    Raises:
        OSError: it cannot be started."""
    with _lock:
        _running()


def _send(message: bytes, fd: int) -> None:
    """Send one message with `fd` to the running warden (see `start`).

    Raises:
        OSError: none runs, or it cannot be told (the caller must not leave the process unwatched)."""
    with _lock:
        if _warden is None:
            raise OSError("the warden that ends sandboxed processes when toolrt dies is not running")
        socket.send_fds(_warden.control, [message], [fd])


def watch(pid: int) -> int:
    """Tell the warden of a process that just started; returns a pidfd of it (the caller's to close).

    Raises:
        OSError: no warden runs, or it cannot be told (the caller must not leave the process running)."""
    pidfd = os.pidfd_open(pid)
    try:
        _send(b"p " + str(pid).encode(), pidfd)
    except BaseException:
        os.close(pidfd)
        raise
    return pidfd


def _close() -> None:
    global _warden
    with _lock:
        warden, _warden = _warden, None
    if warden is not None:
        warden.close()


atexit.register(_close)

if __name__ == "__main__":
    sys.exit(main(sys.argv))
