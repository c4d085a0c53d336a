"""Per-session read stamps: a file may only be overwritten if this session read it and it has not changed since.

OpenCode compares the file's mtime with the wall-clock time of the read, which misses a change made
within the filesystem's timestamp resolution. Here the read records the file's own identity (mtime
in nanoseconds, size, inode) as it was when read, and any difference later counts as a change.
The table lives in `ToolContext.session_state["filetime"]` as plain JSON values (real path →
`{mtime_ns, size, inode, read_at}`), so a host may persist session state between processes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..beneath import steady_realpath
from ..errors import PathChanged, ToolFailure

__all__ = ["ReadStamp", "assert_fresh", "record", "refresh", "stamp_of"]

_KEY = "filetime"


@dataclass(frozen=True, slots=True)
class ReadStamp:
    """What a file looked like when the session last read (or wrote) it."""

    mtime_ns: int
    size: int
    inode: int
    read_at: float
    """Wall-clock time of the read, for the message only."""

    def matches(self, current: os.stat_result) -> bool:
        return (current.st_mtime_ns, current.st_size, current.st_ino) == (self.mtime_ns, self.size, self.inode)

    def to_json(self) -> dict[str, int | float]:
        return {"mtime_ns": self.mtime_ns, "size": self.size, "inode": self.inode, "read_at": self.read_at}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReadStamp:
        return cls(int(data["mtime_ns"]), int(data["size"]), int(data["inode"]), float(data["read_at"]))


def stamp_of(status: os.stat_result) -> ReadStamp:
    """The stamp of a file whose `stat` (or `fstat`) result is `status`, read now."""
    return ReadStamp(status.st_mtime_ns, status.st_size, status.st_ino, time.time())


def _table(state: MutableMapping[str, Any]) -> dict[str, dict[str, int | float]]:
    table: dict[str, dict[str, int | float]] = state.setdefault(_KEY, {})
    return table


def _key(path: Path) -> str:
    # Keyed by the real path: reading through one symlink and writing through another is the same file.
    try:
        return steady_realpath(path)
    except PathChanged:  # a name on the way kept being swapped: as named, which is read first again
        return os.path.normpath(path)


def record(state: MutableMapping[str, Any], path: Path, status: os.stat_result) -> None:
    """Remember that the session has seen `path` as described by `status`."""
    _table(state)[_key(path)] = stamp_of(status).to_json()


def refresh(state: MutableMapping[str, Any], path: Path) -> None:
    """After a tool changed `path`, move its stamp forward if the session was tracking it."""
    table = _table(state)
    key = _key(path)
    if key in table:
        table[key] = stamp_of(os.stat(key)).to_json()


def _iso(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def assert_fresh(state: MutableMapping[str, Any], path: Path, display: str) -> None:
    """Return if the session read `path` and it is unchanged since; otherwise tell the model to read it.

    Raises:
        ToolFailure: the file was never read in this session, or it changed on disk since.
    """
    stored = _table(state).get(_key(path))
    if stored is None:
        raise ToolFailure(f"You must read the file {display} before overwriting it. Use the read tool first.")
    stamp = ReadStamp.from_json(stored)
    current = os.stat(path)
    if not stamp.matches(current):
        raise ToolFailure(
            f"File {display} has been modified since it was last read.\n"
            f"Last modification: {_iso(current.st_mtime_ns / 1e9)}\n"
            f"Last read: {_iso(stamp.read_at)}\n\n"
            "Please read the file again before modifying it."
        )
