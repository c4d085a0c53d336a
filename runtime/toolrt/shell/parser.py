"""The tree-sitter-bash parser, created on first use so importing `toolrt.shell` stays cheap."""

from __future__ import annotations

import re
import threading
import time
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from tree_sitter import Parser, Tree

__all__ = ["INLINE_BYTES", "has_astral", "parse"]

INLINE_BYTES = 4096
"""Sources up to this size are parsed directly; longer ones under the caller's deadline."""

# A tree-sitter parser holds mutable state, so each thread keeps its own; building one is cheap
# once the language is loaded, and the language is loaded once per process.
_local = threading.local()


def _new_parser() -> Parser:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


# tree-sitter-bash 0.25 corrupts its heap on characters outside the Basic Multilingual Plane (found
# by fuzzing: the process segfaults some parses later). Their lead bytes are swapped for `.` before
# parsing: same length, so byte offsets still index the caller's source, and `.` is, like those
# characters, an ordinary word character to the shell. Node text must be read from the caller's
# source, never from the tree.
_ASTRAL_LEAD = re.compile(rb"[\xf0-\xff]")
_SANITIZE = bytes.maketrans(bytes(range(0xF0, 0x100)), b"." * 16)


def has_astral(source: bytes) -> bool:
    """Whether `source` holds bytes that `parse` replaces (4-byte UTF-8 sequences, or invalid bytes)."""
    return not source.isascii() and _ASTRAL_LEAD.search(source) is not None


@overload
def parse(source: bytes) -> Tree: ...
@overload
def parse(source: bytes, deadline: float) -> Tree | None: ...
def parse(source: bytes, deadline: float | None = None) -> Tree | None:
    """Parse bash source into a syntax tree. Never raises on bad input: errors become ERROR nodes.

    With a `deadline` (a `time.monotonic()` value), a source longer than `INLINE_BYTES` is parsed
    with a progress check and None is returned once the deadline passes; shorter ones take the
    direct path (a few microseconds, nothing to interrupt).
    """
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = _new_parser()
    if has_astral(source):
        source = source.translate(_SANITIZE)
    if deadline is None or len(source) <= INLINE_BYTES:
        return parser.parse(source)
    size = len(source)

    def read(offset: int, _point: tuple[int, int]) -> bytes:
        return source[offset:size]

    def cancel(*_state: object) -> bool:
        return time.monotonic() > deadline

    try:
        return parser.parse(read, progress_callback=cancel)
    except ValueError:  # cancelled: tree-sitter reports it as "Parsing failed"
        parser.reset()
        return None
