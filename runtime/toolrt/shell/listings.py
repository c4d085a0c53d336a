"""Which names a directory holds, answered from one listing instead of one system call per name.

Most operands are bare names in the working directory (`main`, `origin`, `src`), and only an existing
entry of that name, a symlink, can lead out of the project. One analysis asks about each directory
through a `Listings`, which stats the directory once and answers every name from its listing.

A listing is reused by later calls only while the directory is unchanged (the same modification
time, inode and device) and was already settled when it was listed: its modification time at least
`SETTLED_NS` older than the listing, as git treats a "racily clean" index entry. The kernel stamps
modification times from a coarse clock, so a directory changed within the same tick as a listing
could keep its time; a directory changed that recently is asked name by name (`os.lstat`), never
from a listing. A directory too large to list (`MAX_NAMES`) is asked name by name too.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from typing import Literal

__all__ = ["MAX_NAMES", "SETTLED_NS", "EntryKind", "Listings"]

EntryKind = Literal["missing", "link", "other"]
SETTLED_NS = 2_000_000_000
"""How long before a listing a directory must have last changed for the listing to be reused."""
MAX_NAMES = 20_000
"""Directories with more entries than this are asked name by name."""
_MAX_DIRECTORIES = 256


class _Listing:
    __slots__ = ("identity", "links", "names")

    def __init__(self, identity: tuple[int, int, int], names: frozenset[str], links: frozenset[str]) -> None:
        self.identity = identity
        self.names = names
        self.links = links


# Shared by every analysis in the process: directory → its last settled listing.
_listed: dict[str, _Listing] = {}
_lock = threading.Lock()


class Listings:
    """One analysis's view of the directories it asks about: each is stat'ed once per analysis."""

    __slots__ = ("_directories", "_names")

    def __init__(self) -> None:
        self._directories: dict[str, _Listing | None] = {}
        self._names: dict[str, EntryKind] = {}

    def kind(self, directory: str, name: str) -> EntryKind:
        """What `directory/name` is, without following a symlink: missing, a symlink, or other."""
        listing = self._directories.get(directory, _UNASKED)
        if listing is _UNASKED:
            listing = self._directories[directory] = _settled_listing(directory)
        if listing is not None and isinstance(listing, _Listing):
            if name not in listing.names:
                return "missing"
            return "link" if name in listing.links else "other"
        path = directory + "/" + name
        found = self._names.get(path)
        if found is None:
            found = self._names[path] = _lstat_kind(path)
        return found


_UNASKED = object()


def _settled_listing(directory: str) -> _Listing | None:
    """The directory's listing when it is settled (reused while unchanged), else None."""
    try:
        status = os.stat(directory)
    except OSError:
        return None
    identity = (status.st_mtime_ns, status.st_ino, status.st_dev)
    cached = _listed.get(directory)
    if cached is not None and cached.identity == identity:
        return cached
    if time.time_ns() - status.st_mtime_ns < SETTLED_NS:
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


def _lstat_kind(path: str) -> EntryKind:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "missing"
    return "link" if stat.S_ISLNK(mode) else "other"
