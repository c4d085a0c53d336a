"""OpenCode's `Wildcard.match`: `*` any run (crossing `/`), `?` one character, a trailing ` *` optional.

Both the text and the pattern have `\\` folded to `/` first, every other character is literal
(regex metacharacters included), and the match is anchored at both ends with dot-all semantics.
On Windows the match ignores case, as OpenCode's does.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from functools import lru_cache

__all__ = [
    "CASE_INSENSITIVE",
    "Matcher",
    "compile_matcher",
    "compile_pattern",
    "expand_pattern",
    "fold",
    "literal_prefix",
    "match",
]

CASE_INSENSITIVE = sys.platform == "win32"
_FLAGS = re.S | (re.I if CASE_INSENSITIVE else 0)
_OPTIONAL_TAIL = " *"

Matcher = Callable[[str], bool]
"""A compiled wildcard: takes the folded text (`fold(text)`), says whether the pattern matches it."""


def fold(text: str) -> str:
    """The form both sides are compared in: `\\` → `/` (and lower case where matching ignores case)."""
    if "\\" in text:
        text = text.replace("\\", "/")
    return text.lower() if CASE_INSENSITIVE else text


@lru_cache(maxsize=65536)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The anchored regex of a wildcard; use `.fullmatch(fold(text))`. Cached: compile once, match many."""
    pattern = pattern.replace("\\", "/")
    optional_tail = pattern.endswith(_OPTIONAL_TAIL)
    if optional_tail:
        pattern = pattern[: -len(_OPTIONAL_TAIL)]
    parts: list[str] = []
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            # Escaping every other character means no pattern can be an invalid or surprising regex.
            parts.append(re.escape(char))
    if optional_tail:
        parts.append("(?: .*)?")
    return re.compile("".join(parts), _FLAGS)


def _has_wildcard(text: str) -> bool:
    return "*" in text or "?" in text


@lru_cache(maxsize=65536)
def compile_matcher(pattern: str) -> Matcher:
    """The fastest exact test for `pattern`; same answers as `compile_pattern(pattern).fullmatch`.

    Most rules are a literal, `prefix*`, `*suffix`, `*infix*` or `command *`; those become string
    comparisons, because compiling a Python regex costs ~100 µs and a 10,000-rule config would
    spend seconds on it at every reload. Other shapes use the regex.
    """
    folded = fold(pattern)
    if not _has_wildcard(folded):
        return folded.__eq__
    if folded.endswith(_OPTIONAL_TAIL) and not _has_wildcard(stem := folded[: -len(_OPTIONAL_TAIL)]):
        spaced = stem + " "
        return lambda text: text == stem or text.startswith(spaced)
    if "?" not in folded:
        parts = folded.split("*")
        if len(parts) == 2:
            head, tail = parts
            size = len(head) + len(tail)
            return lambda text: len(text) >= size and text.startswith(head) and text.endswith(tail)
        if len(parts) == 3 and not parts[0] and not parts[2]:
            infix = parts[1]
            return lambda text: infix in text
    fullmatch = compile_pattern(pattern).fullmatch
    return lambda text: fullmatch(text) is not None


def match(text: str, pattern: str) -> bool:
    """True when `text` matches the wildcard `pattern` in full."""
    return compile_matcher(pattern)(fold(text))


def literal_prefix(pattern: str) -> str:
    """The folded literal text every match of `pattern` starts with (empty when it starts with a wildcard)."""
    pattern = fold(pattern)
    if pattern.endswith(_OPTIONAL_TAIL):
        # `ls *` also matches `ls`, so the space before the optional tail is not part of the prefix.
        pattern = pattern[: -len(_OPTIONAL_TAIL)]
    for index, char in enumerate(pattern):
        if char in "*?":
            return pattern[:index]
    return pattern


def _expand_variable(pattern: str, name: str, value: str, *, boundary: bool) -> str | None:
    if not pattern.startswith(name):
        return None
    rest = pattern[len(name) :]
    if boundary and rest and not rest.startswith("/"):
        return None
    return value + rest


def expand_pattern(pattern: str, *, home: str, data_dir: str | None) -> str:
    """Expand `~`, `~/…`, `$HOME…` (to `home`) and `$TOOLRT_DATA`, `$TOOLRT_DATA/…` (to `data_dir`).

    Only the start of a pattern is expanded, as OpenCode's `expand`: `/a/~/b` stays as written.
    `$HOMEfoo` becomes `<home>foo` like OpenCode; `$TOOLRT_DATA` expands only before `/` or at the end,
    and stays literal when no data directory is known.
    """
    if pattern == "~":
        return home
    if pattern.startswith("~/"):
        return home + pattern[1:]
    if data_dir is not None:
        expanded = _expand_variable(pattern, "$TOOLRT_DATA", data_dir.rstrip("/"), boundary=True)
        if expanded is not None:
            return expanded or "/"
    expanded = _expand_variable(pattern, "$HOME", home, boundary=False)
    return pattern if expanded is None else expanded
