"""Which names a directory holds, answered from one listing instead of one system call per name.

Most operands are bare names in the working directory (`main`, `origin`, `src`), and only an existing
entry of that name, a symlink, can lead out of the project. One analysis asks about each directory
through a `Listings`: the first `PER_NAME` names one by one (none by default), the rest from one listing
of the directory; a directory an earlier call listed is answered from that listing from the first name
on, once one `stat` shows it unchanged. So an everyday line costs one `stat` per directory it names,
not one `os.access` per operand (a `stat` of the directory costs about half of an `access` of a name).

A listing is reused by later calls only while the directory is unchanged (the same modification and
change times, inode and device) and was already settled when it was listed: both times at least
`SETTLED_NS` older than the listing, as git treats a "racily clean" index entry. The kernel stamps
those times from a coarse clock, so a directory changed within the same tick as a listing could keep
them; a directory changed that recently is asked name by name (`os.access`, then `os.lstat` for an
entry that exists), never from a listing. The change time is what a process cannot set: `touch -d`
puts a modification time back after a symlink was made, and stamps the change time with now. A
directory too large to list (`MAX_NAMES`) is asked name by name too.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from typing import Literal

__all__ = ["MAX_NAMES", "PER_NAME", "SETTLED_NS", "EntryKind", "Listings"]

EntryKind = Literal["missing", "link", "other"]
SETTLED_NS = 2_000_000_000
"""How long before a listing a directory must have last changed for the listing to be reused."""
MAX_NAMES = 20_000
"""Directories with more entries than this are asked name by name."""
_MAX_DIRECTORIES = 256


class _Listing:
    __slots__ = ("identity", "links", "names")

    def __init__(self, identity: tuple[int, int, int, int], names: frozenset[str], links: frozenset[str]) -> None:
        self.identity = identity
        self.names = names
        self.links = links


# Shared by every analysis in the process: directory → its last settled listing.
_listed: dict[str, _Listing] = {}
_lock = threading.Lock()


class Listings:
    """One analysis's view of the directories it asks about. The first `PER_NAME` names asked in a
    directory (none by default) are looked up one by one; from the next one on, the directory is
    stat'ed once and its listing answers."""

    __slots__ = ("_asked", "_directories", "_names")

    def __init__(self) -> None:
        self._asked: dict[str, int] = {}
        self._directories: dict[str, _Listing | None] = {}
        self._names: dict[str, EntryKind] = {}

    def kind(self, directory: str, name: str) -> EntryKind:
        """What `directory/name` is, without following a symlink: missing, a symlink, or other."""
        listing = self._directories.get(directory, _UNASKED)
        if isinstance(listing, _Listing):  # the common case: answered from the listing, nothing to keep
            return "missing" if name not in listing.names else "link" if name in listing.links else "other"
        path = directory + "/" + name
        found = self._names.get(path)
        if found is not None:
            return found
        if listing is _UNASKED and (not PER_NAME or directory in _listed or self._ask(directory) > PER_NAME):
            # A listing an earlier call made is checked (one `stat`) rather than asking name by name.
            listing = self._directories[directory] = _settled_listing(directory)
            if isinstance(listing, _Listing):  # it answers every later name (the first branch above)
                return "missing" if name not in listing.names else "link" if name in listing.links else "other"
        found = _name_kind(path)
        self._names[path] = found
        return found

    def _ask(self, directory: str) -> int:
        """How many names have been asked in `directory` so far, this one included."""
        asked = self._asked[directory] = self._asked.get(directory, 0) + 1
        return asked


_UNASKED = object()
PER_NAME = 0
"""Names looked up one by one in each directory before its listing answers the rest: none, so the first
name a line asks about lists the directory (once per process while it is unchanged; later lines pay one
`stat` of it), and every later name in it is answered from that listing."""


def _settled_listing(directory: str) -> _Listing | None:
    """The directory's listing when it is settled (reused while unchanged), else None."""
    try:
        status = os.stat(directory)
    except (OSError, ValueError):
        return None
    identity = (status.st_mtime_ns, status.st_ctime_ns, status.st_ino, status.st_dev)
    cached = _listed.get(directory)
    if cached is not None and cached.identity == identity:
        return cached
    if time.time_ns() - max(status.st_mtime_ns, status.st_ctime_ns) < SETTLED_NS:
        return None  # changed too recently for a listing to be trusted by later calls
    names: list[str] = []
    links: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                names.append(entry.name)
                if entry.is_symlink():
                    links.append(entry.name)
                if len(names) > MAX_NAMES:
                    return None
    except OSError:
        return None
    listing = _Listing(identity, frozenset(names), frozenset(links))
    with _lock:
        if len(_listed) >= _MAX_DIRECTORIES:
            _listed.clear()
        _listed[directory] = listing
    return listing


def _name_kind(path: str) -> EntryKind:
    try:
        if not os.access(path, os.F_OK, follow_symlinks=False):
            return "missing"  # the common case, and the cheapest test
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):  # ValueError: a NUL in the name, which no path holds
        return "missing"
    return "link" if stat.S_ISLNK(mode) else "other"
