"""Start a child process the event loop can watch without a helper thread.

asyncio on Python < 3.12 learns of a child's exit through a thread per child (ThreadedChildWatcher),
which costs a thread start and GIL contention on every call. On Linux a pidfd (a file descriptor
that becomes readable when the process exits) lets the event loop wait for the exit itself, and the
output pipe is read the same way. Python 3.12's asyncio watches children with a pidfd itself, so
there (and off Linux) an unsandboxed process starts with `anyio.open_process`; the own pidfd path
stays for Python < 3.12 and for sandboxed processes, which start from a thread of their own.

The returned object offers the subset of `anyio.abc.Process` that `run_process` uses.

With a `SandboxPlan` the process starts inside the OS sandbox (see `toolrt.sandbox`): from a fresh
thread that carries the sandbox into the child, or through the fork server; never with Python code
between fork and exec in this threaded process.
"""

from __future__ import annotations

import _thread
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from ..sandbox import keeper, kernel, warden
from ..sandbox.credentials import Masked, sandbox_environment
from ..sandbox.loopback import proxy_environment
from ..sandbox.namespaces import enter_from_thread, release_after
from ..sandbox.plan import SandboxPlan
from ..sandbox.proxy import ProxySession, serve
from ..sandbox.supervisor import supervise

__all__ = ["PidfdProcess", "ServedProcess", "open_process"]


def _pidfd_works() -> bool:
    """pidfd_open exists (Linux >= 5.3, Python >= 3.9) and is not blocked (old kernels, seccomp)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


HAVE_PIDFD = _pidfd_works()
OWN_PIDFD_FOR_PLAIN = HAVE_PIDFD and sys.version_info < (3, 12)
"""Whether an unsandboxed process needs the own pidfd path (asyncio >= 3.12 does it itself)."""


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

    def __aiter__(self) -> _Output:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.receive(65536)
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Input:
    """The write end of the child's stdin pipe."""

    def __init__(self, fd: int, close: Callable[[], None] | None = None) -> None:
        self._fd: int | None = fd
        self._close = close if close is not None else partial(os.close, fd)
        """Closes the descriptor through its owner (a Popen's file object), so it is closed exactly once."""
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
            self._close()


