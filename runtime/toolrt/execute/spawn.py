"""Start a child process the event loop can watch without a helper thread.

asyncio on Python < 3.12 learns of a child's exit through a thread per child (ThreadedChildWatcher),
which costs a thread start and GIL contention on every call. On Linux a pidfd (a file descriptor
that becomes readable when the process exits) lets the event loop wait for the exit itself, and the
output pipe is read the same way. Elsewhere `anyio.open_process` is used.

The returned object offers the subset of `anyio.abc.Process` that `run_process` uses.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

__all__ = ["PidfdProcess", "open_process"]


def _pidfd_works() -> bool:
    """pidfd_open exists (Linux >= 5.3, Python >= 3.9) and is not blocked (old kernels, seccomp)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


HAVE_PIDFD = _pidfd_works()


class _Output:
    """The read end of the child's output pipe, non-blocking, awaited with the event loop."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        os.set_blocking(fd, False)

    async def receive(self, max_bytes: int) -> bytes:
        while True:
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data


class _Input:
    """The write end of the child's stdin pipe."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        os.set_blocking(fd, False)

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view and self._fd is not None:
            try:
                written = os.write(self._fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            view = view[written:]

    async def aclose(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class PidfdProcess:
    """A child process whose exit and output the event loop watches directly (Linux pidfd)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._pidfd = os.pidfd_open(popen.pid)
        self.pid = popen.pid
        self.returncode: int | None = None
        self.stdout = _Output(popen.stdout.fileno()) if popen.stdout is not None else None
        self.stdin = _Input(popen.stdin.fileno()) if popen.stdin is not None else None

    async def wait(self) -> int:
        while self.returncode is None:
            code = self._popen.poll()
            if code is not None:
                self.returncode = code
                break
            await anyio.wait_readable(self._pidfd)
        return self.returncode

    async def aclose(self) -> None:
        """Wait for the exit, then release the pidfd and the pipes (the caller ended the process)."""
        await self.wait()
        os.close(self._pidfd)
        if self.stdin is not None:
            await self.stdin.aclose()
        for stream in (self._popen.stdin, self._popen.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


async def open_process(argv: Sequence[str], *, stdin: int, cwd: Path, env: Mapping[str, str]) -> PidfdProcess | Any:
    """Start `argv` in a new session with stdout and stderr merged into one pipe."""
    if not HAVE_PIDFD:
        return await anyio.open_process(
            list(argv),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    popen = subprocess.Popen(
        list(argv),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
        close_fds=True,
    )
    return PidfdProcess(popen)
