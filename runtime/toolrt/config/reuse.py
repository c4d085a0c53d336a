"""What one build read, kept for the next build of the same Runtime.

A build looks a file up by path and stat signature, first in what it has read itself, then in what
the previous build (the previous snapshot) kept; it keeps exactly what it used, so the memory is
bounded by the config's size and never grows with the number of saves. Nothing is shared between
Runtimes: each carries its own through its snapshots.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["FileKey", "Reused"]

FileKey = tuple[str, str, str, int, int, int]
"""(kind, path, display, mtime_ns, size, inode) of a file as one build read it."""


class Reused:
    """The entries a build used, found in its own reads or taken over from the previous build's."""

    __slots__ = ("_earlier", "_read_here", "kept", "listed")

    def __init__(self, earlier: Mapping[Any, Any] | None = None) -> None:
        self._earlier: Mapping[Any, Any] = earlier or {}
        self.kept: dict[Any, Any] = {}
        self._read_here: set[Any] = set()
        self.listed: dict[str, tuple[int, ...]] = {}
        """path → the attribution signature (`toolrt.attribution.signature_of`) its listing in this build
        gave, for the tool files whose documents this build took over from the previous one (never for
        one it parsed itself: those are checked on the bytes that were parsed)."""

    def get(self, key: Any) -> Any | None:
        """The entry for `key` (None when neither this build nor the previous one has it)."""
        found = self.kept.get(key)
        if found is None:
            found = self._earlier.get(key)
            if found is not None:
                self.kept[key] = found
        return found

    def taken_over(self, key: Any) -> bool:
        """Whether the entry for `key` is the previous build's (not one this build read itself)."""
        return key in self.kept and key not in self._read_here

    def keep(self, key: Any, value: Any) -> None:
        self.kept[key] = value
        self._read_here.add(key)

    def done(self) -> Mapping[Any, Any]:
        """What this build used, read-only; lets the previous build's entries go."""
        self._earlier = {}
        return MappingProxyType(self.kept)