class PidfdProcess:
    """A child process whose exit and output the event loop watches directly (Linux pidfd)."""

    def __init__(self, popen: subprocess.Popen[bytes], pidfd: int | None = None) -> None:
        self._popen = popen
        self.pidfd = pidfd if pidfd is not None else os.pidfd_open(popen.pid)
        self.pid = popen.pid
        self.returncode: int | None = None
        self.network: ProxySession | None = None
        """The proxy's session of a process whose `network:` names hosts (see `toolrt.sandbox.proxy`)."""
        self.stdout = _Output(popen.stdout.fileno()) if popen.stdout is not None else None
        self.stderr = _Output(popen.stderr.fileno()) if popen.stderr is not None else None
        self.stdin = _Input(popen.stdin.fileno(), popen.stdin.close) if popen.stdin is not None else None

    async def wait(self) -> int:
        while self.returncode is None:
            code = self._popen.poll()
            if code is not None:
                self.returncode = code
                break
            await anyio.wait_readable(self.pidfd)
        return self.returncode

    def wait_blocking(self) -> int:
        """Wait for the exit in this thread, then release the pidfd (a process started with `output`)."""
        self.returncode = self._popen.wait()
        os.close(self.pidfd)
        return self.returncode

    async def aclose(self) -> None:
        """Wait for the exit, then release the pidfd and the pipes (the caller ended the process)."""
        await self.wait()
        os.close(self.pidfd)
        if self.stdin is not None:
            await self.stdin.aclose()
        for stream in (self._popen.stdin, self._popen.stdout, self._popen.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class ServedProcess:
    """A child of the sandbox fork server: its exit status arrives on a private status channel."""

    def __init__(
        self,
        pid: int,
        channel: socket.socket,
        stdout: int | None,
        stderr: int | None,
        stdin: int | None,
        received: bytes = b"",
        release: Callable[[], None] = lambda: None,
    ) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.network: ProxySession | None = None
        self._release = release
        """Lets go of the fork server this process holds (see `hold_fork_server`), once its exit is known."""
        self._channel = channel
        channel.setblocking(False)
        self._buffer = received
        """Status lines read so far (the exit may come along with the pid)."""
        self.stdout = _Output(stdout) if stdout is not None else None
        self.stderr = _Output(stderr) if stderr is not None else None
        self.stdin = _Input(stdin) if stdin is not None else None
        self._fds = [fd for fd in (stdout, stderr) if fd is not None]
        self._parse()

    @property
    def channel(self) -> socket.socket:
        """The status channel: readable when the exit status arrives (or the server died)."""
        return self._channel

    def _parse(self) -> None:
        for line in self._buffer.split(b"\n"):
            if line.startswith(b"X"):
                self.returncode = int(line[1:])
        if self.returncode is not None:
            self._release()

    async def wait(self) -> int:
        self._parse()  # the exit may have arrived with the pid
        while self.returncode is None:
            try:
                data = self._channel.recv(256)
            except BlockingIOError:
                await anyio.wait_readable(self._channel)
                continue
            if not data:  # the server died: the child's fate is unknown, report it as killed
                self.returncode = -9
                self._release()
                break
            self._buffer += data
            self._parse()
        return self.returncode

    def wait_blocking(self) -> int:
        """Wait for the exit in this thread, then release the status channel (a process started with `output`)."""
        self._channel.setblocking(True)
        self._parse()
        while self.returncode is None:
            data = self._channel.recv(256)
            if not data:  # the server died: the child's fate is unknown, report it as killed
                self.returncode = -9
                self._release()
                break
            self._buffer += data
            self._parse()
        self._channel.close()
        return self.returncode

    async def aclose(self) -> None:
        await self.wait()
        self._channel.close()
        if self.stdin is not None:
            await self.stdin.aclose()
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []


def _pipe_pair(wanted: bool) -> tuple[int | None, int | None]:
    """(ours, theirs) ends of a pipe, or (None, None)."""
    if not wanted:
        return None, None
    read, write = os.pipe2(os.O_CLOEXEC)
    return read, write


def _served(
    argv: Sequence[str],
    plan: SandboxPlan,
    stdin: int,
    cwd: Path,
    env: Mapping[str, str],
    split: bool,
    output: int | None = None,
    masked: tuple[Masked, ...] = (),
) -> ServedProcess:
    from ..sandbox.launcher import fork_server, running_on_fork_server

    out_read, out_write = os.pipe2(os.O_CLOEXEC) if output is None else (None, os.dup(output))
    err_read, err_write = _pipe_pair(split)
    in_write, in_read = None, None
    if stdin == subprocess.PIPE:
        in_read, in_write = os.pipe2(os.O_CLOEXEC)
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC) if in_read is None else None
    theirs = [in_read if in_read is not None else devnull, out_write, err_write if err_write is not None else out_write]
    ours = (out_read, err_read, in_write)
    request = {"argv": list(argv), "env": dict(env), "cwd": str(cwd), **plan.request()}
    umask = kernel.current_umask()  # the host's of now: the server's own dates from its start
    if umask is not None:
        request["umask"] = umask
    # The server is not closed while the process runs on it: the last Runtime to close (a collected one
    # included) would otherwise close it, and with it kill this process.
    release = running_on_fork_server()
    try:
        channel = fork_server().submit(request, [fd for fd in theirs if fd is not None])
    except BaseException:
        release()
        _close(ours)
        raise
    finally:
        _close({fd for fd in theirs if fd is not None})
    line, rest, proxy = _first_report(channel, plan)
    if not line.startswith(b"P") or (plan.network_rules is not None and not proxy):
        _close(proxy)
        release()
        channel.close()
        _close(ours)
        raise _start_failure(line, argv, cwd)
    served = ServedProcess(int(line[1:]), channel, out_read, err_read, in_write, rest, release)
    if plan.network_rules is not None:
        served.network = serve(proxy[0], plan.network_rules, _pidfd_of(served.pid), masked)
    return served


