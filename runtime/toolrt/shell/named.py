"""Commands that text the analyzer could not see into still visibly names.

When part of a line is opaque (a parse error, a `${x:-$(...)}` operand, a script for a program the
analyzer does not model), the rules still get to deny it when it plainly names a denied command:
`echo ${x:-$(rm -rf /)}` names `rm -rf /`. This is a deliberately loose reading, used only to find
denials, never to allow: quotes and backslashes are dropped, the text is cut into words at blanks and
shell punctuation, and every word that could be a command name starts a candidate made of it and the
words after it up to the next command separator. One linear scan, a bounded number of candidates.
"""

from __future__ import annotations

import posixpath
import re

__all__ = ["MAX_CANDIDATES", "named_commands"]

MAX_CANDIDATES = 2_000
"""Distinct candidates per text; past this `named_commands` reports that it could not check them all."""
MAX_SCAN_CHARS = 16_000
"""Longer text is not scanned at all (reported as not checked): the scan must stay within the time budget."""
_WORDS_PER_CANDIDATE = 12
_CANDIDATE_CHARS = 256

_QUOTING = str.maketrans("", "", "'\"\\")
# Split points: what ends a command, then what ends a word. Single character classes match in
# linear time whatever the input.
_SEGMENTS = re.compile(r"[;&|()<>`\n{}]+")
_WORD_BREAKS = re.compile(r"[\s$=\[\],:]+")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./")
_OPTION_LEAD = "-:+?#%!@,"


def named_commands(text: str) -> tuple[tuple[str, ...], bool]:
    """(candidate command texts, complete): `complete` is False when the text is longer than
    `MAX_SCAN_CHARS` or holds more than `MAX_CANDIDATES` candidates, so a caller that must find
    every denied command has to fail closed."""
    if len(text) > MAX_SCAN_CHARS:
        return (), False
    found: dict[str, None] = {}
    for segment in _SEGMENTS.split(text.replace("\\\n", "").translate(_QUOTING)):
        words = [word for word in _WORD_BREAKS.split(segment) if word]
        for index, word in enumerate(words):
            name = word.lstrip(_OPTION_LEAD)
            if not name or name[0] not in _NAME_START:
                continue
            tail = " ".join(words[index + 1 : index + _WORDS_PER_CANDIDATE])
            if len(tail) > _CANDIDATE_CHARS:
                tail = tail[:_CANDIDATE_CHARS]
            found[f"{name} {tail}" if tail else name] = None
            if "/" in name:
                base = posixpath.basename(name.rstrip("/"))
                if base:
                    found[f"{base} {tail}" if tail else base] = None
            if len(found) > MAX_CANDIDATES:
                return tuple(found), False
    return tuple(found), True
