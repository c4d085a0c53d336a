"""Run one tool process: its own process group, a deadline, bounded output, nothing left behind.

`run_process` starts `argv` without a shell in a new session (so the child and everything it spawns
share one process group), merges stderr into stdout, and reads the pipe in 64 KiB chunks. Output up
to `memory_cap` bytes is kept in memory; past it the whole stream goes to a spill file and only a
head and a tail stay in memory. A timeout, an abort event or the caller's cancellation sends SIGTERM
to the group and SIGKILL after `kill_grace`.

A command that exits normally is not killed: background jobs that let go of the output pipe
(`server > log 2>&1 &`) keep running, as they would in a terminal. One that keeps the pipe open
keeps the call running until it exits or the timeout fires. A process that moves itself to another
session or group (`setsid`) is beyond the reach of a group signal.
"""

from __future__ import annotations

import codecs
import errno
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import anyio
import anyio.abc

from ..errors import ToolFailure
from ..sandbox.hint import refusal_hint
from ..sandbox.kernel import SandboxSetupError
from ..sandbox.plan import SandboxPlan
from ..telemetry import span, tracer, with_traceparent
from ..truncate import new_output_path
from .spawn import PidfdProcess, ServedProcess, open_process

_Process = PidfdProcess | ServedProcess | anyio.abc.Process

__all__ = ["CHUNK_SIZE", "ProcessOutcome", "nul_refusal", "run_process"]

CHUNK_SIZE = 64 * 1024
_POLL_INTERVAL = 0.01


_REFUSALS_SHOWN = 5
"""Refused connections a call's output names one by one (the metadata and the audit keep them all)."""


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """What a finished (or stopped) process produced."""

    output: str
    """stdout and stderr interleaved, UTF-8 with invalid bytes as U+FFFD. Past the memory cap: head,
    `...N bytes omitted (full output saved to PATH)...`, tail."""
    exit_code: int | None
    """The exit status (negative: killed by that signal from elsewhere); None when we stopped it."""
    timed_out: bool
    aborted: bool
    total_bytes: int
    """Bytes the process wrote, all of them, whether kept in memory or not."""
    spill_path: Path | None
    """The file holding the full output when the memory cap was exceeded and a spill dir was given."""
    duration: float
    """Seconds from spawn to the end of the call."""
    sandbox: str | None = None
    """What the OS sandbox enforced on the process (`SandboxPlan.description`); None: no sandbox."""
    network_refused: tuple[str, ...] = ()
    """`host:port: why` of each connection toolrt's proxy refused the process (`network:` names)."""
    stopped: bool = False
    """`on_stdout` asked to stop, so the process group was stopped (exit_code None)."""


