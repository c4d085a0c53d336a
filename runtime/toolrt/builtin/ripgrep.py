"""Running ripgrep for glob, grep and list: find the binary, stream its records, stop early, never a shell.

Output is consumed as it arrives, one record at a time, so memory stays bounded however much rg
prints, and a caller that has seen enough (glob after 101 files) stops rg instead of waiting for it.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import anyio

from ..errors import ToolFailure
from ..execute.environment import build_env
from ..execute.process import run_process
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
    that OS sandbox like every process toolrt starts (`run_process`, the one process runner).

    Raises:
        ToolFailure: rg could not start, or `abort` was set before it finished.
    """
    records = _Records(separator, max_record, consume)
    outcome = await run_process(
        [ripgrep_binary(), *_BASE_FLAGS, *args],
        cwd=cwd,
        env=build_env(),
        timeout=None,  # the call's own deadline cancels it
        abort=abort,
        on_stdout=records.feed,
        memory_cap=_STDERR_CAP,
        kill_grace=0.0,  # rg writes nothing worth a grace period: SIGKILL at once
        sandbox=sandbox,
    )
    if outcome.aborted:
        raise ToolFailure("The search was aborted before it finished.")
    stopped = outcome.stopped or not records.finish()
    return RipgrepRun(
        None if stopped else outcome.exit_code,
        outcome.output.strip(),
        sandbox.description if sandbox is not None else "none",
    )


class _Records:
    """rg's output split into records as its chunks arrive, each cut to `max_record` bytes."""

    __slots__ = ("_consume", "_max_record", "_pending", "_separator")

    def __init__(self, separator: bytes, max_record: int, consume: Callable[[bytes], bool]) -> None:
        self._separator = separator
        self._max_record = max_record
        self._consume = consume
        self._pending = bytearray()  # the start of a record split across chunks, never more than max_record

    def feed(self, chunk: bytes) -> bool:
        """Hand `consume` every record `chunk` completes; False when it asked to stop."""
        pending, max_record = self._pending, self._max_record
        pieces = chunk.split(self._separator)
        tail = pieces.pop()
        for piece in pieces:
            if pending:
                pending += piece[: max_record - len(pending)]
                record = bytes(pending)
                pending.clear()
            else:
                record = piece[:max_record]
            if not self._consume(record):
                return False
        pending += tail[: max_record - len(pending)]
        return True

    def finish(self) -> bool:
        """Hand `consume` the last record when the output did not end with a separator."""
        return not self._pending or self._consume(bytes(self._pending))
