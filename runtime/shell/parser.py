"""The tree-sitter-bash parser, created on first use so importing `runtime.shell` stays cheap."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Parser, Tree

__all__ = ["parse"]

# A tree-sitter parser holds mutable state, so each thread keeps its own; building one is cheap
# once the language is loaded, and the language is loaded once per process.
_local = threading.local()


def _new_parser() -> Parser:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def parse(source: bytes) -> Tree:
    """Parse bash source into a syntax tree. Never raises on bad input: errors become ERROR nodes."""
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = _new_parser()
    return parser.parse(source)
