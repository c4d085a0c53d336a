"""Running ripgrep for glob, grep and list: find the binary, stream its records, stop early, never a shell.

Output is consumed as it arrives, one record at a time, so memory stays bounded however much rg
prints, and a caller that has seen enough (glob after 101 files) stops rg instead of waiting for it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterable, Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import anyio

from ..errors import ToolFailure
from ..execute.environment import build_env
from ..execute.spawn import open_process
from ..sandbox.plan import SandboxPlan

__all__ = ["RipgrepRun", "find_ripgrep", "ripgrep_binary", "run_ripgrep"]

_STDERR_CAP = 16 * 1024
# Every call gets these: a user's RIPGREP_CONFIG_PATH must not change the output format we parse.
_BASE_FLAGS = ("--no-config", "--color=never")


@dataclass(frozen=True, slots=True)
class RipgrepRun:
    """How one rg run ended."""

    exit_code: int | None
    """rg's exit status (0 found, 1 nothing found, 2 error); None when the consumer stopped it early."""
    stderr: str
    """rg's error output, at most 16 KB, decoded leniently."""
    sandbox: str = "none"
    """What the OS sandbox enforced on rg (`SandboxPlan.description`), for the call's metadata."""


@cache
def ripgrep_binary() -> str:
    """`find_ripgrep()`, found once: where `rg` is installed is a fact of the process, the same for every Runtime."""
    return find_ripgrep()


def find_ripgrep() -> str:
    """The `rg` executable: the one the `ripgrep` wheel installed beside this interpreter, else `rg` on PATH.

    The wheel's binary comes first: it is the version toolrt depends on, and a PATH entry may be a
    version-manager shim (pyenv's costs ~100 ms per spawn against ~3 ms for the binary itself).
    Raises ToolFailure when neither exists, since the search tools cannot work without it.
    """
    beside = Path(sys.executable).parent / ("rg.exe" if sys.platform == "win32" else "rg")
    if beside.is_file():
        return str(beside)
    found = shutil.which("rg")
    if found:
        return found
    raise ToolFailure(
        "ripgrep (`rg`) is not installed, so this search tool cannot run. "
        "Install the `ripgrep` Python package (pip install ripgrep) or put `rg` on PATH."
    )


async def run_ripgrep(
    args: Sequence[str],
    *,
    cwd: Path,
    abort: anyio.Event,
    consume: Callable[[bytes], bool],
    separator: bytes = b"\n",
    max_record: int = 64 * 1024,
    sandbox: SandboxPlan | None = None,
) -> RipgrepRun:
    """Run `rg ARGS` in `cwd` and hand each output record (without its separator) to `consume`.

    A record longer than `max_record` bytes is cut to that length, since no caller shows more.
    `consume` returns False to stop: rg is killed and the result's exit_code is None. Setting
    `abort` kills rg and raises ToolFailure; cancellation kills it too. With `sandbox`, rg runs inside
    that OS sandbox like every process toolrt starts.
    """
    argv = [ripgrep_binary(), *_BASE_FLAGS, *args]
    stderr = bytearray()
    stopped = False
    try:
        process = await open_process(
            argv, stdin=subprocess.DEVNULL, cwd=cwd, env=build_env(), sandbox=sandbox, split_stderr=True
        )
    except OSError as error:
        raise ToolFailure(f"Could not start ripgrep: {error.strerror or error}.") from error
    try:
        if process.stdout is None or process.stderr is None:
            raise RuntimeError("rg was started without pipes")
        try:
            async with anyio.create_task_group() as group:
                watcher = anyio.CancelScope()
                group.start_soon(_collect_stderr, process.stderr, stderr)
                group.start_soon(_watch_abort, abort, group.cancel_scope, watcher)
                stopped = not await _split_records(process.stdout, separator, max_record, consume)
                if stopped:
                    _kill(process)
                watcher.cancel()
            if group.cancel_scope.cancel_called:
                raise ToolFailure("The search was aborted before it finished.")
        except BaseException:
            # Cancelled, timed out or aborted: rg must not outlive the call.
            _kill(process)
            raise
    finally:
        with anyio.CancelScope(shield=True):
            await process.aclose()
    return RipgrepRun(
        None if stopped else process.returncode,
        stderr.decode("utf-8", "replace").strip(),
        sandbox.description if sandbox is not None else "none",
    )


async def _split_records(
    stream: AsyncIterable[bytes], separator: bytes, max_record: int, consume: Callable[[bytes], bool]
) -> bool:
    """Feed `consume` record by record; False when it asked to stop."""
    pending = bytearray()  # the start of a record split across chunks, never more than max_record bytes
    async for chunk in stream:
        pieces = chunk.split(separator)
        tail = pieces.pop()
        for piece in pieces:
            if pending:
                pending += piece[: max_record - len(pending)]
                record = bytes(pending)
                pending.clear()
            else:
                record = piece[:max_record]
            if not consume(record):
                return False
        pending += tail[: max_record - len(pending)]
    return not pending or consume(bytes(pending))


def _kill(process: Any) -> None:
    # rg leads its own process group; it may exit between the check and the signal, a harmless race.
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


async def _collect_stderr(stream: AsyncIterable[bytes], sink: bytearray) -> None:
    async for chunk in stream:
        sink += chunk[: max(0, _STDERR_CAP - len(sink))]


async def _watch_abort(abort: anyio.Event, target: anyio.CancelScope, own: anyio.CancelScope) -> None:
    with own:
        await abort.wait()
        target.cancel()
