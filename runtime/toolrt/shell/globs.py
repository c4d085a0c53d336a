"""The paths a glob (`l?k/x`, `[l]nk/*`) matches now, so a symlink it reaches is checked like any path.

bash matches each component against the directory entries (dot files only with a leading `.`), and
follows symlinks. The walk here does the same one component at a time and reads at most
`MAX_ENTRIES` directory entries in all; past that the caller fails closed rather than guess.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re

__all__ = ["GLOB_OPTIONS", "GLOB_VARIABLES", "MAX_ENTRIES", "glob_options", "glob_paths"]

MAX_ENTRIES = 2_000
"""Directory entries read per glob before giving up."""
_MAGIC = re.compile(r"[*?\[]")
GLOB_OPTIONS = frozenset(("globskipdots", "nocaseglob", "dotglob", "extglob", "nullglob", "failglob", "globstar"))
GLOB_VARIABLES = frozenset(("GLOBIGNORE", "GLOBSORT"))
"""Variables that change which paths a glob gives."""


def glob_options(args: list[str | None]) -> str | None:
    """The glob options `shopt ARGS…` sets or unsets (as `-s nocaseglob`), or None when it changes
    none: after them a glob matches other paths than the default rules here find."""
    if not any(arg is not None and arg[:1] == "-" and ("s" in arg or "u" in arg) for arg in args):
        return None  # `shopt nocaseglob` and `shopt -p` only print
    changed = [arg for arg in args if arg is None or arg in GLOB_OPTIONS]
    if not changed:
        return None
    return " ".join(arg if arg is not None else "…" for arg in args)


def glob_paths(pattern: str, cwd: str | None) -> list[str] | None:
    """Absolute paths `pattern` matches (relative to `cwd`), or None when there are too many to read.

    A pattern whose fixed part is unknown (relative, no cwd) matches nothing checkable: [].
    """
    if not pattern.startswith("/"):
        if cwd is None:
            return []
        pattern = cwd.rstrip("/") + "/" + pattern
    parts = pattern.split("/")
    current = [parts[0] or "/"]
    budget = MAX_ENTRIES
    for part in parts[1:]:
        if not part:
            continue
        if _MAGIC.search(part) is None:
            current = [posixpath.join(directory, part) for directory in current]
            continue
        matched: list[str] = []
        hidden = part.startswith(".")
        for directory in current:
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        budget -= 1
                        if budget < 0:
                            return None
                        if (hidden or not entry.name.startswith(".")) and fnmatch.fnmatchcase(entry.name, part):
                            matched.append(posixpath.join(directory, entry.name))
            except (OSError, ValueError):  # ValueError: a NUL in the name, which no path holds
                continue
        current = matched
        if not current:
            return []
    return current
