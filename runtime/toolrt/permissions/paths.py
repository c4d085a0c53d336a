"""Path permissions: a request's path matches a rule in its project-relative form or its absolute one.

Calls ask path permissions in one form each (`read` and `list` absolute, `edit` and `lsp` relative to
the project root, `external_directory` an absolute `DIR/*`, `protected` relative inside the root), and
a person writes rules in whichever form comes to mind. So a rule of a path permission matches a request
when its pattern matches either form of the request's path: a relative pattern is anchored at the
project root (`secrets/*` is `<root>/secrets/*`), an absolute one is compared with the absolute path.
The form the call asked stays one of the two, so no rule that matched before stops matching.
"""

from __future__ import annotations

import os
import posixpath

from .wildcard import fold

__all__ = ["PATH_PERMISSIONS", "absolute_form", "path_forms", "relative_form"]

PATH_PERMISSIONS = frozenset({"read", "edit", "list", "lsp", "external_directory", "protected"})
"""Permissions whose patterns are filesystem paths."""

_ANY_BELOW = "/*"


def absolute_form(pattern: str, root: str) -> str:
    """`pattern` (a path relative to `root`, or already absolute) as an absolute, normalised path.

    A trailing `/*` (an `external_directory` or `protected` pattern for what lies under a directory) is
    kept as written.
    """
    stem, tail = _split_tail(pattern)
    if stem.startswith("/"):
        return pattern
    return posixpath.normpath(posixpath.join(root, stem)) + tail


def relative_form(pattern: str, root: str) -> str:
    """`pattern` relative to `root`: `src/a.py` inside it, `../x` outside, `.` for the root itself."""
    stem, tail = _split_tail(pattern)
    if not stem.startswith("/"):
        return pattern
    base = root.rstrip("/") or "/"
    if stem.startswith(base + "/") and base != "/":
        inside = stem[len(base) + 1 :]
    else:
        inside = posixpath.relpath(stem, base) if stem != base else "."
    return inside + tail


def path_forms(pattern: str, root: str) -> tuple[str, str]:
    """The folded forms a rule of a path permission is matched against: as asked, then the other one."""
    text = pattern.replace("\\", "/") if os.sep == "\\" else pattern
    other = relative_form(text, root) if text.startswith("/") else absolute_form(text, root)
    return fold(text), fold(other)


def _split_tail(pattern: str) -> tuple[str, str]:
    if pattern.endswith(_ANY_BELOW) and len(pattern) > len(_ANY_BELOW):
        return pattern[: -len(_ANY_BELOW)], _ANY_BELOW
    return pattern, ""