class _Capture:
    """Bounded capture of one output stream: everything up to the cap, then head + tail + spill file."""

    __slots__ = (
        "_cap",
        "_chunks",
        "_decoder",
        "_head",
        "_on_output",
        "_overflow",
        "_size",
        "_spill",
        "_spill_dir",
        "_tail",
        "_tail_size",
        "spill_path",
        "total",
    )

    def __init__(self, cap: int, spill_dir: Path | None, on_output: Callable[[str], None] | None) -> None:
        self._cap = cap
        self._spill_dir = spill_dir
        self._on_output = on_output
        # Live output is decoded incrementally so a character split across two reads arrives whole.
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace") if on_output is not None else None
        self._chunks: list[bytes] = []
        self._size = 0
        self._overflow = False
        self._head = b""
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._spill: BinaryIO | None = None
        self.spill_path: Path | None = None
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self._decoder is not None and self._on_output is not None:
            text = self._decoder.decode(chunk)
            if text:
                self._on_output(text)
        if self._overflow:
            self._write_spill(chunk)
            self._keep_tail(chunk)
            return
        self._chunks.append(chunk)
        self._size += len(chunk)
        if self._size > self._cap:
            self._start_overflow()

    def _start_overflow(self) -> None:
        self._overflow = True
        self._open_spill()
        head_cap = self._cap // 2
        head: list[bytes] = []
        head_size = 0
        for chunk in self._chunks:
            if head_size < head_cap:
                head.append(chunk[: head_cap - head_size])
                head_size += len(head[-1])
        self._head = b"".join(head)
        chunks, self._chunks = self._chunks, []
        for chunk in chunks:
            self._keep_tail(chunk)

    def _open_spill(self) -> None:
        if self._spill_dir is None:
            return
        path = new_output_path(self._spill_dir)
        try:
            self._spill_dir.mkdir(parents=True, exist_ok=True)
            self._spill = open(path, "xb")
        except OSError:
            # A spill dir we cannot write degrades to head + tail; the call itself still succeeds.
            return
        self.spill_path = path
        for chunk in self._chunks:
            self._write_spill(chunk)

    def _write_spill(self, chunk: bytes) -> None:
        if self._spill is None:
            return
        try:
            # Blocking writes of one chunk to the page cache cost less than a hop to a worker thread.
            self._spill.write(chunk)
        except OSError:
            self._spill.close()
            self._spill = None

    def _keep_tail(self, chunk: bytes) -> None:
        self._tail.append(chunk)
        self._tail_size += len(chunk)
        tail_cap = self._cap - self._cap // 2
        while len(self._tail) > 1 and self._tail_size - len(self._tail[0]) >= tail_cap:
            self._tail_size -= len(self._tail.popleft())

    def finish(self) -> str:
        """Flush the live decoder, close the spill file, and return the kept text."""
        if self._decoder is not None and self._on_output is not None:
            text = self._decoder.decode(b"", final=True)
            if text:
                self._on_output(text)
        if not self._overflow:
            return b"".join(self._chunks).decode("utf-8", "replace")
        self.close()
        head_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        # final=False holds back a character the head boundary cut in two instead of mangling it.
        head = head_decoder.decode(self._head)
        head_used = len(self._head) - len(head_decoder.getstate()[0])
        tail_cap = self._cap - self._cap // 2
        tail = b"".join(self._tail)[-tail_cap:]
        skip = 0
        while skip < min(3, len(tail)) and tail[skip] & 0xC0 == 0x80:
            skip += 1
        tail = tail[skip:]
        omitted = self.total - head_used - len(tail)
        where = f" (full output saved to {self.spill_path})" if self.spill_path is not None else ""
        return f"{head}\n\n...{omitted} bytes omitted{where}...\n\n{tail.decode('utf-8', 'replace')}"

    def close(self) -> None:
        if self._spill is not None:
            try:
                self._spill.close()
            except OSError:
                pass
            self._spill = None


def _spawn_error(argv: Sequence[str], cwd: Path, error: OSError) -> ToolFailure:
    name = argv[0]
    if isinstance(error, SandboxSetupError):
        return ToolFailure(f"Could not start '{name}': {error.strerror or error}. Nothing was run.")
    if error.filename is not None and os.fsdecode(error.filename) == os.fsdecode(cwd):
        return ToolFailure(f"Working directory does not exist or is not a directory: '{cwd}'.")
    if isinstance(error, FileNotFoundError):
        return ToolFailure(f"Command not found: '{name}'. Check the spelling, or that it is installed and on PATH.")
    if isinstance(error, PermissionError):
        return ToolFailure(f"Permission denied running '{name}': it is not an executable file.")
    if error.errno == errno.E2BIG:
        size = sum(len(a) for a in argv)
        return ToolFailure(
            f"Argument list too long ({size} characters) for '{name}'. Pass large data through stdin or a file."
        )
    return ToolFailure(f"Could not start '{name}': {error.strerror or error}.")


def _spawn_attributes(argv: Sequence[str], sandbox: SandboxPlan | None) -> dict[str, Any]:
    return {
        "process.executable.name": Path(argv[0]).name,
        "toolrt.sandbox": sandbox.description if sandbox is not None else "none",
    }


def nul_refusal(what: str) -> ToolFailure:
    """The refusal of a command whose `what` (an argument, a variable's value) holds a NUL byte."""
    return ToolFailure(f"{what} contains a NUL byte, which a command line cannot carry.")


