"""Lines of plain commands, read without the syntax tree.

Most lines a model runs are a few commands of plain words joined by `&&`, `||`, `;` and `|`: `ls -la src`,
`git commit -m "wip" && git push`, `grep -rn TODO src | head`. For those, tree-sitter-bash gives one
tree shape and nothing in it the analyzer would read beyond the words: `read_plain` reads the same
commands straight from the text, and returns None for any line holding anything else (a `$`, a glob,
a quote inside a word, a redirection, a newline, a comment, an assignment, a word tree-sitter reads
as a keyword). The analyzer then reads the line from its tree, as it reads every other line.

The shape (tree-sitter-bash 0.25): `;` separates the program's statements; a statement is a chain of
pipelines joined by `&&`/`||`, read left to right (`a && b || c` is `list(list(a && b) || c)`), and a
pipeline of one command is that command. `analyzer` walks that shape as the tree walk does.
`tests/test_bash_fast_paths.py` checks that both readings give the same requests.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["MAX_TOKENS", "PlainLine", "Token", "read_plain"]

MAX_TOKENS = 96
"""Words and operators in a line read this way: far below every budget of the tree walk."""

# Unquoted: letters, digits and `_./:@%+,=-`, nothing bash expands or treats as an operator.
_WORD = r"[A-Za-z0-9_./:@%+,=-]+"
# Quoted: printable ASCII without what bash expands inside (`$`, backtick, backslash), not starting
# with `~` (`"~"` is read by `words.evaluate`, as the tree walk does).
_DOUBLE = r'"(?:[\x20\x21\x23\x25-\x5b\x5d-\x5f\x61-\x7d][\x20\x21\x23\x25-\x5b\x5d-\x5f\x61-\x7e]*)?"'
_SINGLE = r"'(?:[\x20-\x26\x28-\x7d][\x20-\x26\x28-\x7e]*)?'"
_TOKEN = f"(?:{_WORD}|{_DOUBLE}|{_SINGLE})"
_COMMAND = f"{_TOKEN}(?:[ \\t]+{_TOKEN})*"
_OPERATOR = r"&&|\|\||[;|]"
_LINE = re.compile(f"[ \\t]*{_COMMAND}(?:[ \\t]*(?:{_OPERATOR})[ \\t]*{_COMMAND})*[ \\t]*;?[ \\t]*")
_TOKENS = re.compile(f"({_WORD})|({_DOUBLE}|{_SINGLE})|({_OPERATOR})")
_NUMBER = re.compile(r"-?(?:0x)?[0-9]+")  # what tree-sitter-bash reads as a `number` node


class Token(NamedTuple):
    """One word of a command: its text, where it starts and ends, and the node type tree-sitter gives it."""

    raw: str
    start: int
    end: int
    kind: str
    """`word`, `number`, `string` (double-quoted) or `raw_string` (single-quoted)."""


Pipeline = tuple[tuple[Token, ...], ...]
"""The commands of one pipeline (one command: no pipe)."""


class PlainLine(NamedTuple):
    """The statements of a line; each is its first pipeline and the (operator, pipeline) pairs after it."""

    statements: tuple[tuple[Pipeline, tuple[tuple[str, Pipeline], ...]], ...]


def read_plain(text: str) -> PlainLine | None:
    """The statements of `text` when it is a line of plain commands (see the module), else None."""
    if len(text) > MAX_TOKENS * 8 or not text.isascii() or _LINE.fullmatch(text) is None:
        return None
    statements: list[tuple[Pipeline, tuple[tuple[str, Pipeline], ...]]] = []
    chain: list[tuple[str, Pipeline]] = []
    pipeline: list[tuple[Token, ...]] = []
    command: list[Token] = []
    tokens = 0
    for match in _TOKENS.finditer(text):
        tokens += 1
        word, quoted, operator = match.groups()
        if word is not None:
            kind = "number" if _NUMBER.fullmatch(word) else "word"
            command.append(Token(word, match.start(), match.end(), kind))
            continue
        if quoted is not None:
            command.append(Token(quoted, match.start(), match.end(), "string" if quoted[0] == '"' else "raw_string"))
            continue
        if command:  # a `;` that ends the line follows no command
            pipeline.append(tuple(command))
            command = []
        if operator == "|":
            continue
        chain.append((operator, tuple(pipeline)))
        pipeline = []
        if operator == ";":
            statements.append(_statement(chain))
            chain = []
    if tokens > MAX_TOKENS:
        return None
    if command:
        pipeline.append(tuple(command))
    if pipeline:
        chain.append(("", tuple(pipeline)))
    if chain:
        statements.append(_statement(chain))
    return PlainLine(tuple(statements))


def _statement(chain: list[tuple[str, Pipeline]]) -> tuple[Pipeline, tuple[tuple[str, Pipeline], ...]]:
    """`chain` holds each pipeline with the operator that follows it; the statement pairs each pipeline
    after the first with the operator before it."""
    first = chain[0][1]
    rest = tuple((chain[index - 1][0], chain[index][1]) for index in range(1, len(chain)))
    return first, rest
