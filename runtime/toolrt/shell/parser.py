"""The tree-sitter-bash parser, created on first use so importing `toolrt.shell` stays cheap."""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Parser, Tree

__all__ = ["has_astral", "parse"]

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


def parse(source: bytes) -> Tree:
    """Parse bash source into a syntax tree. Never raises on bad input: errors become ERROR nodes."""
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = _new_parser()
    if has_astral(source):
        source = source.translate(_SANITIZE)
    return parser.parse(source)
