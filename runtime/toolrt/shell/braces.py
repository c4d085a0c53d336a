"""Brace expansion of a word's value, enough to see every path `cat {a,/etc/passwd}` names.

Bounded: past 64 words the caller fails closed rather than check some of them."""

from __future__ import annotations

import re

__all__ = ["expand_braces"]

# An innermost `{...}` group; the first one holding a comma is expanded. (A regex with the comma
# inside, `\{[^{}]*,[^{}]*\}`, backtracks quadratically on `{,,,,...`.)
_GROUP = re.compile(r"\{([^{}]*)\}")
_SEQUENCE = re.compile(r"([+-]?[0-9]+|[^0-9])\.\.([+-]?[0-9]+|[^0-9])(?:\.\.([+-]?[0-9]+))?")
_LIMIT = 64


def expand_braces(word: str) -> list[str] | None:
    """The words brace expansion makes of `word` (comma lists and `{a..b[..step]}` sequences), or
    None when there would be more than 64: the caller then fails closed.

    `a{b,c}d` → `["abd", "acd"]`; `{Z..a}` → `["Z", "[", "\\", "]", "^", "_", "`", "a"]` (bash's letter
    sequences run through the punctuation between the cases). A word without braces is returned alone.
    """
    pending = [word]
    done: list[str] = []
    while pending:
        if len(done) + len(pending) > _LIMIT:
            return None
        current = pending.pop()
        match = next((found for found in _GROUP.finditer(current) if _options(found.group(1)) is not None), None)
        if match is None:
            done.append(current)
            continue
        options = _options(match.group(1))
        assert options is not None
        if len(options) > _LIMIT:
            return None
        head, tail = current[: match.start()], current[match.end() :]
        pending.extend(head + option + tail for option in reversed(options))
    return done


def _options(body: str) -> list[str] | None:
    """The alternatives of one `{...}` body: a comma list, a sequence, or None (not an expansion)."""
    if "," in body:
        return body.split(",")
    match = _SEQUENCE.fullmatch(body)
    if match is None:
        return None
    start, stop, step_text = match.group(1), match.group(2), match.group(3)
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    if start.lstrip("+-").isdigit() and stop.lstrip("+-").isdigit():
        first, last = int(start), int(stop)
        if abs(last - first) // step >= _LIMIT:
            return [str(first)] * (_LIMIT + 1)
        width = (
            max(len(start), len(stop)) if start.lstrip("-").startswith("0") or stop.lstrip("-").startswith("0") else 0
        )
        numbers = range(first, last + (1 if last >= first else -1), step if last >= first else -step)
        return [str(number).zfill(width) if width else str(number) for number in numbers]
    if len(start) == 1 and len(stop) == 1 and start.isascii() and stop.isascii() and start.isalpha() and stop.isalpha():
        first, last = ord(start), ord(stop)
        if abs(last - first) // step >= _LIMIT:
            return [start] * (_LIMIT + 1)
        codes = range(first, last + (1 if last >= first else -1), step if last >= first else -step)
        return [chr(code) for code in codes]
    return None
