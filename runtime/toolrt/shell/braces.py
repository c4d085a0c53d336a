"""Brace expansion of a word's value, enough to see every path `cat {a,/etc/passwd}` names."""

from __future__ import annotations

import re

__all__ = ["expand_braces"]

# An innermost `{...}` group; the first one holding a comma is expanded. (A regex with the comma
# inside, `\{[^{}]*,[^{}]*\}`, backtracks quadratically on `{,,,,...`.)
_GROUP = re.compile(r"\{([^{}]*)\}")
_LIMIT = 64


def expand_braces(word: str) -> list[str]:
    """The words a comma brace list expands to (innermost lists first, at most 64 results).

    `a{b,c}d` → `["abd", "acd"]`; a word without a comma list is returned alone. Sequences
    (`{1..3}`) are left as written: they do not change which directory a path is in.
    """
    pending = [word]
    done: list[str] = []
    while pending and len(done) + len(pending) <= _LIMIT:
        current = pending.pop()
        match = next((found for found in _GROUP.finditer(current) if "," in found.group(1)), None)
        if match is None:
            done.append(current)
            continue
        head, tail = current[: match.start()], current[match.end() :]
        pending.extend(head + option + tail for option in reversed(match.group(1).split(",")))
    done.extend(pending)
    return done
