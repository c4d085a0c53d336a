"""Background processes: what a `background: true` tool, approved by the host, leaves running.

Every other process ends with its call (the init of its own PID namespace, see `toolrt.sandbox`). A
tool that must leave a server running (a development server, a database) declares
`background: true`, and the host approves it (the host-only setting `background` names the tool).
Its call then starts the process in the same sandbox, its output (stdout and stderr) going to a file,
and returns at once; the process, still the init of its PID namespace, keeps running with everything
it starts until it exits or is ended: by `end` (its owner: a host, an MCP task), when its session is
released, when its Runtime closes, or when toolrt dies (the helpers that kill every sandboxed process
then, see `toolrt.sandbox.warden`).

Its lifetime is journalled like any process's (`Journal.process`), the span kept open while it runs:
a watcher thread per process moves the span's deadline on every `RENEW_SECONDS / 2`, and writes the
end when the process has exited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from ..attribution import Confinement, Journal
from ..errors import ToolFailure
from ..sandbox.kernel import wait_readable
from ..sandbox.plan import SandboxPlan
from .spawn import PidfdProcess, ServedProcess, open_process

__all__ = ["RENEW_SECONDS", "BackgroundProcess", "BackgroundProcesses"]

RENEW_SECONDS = 300.0
"""A running background process's journalled lifetime reaches this far ahead, renewed at half of it."""
_GRACE = 0.5
"""Seconds between SIGTERM and SIGKILL when a background process is ended."""
_REAP_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class BackgroundProcess:
    """One process a `background: true` tool left running."""

    pid: int
    """The host pid of its process group, which toolrt signals (the program, or its stand-in in the fork
    server; its own PID namespace holds everything it started)."""
    tool: str
    call_id: str
    session: str
    command: str
    """What was run, as the call's title and records show it."""
    output: Path
    """The file its stdout and stderr go to."""
    started: float
    """`time.time()` when it started."""


@dataclass(eq=False)
class _Running:
    info: BackgroundProcess
    process: PidfdProcess | ServedProcess
    span: AbstractContextManager[str]
    span_id: str
    ended: threading.Event = field(default_factory=threading.Event)


class BackgroundProcesses:
    """The background processes of one Runtime (`Runtime.background_processes`, `Runtime.end_processes`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, _Running] = {}
        self._closed = False

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        sandbox: SandboxPlan | None,
        output: Path,
        journal: Journal,
        approved: Iterable[Path],
        confined: Confinement | None,
        tool: str,
        call_id: str,
        session: str,
        command: str,
    ) -> BackgroundProcess:
        """Start `argv` with its output going to the new file `output`, journalled, and keep it.

        Raises:
            ToolFailure: the Runtime is closed, or the journal cannot be written (nothing was run).
            OSError: the program cannot be started.
        """
        if self._closed:
            raise ToolFailure("This Runtime is closed: it starts no background process. Nothing was run.")
        output.parent.mkdir(parents=True, exist_ok=True)
        log = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        span = journal.process(call_id, timeout=RENEW_SECONDS, approved=approved, confined=confined)
        try:
            span_id = span.__enter__()
            try:
                process = await open_process(
                    argv, stdin=subprocess.DEVNULL, cwd=cwd, env=env, sandbox=sandbox, output=log
                )
            except BaseException as error:
                span.__exit__(type(error), error, error.__traceback__)
                raise
        finally:
            os.close(log)
        info = BackgroundProcess(process.pid, tool, call_id, session, command, output, time.time())
        running = _Running(info, process, span, span_id)
        with self._lock:
            self._running[info.pid] = running
            closed = self._closed
        threading.Thread(target=self._watch, args=(running, journal), name=f"toolrt-background-{info.pid}").start()
        if closed:  # closed while it started
            self._end([running], _GRACE)
        return info

    def _watch(self, running: _Running, journal: Journal) -> None:
        """Keep the span open while the process runs; record its end and forget it once it exited."""
        process = running.process
        exit_fd = process.pidfd if isinstance(process, PidfdProcess) else process.channel.fileno()
        try:
            while process.returncode is None and not wait_readable(exit_fd, RENEW_SECONDS / 2):
                journal.extend(running.span_id, 2 * RENEW_SECONDS + 60)  # as far ahead as a new span's
            process.wait_blocking()
        finally:
            running.span.__exit__(None, None, None)
            with self._lock:
                self._running.pop(running.info.pid, None)
            running.ended.set()

    def running(self, *, session: str | None = None, call_id: str | None = None) -> tuple[BackgroundProcess, ...]:
        """The processes still running, oldest first (of `session`, or of `call_id`, when given)."""
        with self._lock:
            running = list(self._running.values())
        return tuple(r.info for r in running if _matches(r.info, session, call_id, None))

    def end(
        self,
        *,
        session: str | None = None,
        call_id: str | None = None,
        pid: int | None = None,
        grace: float = _GRACE,
        wait: bool = True,
    ) -> tuple[BackgroundProcess, ...]:
        """End the processes of `session`, `call_id` or `pid` (every one when none is given): SIGTERM to
        each process group, SIGKILL after `grace` seconds; returns once they are reaped (with `wait`),
        or at once, a thread finishing the job."""
        with self._lock:
            chosen = [r for r in self._running.values() if _matches(r.info, session, call_id, pid)]
        if wait:
            self._end(chosen, grace)
        else:
            threading.Thread(target=self._end, args=(chosen, grace), name="toolrt-background-end").start()
        return tuple(r.info for r in chosen)

    def close(self) -> None:
        """End every process and start no more (idempotent)."""
        with self._lock:
            self._closed = True
        self.end()

    @staticmethod
    def _end(chosen: list[_Running], grace: float) -> None:
        for running in chosen:
            _signal_group(running.info.pid, signal.SIGTERM)
        give_up = time.monotonic() + grace
        for running in chosen:
            if not running.ended.wait(max(0.0, give_up - time.monotonic())):
                _signal_group(running.info.pid, signal.SIGKILL)
        for running in chosen:
            running.ended.wait(_REAP_TIMEOUT)


def _matches(info: BackgroundProcess, session: str | None, call_id: str | None, pid: int | None) -> bool:
    return (
        (session is None or info.session == session)
        and (call_id is None or info.call_id == call_id)
        and (pid is None or info.pid == pid)
    )


def _signal_group(pgid: int, signum: int) -> None:
    """Signal a process group whose leader toolrt has not reaped (so the id is still its group's)."""
    try:
        os.killpg(pgid, signum)
    except OSError:
        pass