def _close(fds: Iterable[int | None]) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _first_report(channel: socket.socket, plan: SandboxPlan) -> tuple[bytes, bytes, list[int]]:
    """The fork server's first line (`P<pid>`, or `E<errno> <step>`), what came after it, and the proxy
    listener sent with it (a process with network rules); a seccomp listener sent with it goes to the supervisor."""
    first = b""
    proxy: list[int] = []
    while not first.endswith(b"\n"):
        chunk, fds, _, _ = socket.recv_fds(channel, 256, 2)
        if fds and plan.network_rules is not None:  # the proxy's listener in the process's namespace comes first
            proxy.append(fds.pop(0))
        for fd in fds:  # the seccomp listener of a process with a socket allow-list, sent with its pid
            supervise(fd, plan.sockets, network=not plan.deny_network)
        if not chunk:
            break
        first += chunk
    line, _, rest = first.partition(b"\n")
    return line, rest, proxy


def _start_failure(line: bytes, argv: Sequence[str], cwd: Path) -> OSError:
    """The error for the fork server's `E<errno> <step>` line: the program's or the directory's, or the sandbox's."""
    code, _, step = line[1:].decode(errors="replace").partition(" ")
    number = int(code) if code.isdigit() else 0
    if step == "exec":
        return OSError(number, os.strerror(number), argv[0])
    if step == "chdir":
        return OSError(number, os.strerror(number), str(cwd))
    if ": " in step:  # the step says what went wrong
        return kernel.SandboxSetupError(number, f"the sandbox could not be set up ({step})")
    return kernel.SandboxSetupError(
        f"the sandbox could not be set up ({step}: {os.strerror(number) if number else 'failed'})"
    )


def _pidfd_of(pid: int) -> int | None:
    """A pidfd of a process the fork server started (its stand-in, which lives until the program ends)."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _popen_in_sandbox(
    plan: SandboxPlan, argv: Sequence[str], masked: tuple[Masked, ...] = (), **options: Any
) -> PidfdProcess:
    """Start the process from a thread of its own (made ahead by `toolrt.sandbox.keeper` when it could)
    that first enters the sandbox itself (see `toolrt.sandbox.support`), watched by the warden, which
    kills it (and its PID namespace) if toolrt dies (see `toolrt.sandbox.warden`).

    A bare `_thread` and a lock, not `threading.Thread`: its start handshake and join cost two more
    context switches per process, which on a busy machine weigh more than the whole sandbox.
    """
    try:
        warden.start()  # here, outside the sandbox the thread enters
    except OSError as error:
        raise kernel.SandboxSetupError(f"the sandbox could not be set up: {error}") from error
    handoff = _Handoff()
    keeper.start_thread(_start_inside, (plan, argv, options, handoff))  # made ahead when the keeper could
    handoff.done.acquire()
    outcome = handoff.outcome
    if isinstance(outcome, BaseException):
        _close((handoff.namespace, handoff.supervised, handoff.proxied))
        raise outcome
    popen, pidfd = outcome
    if handoff.namespace is not None:  # here: that thread may start no thread (its next PID namespace differs)
        release_after(popen.pid, handoff.namespace)
    if handoff.supervised is not None:
        supervise(handoff.supervised, plan.sockets, network=not plan.deny_network)
    process = PidfdProcess(popen, pidfd)
    if plan.network_rules is not None:
        if handoff.proxied is None:  # `enter_from_thread` makes one for every request with network rules
            raise kernel.SandboxSetupError("the sandbox could not be set up: no proxy listener")
        process.network = serve(handoff.proxied, plan.network_rules, os.dup(pidfd), masked)
    return process


class _Handoff:
    """What the thread that enters the sandbox (`_start_inside`) hands back to the caller's thread."""

    __slots__ = ("done", "namespace", "outcome", "proxied", "supervised")

    def __init__(self) -> None:
        self.done = _thread.allocate_lock()
        """Released once `outcome` is set."""
        self.done.acquire()
        self.outcome: tuple[subprocess.Popen[bytes], int] | BaseException = kernel.SandboxSetupError(
            "the sandbox could not be set up: its thread ended without a word"
        )
        """The process and the warden's pidfd of it, or what kept it from starting."""
        self.namespace: int | None = None
        """The process's single-use mount namespace (see `namespaces.release_after`)."""
        self.supervised: int | None = None
        """The seccomp listener of a process with a socket allow-list."""
        self.proxied: int | None = None
        """The proxy listener in the process's network namespace."""


