"""Finding the processes a test started by a marker in their command line, on the host's /proc.

Sandboxed programs run in PID namespaces of their own, so `$$` and `$!` are not host pids: tests
give the programs they start a unique word and look for it here."""

from __future__ import annotations

import os

__all__ = ["holding"]


def holding(marker: str) -> list[int]:
    """Host pids whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if entry.isdigit() and marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found