def _check_argv(argv: Sequence[str]) -> None:
    if not argv:
        raise ToolFailure("Cannot run an empty command: argv has no elements.")
    for index, arg in enumerate(argv):
        if "\0" in arg:
            raise nul_refusal(f"Argument {index}")


def _signal_group(pgid: int, signum: int) -> bool:
    """Send `signum` to the group; False once the group has no members left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        # A member changed its credentials (setuid); the rest of the group was still signalled.
        return True
    return True


async def _terminate_group(process: _Process, grace: float) -> None:
    """SIGTERM the whole group, give it `grace` seconds, then SIGKILL whatever is left."""
    pgid = process.pid  # start_new_session makes the child a group leader: pgid == pid
    if _signal_group(pgid, signal.SIGTERM):
        with anyio.move_on_after(grace):
            await process.wait()
            # Grandchildren may outlive the leader; poll until the group empties or grace runs out.
            while _signal_group(pgid, 0):
                await anyio.sleep(_POLL_INTERVAL)
        _signal_group(pgid, signal.SIGKILL)
    await process.wait()


async def _feed_stdin(process: _Process, data: bytes) -> None:
    stream = process.stdin
    if stream is None:
        return
    try:
        await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError, ConnectionResetError):
        # The child exited or closed stdin without reading everything: its choice, not our failure.
        pass
    finally:
        await stream.aclose()


class _Receiving(Protocol):
    async def receive(self, max_bytes: int) -> bytes: ...


async def _read(stream: _Receiving | None, take: Callable[[bytes], bool | None]) -> bool:
    """Hand `take` each chunk of `stream` until its end; False as soon as `take` returns False."""
    if stream is not None:
        try:
            while True:
                if take(await stream.receive(CHUNK_SIZE)) is False:
                    return False
        except anyio.EndOfStream:
            pass
    return True


@dataclass(slots=True)
class _Ending:
    """How the supervision of one process ended."""

    completed: bool = False
    """The process exited and its output was read to the end."""
    aborted: bool = False
    stopped: bool = False
    """`on_stdout` asked to stop."""


async def _watch_abort(event: anyio.Event, deadline: anyio.CancelScope, ending: _Ending) -> None:
    await event.wait()
    ending.aborted = True
    deadline.cancel()


async def _read_all(process: _Process, capture: _Capture, on_stdout: Callable[[bytes], bool] | None) -> bool:
    """Read the process's output to its end and wait for it: stdout to `on_stdout` and stderr to the
    capture when given, else the merged stream to the capture. False when `on_stdout` stopped it."""
    if on_stdout is None:
        await _read(process.stdout, capture.feed)
    else:
        async with anyio.create_task_group() as group:
            group.start_soon(_read, process.stderr, capture.feed)
            if not await _read(process.stdout, on_stdout):
                group.cancel_scope.cancel()  # its stderr no longer matters
                return False
    await process.wait()
    return True


async def _supervise(
    process: _Process,
    capture: _Capture,
    deadline: anyio.CancelScope,
    abort: anyio.Event | None,
    stdin: bytes | None,
    on_stdout: Callable[[bytes], bool] | None,
) -> _Ending:
    """Read `process` to its end within `deadline`, feeding `stdin` and watching `abort` beside it."""
    ending = _Ending()
    with deadline:
        if abort is None and stdin is None:
            # The common case skips the task group: one less layer on every call.
            ending.completed = await _read_all(process, capture, on_stdout)
        else:
            async with anyio.create_task_group() as group:
                if abort is not None:
                    group.start_soon(_watch_abort, abort, deadline, ending)
                if stdin is not None:
                    group.start_soon(_feed_stdin, process, stdin)
                ending.completed = await _read_all(process, capture, on_stdout)
                group.cancel_scope.cancel()
    ending.stopped = not ending.completed and not deadline.cancel_called
    return ending


async def _start(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    sandbox: SandboxPlan | None,
    *,
    stdin: bool,
    split_stderr: bool,
    traced: bool,
) -> _Process:
    try:
        with span("sandbox spawn", _spawn_attributes(argv, sandbox)) if traced else nullcontext():
            return await open_process(
                argv,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                cwd=cwd,
                env=env,
                sandbox=sandbox,
                split_stderr=split_stderr,
            )
    except OSError as error:
        raise _spawn_error(argv, cwd, error) from error
    except ValueError as error:  # includes UnicodeEncodeError for unencodable arguments
        raise ToolFailure(f"Could not start '{argv[0]}': {error}.") from error


def _network_notes(process: _Process, output: str) -> tuple[str, tuple[str, ...]]:
    """`output` with the connections toolrt's proxy refused the process named, and all of them."""
    network = getattr(process, "network", None)
    if network is None:
        return output, ()
    network.close()
    found = list(dict.fromkeys(network.refused))
    notes = "\n".join(r.describe() for r in found[:_REFUSALS_SHOWN])
    more = len(found) - _REFUSALS_SHOWN
    if more > 0:
        notes += f"\n(and {more} more refused connection{'s' if more > 1 else ''})"
    if notes:
        output = f"{output.rstrip()}\n{notes}\n" if output.strip() else f"{notes}\n"
    return output, tuple(f"{r.host}:{r.port}: {r.rule}" for r in found)


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    stdin: bytes | None = None,
    abort: anyio.Event | None = None,
    on_output: Callable[[str], None] | None = None,
    on_stdout: Callable[[bytes], bool] | None = None,
    spill_dir: Path | None = None,
    memory_cap: int = 1 << 20,
    kill_grace: float = 0.2,
    sandbox: SandboxPlan | None = None,
) -> ProcessOutcome:
    """Run `argv` (no shell) to completion, timeout, abort or cancellation, and report what it did.

    `env` is the complete environment (see `build_env`). `stdin` bytes are fed to the child, else its
    stdin is /dev/null. `on_output` receives decoded text as it arrives. With `on_stdout`, stdout
    is its own pipe and goes, chunk by chunk as read, to `on_stdout` only (the outcome's `output`
    is then stderr's); when it returns False the process group is stopped as a timeout stops it
    (the outcome's `stopped`). Cancelling the calling task stops the process group the same way a
    timeout does, then the cancellation propagates. An `abort` already set returns at once without
    starting anything.

    Raises:
        ToolFailure: the command cannot be started (not found, not executable, NUL byte, too long,
            missing working directory).
    """
    start = time.monotonic()
    if abort is not None and abort.is_set():
        return ProcessOutcome("", None, False, True, 0, None, 0.0)
    _check_argv(argv)
    traced = tracer() is not None
    if traced:  # the process continues the call's trace (`toolrt.telemetry`)
        env = with_traceparent(env)
    process = await _start(
        argv, cwd, env, sandbox, stdin=stdin is not None, split_stderr=on_stdout is not None, traced=traced
    )
    capture = _Capture(memory_cap, spill_dir, on_output)
    deadline = anyio.CancelScope(deadline=anyio.current_time() + timeout if timeout is not None else float("inf"))
    ending = _Ending()
    with span("process", {"process.pid": process.pid}) if traced else nullcontext():
        try:
            ending = await _supervise(process, capture, deadline, abort, stdin, on_stdout)
        finally:
            with anyio.CancelScope(shield=True):
                if not ending.completed:
                    await _terminate_group(process, kill_grace)
                capture.close()
                await process.aclose()

    exit_code = process.returncode if ending.completed else None
    output, refused = _network_notes(process, capture.finish())
    if sandbox is not None and exit_code and not refused:
        hint = refusal_hint(output, sandbox, cwd, exit_code)
        if hint is not None:
            output = f"{output.rstrip()}\n{hint}\n"
    return ProcessOutcome(
        output=output,
        exit_code=exit_code,
        timed_out=not ending.completed and not ending.aborted and not ending.stopped,
        aborted=ending.aborted and not ending.completed,
        total_bytes=capture.total,
        spill_path=capture.spill_path,
        duration=time.monotonic() - start,
        sandbox=sandbox.description if sandbox is not None else None,
        network_refused=refused,
        stopped=ending.stopped,
    )