def _start_inside(plan: SandboxPlan, argv: Sequence[str], options: dict[str, Any], handoff: _Handoff) -> None:
    """In a fresh thread: enter the sandbox, then start the process (see `_popen_in_sandbox`)."""
    try:
        try:
            handoff.namespace, handoff.supervised, handoff.proxied = enter_from_thread(plan.request())
        except OSError as error:
            raise kernel.SandboxSetupError(f"the sandbox could not be set up: {error}") from error
        handoff.outcome = _popen_watched(argv, options)
    except BaseException as error:  # handed to the caller's thread, raised there
        handoff.outcome = error
    finally:
        handoff.done.release()


def _popen_watched(argv: Sequence[str], options: dict[str, Any]) -> tuple[subprocess.Popen[bytes], int]:
    """The process, and a pidfd of it the warden watches (it is killed when the warden cannot)."""
    popen = subprocess.Popen(list(argv), **options)
    try:
        pidfd = warden.watch(popen.pid)  # at once, from here: the one gap is this long
    except OSError as error:  # fail closed: a process the warden does not know could outlive toolrt
        os.killpg(popen.pid, signal.SIGKILL)
        with popen:  # closes the pipes, reaps it
            raise kernel.SandboxSetupError(f"the sandbox could not be set up: {error}") from error
    return popen, pidfd


async def open_process(
    argv: Sequence[str],
    *,
    stdin: int,
    cwd: Path,
    env: Mapping[str, str],
    sandbox: SandboxPlan | None = None,
    split_stderr: bool = False,
    output: int | None = None,
) -> PidfdProcess | ServedProcess | Any:
    """Start `argv` in a new session, stdout and stderr merged into one pipe (or two with
    `split_stderr`; or both written to the file descriptor `output`, a process no one reads from,
    which `wait_blocking` waits for), inside `sandbox` when given.

    Raises:
        OSError: the program cannot be started (also `SandboxSetupError` when the sandbox cannot be applied).
    """
    stderr = subprocess.PIPE if split_stderr else subprocess.STDOUT
    masked: tuple[Masked, ...] = ()
    if sandbox is not None and (sandbox.credentials or sandbox.masks.sources):
        env, masked = sandbox_environment(env, sandbox.credentials, files=sandbox.masks.sources)
    if sandbox is not None and sandbox.network_rules is not None:
        env = proxy_environment(dict(env))
    if sandbox is not None and sandbox.launch == "forkserver":
        return _served(argv, sandbox, stdin, cwd, env, split_stderr, output, masked)
    if sandbox is not None and sandbox.launch == "exec":
        argv, sandbox = [*sandbox.prefix, *argv], None
    if (sandbox is not None or output is not None) and not HAVE_PIDFD:
        raise kernel.SandboxSetupError("the sandbox needs pidfd support (Linux 5.3 or later)")
    if sandbox is None and not OWN_PIDFD_FOR_PLAIN and output is None:
        return await anyio.open_process(
            list(argv),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    options: dict[str, Any] = {
        "stdin": stdin,
        "stdout": subprocess.PIPE if output is None else output,
        "stderr": stderr if output is None else subprocess.STDOUT,
        "cwd": cwd,
        "env": dict(env),
        "start_new_session": True,
        "close_fds": True,
    }
    if sandbox is not None:
        return _popen_in_sandbox(sandbox, argv, masked, **options)
    return PidfdProcess(subprocess.Popen(list(argv), **options))
