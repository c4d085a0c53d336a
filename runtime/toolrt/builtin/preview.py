"""The change a file tool's call would make, as a diff, for the `protected` ask.

A person asked whether `write`, `edit` or `apply_patch` may change a protected file (`.git/config`,
`tools.d/x.yaml`, `.envrc`) judges the change, not only the name: the ask carries the unified diff
the call would apply, computed without writing anything and cut to `MAX_SHOWN_DIFF` characters.
What is shown escapes control characters (`toolrt.permissions.shown`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..beneath import steady_realpath
from ..errors import ToolFailure
from .diff import MAX_DIFF_CHARS, omitted_diff, trim_diff, unified_diff
from .filepaths import read_regular, stat_or_none
from .replacers import replace

__all__ = ["MAX_SHOWN_DIFF", "bounded", "edit_diff", "write_diff"]

MAX_SHOWN_DIFF = 8000
"""Characters of a diff an ask carries; the rest is counted, not shown."""


def bounded(diff: str) -> str:
    """`diff` cut at a line end to at most `MAX_SHOWN_DIFF` characters, saying how much was left out."""
    if len(diff) <= MAX_SHOWN_DIFF:
        return diff
    cut = diff.rfind("\n", 0, MAX_SHOWN_DIFF) + 1 or MAX_SHOWN_DIFF
    return f"{diff[:cut]}… ({len(diff) - cut} more characters of the diff not shown)\n"


def _current(path: Path) -> str | None:
    """The file's text ("" when it does not exist), or None when it is too large or not text."""
    display = str(path)
    status = stat_or_none(path, display)
    if status is None:
        return ""
    if status.st_size > MAX_DIFF_CHARS:
        return None
    return read_regular(path, display)[0]


def write_diff(args: Mapping[str, Any], cwd: Path) -> str | None:
    """`write`'s `permission.preview` hook: the diff its call would make (bounded), or None."""
    content = args.get("content")
    return _diff(args, cwd, lambda before: content if isinstance(content, str) else None)


def edit_diff(args: Mapping[str, Any], cwd: Path) -> str | None:
    """`edit`'s `permission.preview` hook: the diff its call would make (bounded), or None when the
    edit would not apply."""
    return _diff(args, cwd, lambda before: _edited(args, before))


def _diff(args: Mapping[str, Any], cwd: Path, after_of: Callable[[str], str | None]) -> str | None:
    """The diff from the `filePath` file's text to `after_of(text)`, or None when there is none to show
    (a file that cannot be read, a change that would not apply)."""
    raw = args.get("filePath")
    if not isinstance(raw, str) or not raw or "\x00" in raw:
        return None
    path = Path(os.path.normpath(cwd / os.path.expanduser(raw)))
    try:
        before = _current(Path(steady_realpath(path)))
        if before is None:
            return omitted_diff(str(path))
        after = after_of(before)
    except (ToolFailure, OSError, ValueError):
        return None
    if after is None:
        return None
    return bounded(trim_diff(unified_diff(str(path), before.replace("\r\n", "\n"), after.replace("\r\n", "\n"))))


def _edited(args: Mapping[str, Any], before: str) -> str | None:
    old, new = args.get("oldString"), args.get("newString")
    if not isinstance(old, str) or not isinstance(new, str) or old == new:
        return None
    if old == "":
        return new
    crlf = "\r\n" in before
    if crlf:
        old, new = old.replace("\r\n", "\n").replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
    return replace(before, old, new, replace_all=bool(args.get("replaceAll", False)))
