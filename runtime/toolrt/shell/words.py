"""Shell words after quote removal: what the shell would pass as one argument, when that is knowable.

`'rm'`, `r\\m`, `"r"m` and `$'\\x72m'` are all the word `rm`. A word holding a variable, a
substitution or an arithmetic expansion has no static value; its literal prefix (the text before
the first dynamic part) is kept, because `/etc/$name` still names something under `/etc`.
`$HOME` and `${HOME}` are the one expansion resolved, to the call site's home directory.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["Word", "evaluate"]

_UNQUOTED_SPECIAL = re.compile(r"[\\*?\[{]")
# A `{...}` group without braces or blanks inside; whether it holds `,` or `..` is checked on the
# match. (One regex with the check inside, `\{[^{}\s]*,[^{}\s]*\}`, backtracks quadratically on
# `{,,,,...`.)
_BRACE_GROUP = re.compile(r"\{[^{}\s]*\}")
_ANSI_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ANSI_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S)
_DOUBLE_QUOTE_ESCAPE = re.compile(r'\\([$`"\\\n])')


class Word(NamedTuple):
    """One shell word of a command.

    A named tuple rather than a dataclass: the analyzer builds one per word on the hot path.
    """

    raw: str
    """The source text, quotes included."""
    value: str | None
    """The word after quote removal; None when part of it is only known at run time."""
    prefix: str
    """The literal text before the first dynamic part (the whole value when static)."""
    glob: bool
    """Unquoted `*`, `?`, `[` or a brace expansion: the shell would turn it into other words."""
    node: Node
    """Where the word sits in the source (byte offsets are read only when needed)."""
    kind: str
    """The node type (`word`, `string`, `concatenation`, ...)."""


class _Builder:
    __slots__ = ("dynamic", "glob", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.dynamic = False
        self.glob = False

    def add(self, text: str) -> None:
        if not self.dynamic:
            self.parts.append(text)


def evaluate(node: Node, home: str, kind: str | None = None, *, source: bytes) -> Word:
    """The word `node` (a command name or argument) after quote removal; `kind` is its node type.

    Text comes from `source`, the command as given, not from the tree: the parser may have seen a
    sanitized copy of the same length (see `parser.parse`).
    """
    if kind is None:
        kind = node.type
    raw = _text(node, source)
    if kind == "word" and not _UNQUOTED_SPECIAL.search(raw):
        return Word(raw, raw, raw, False, node, kind)
    builder = _Builder()
    if kind == "concatenation" and _has_brace_expansion(raw):
        # `{a,b}` arrives as several pieces (`{`, `a,b`, `}`), so no single piece shows it.
        builder.glob = True
    _piece(node, kind, raw, home, builder, source)
    prefix = "".join(builder.parts)
    return Word(raw, None if builder.dynamic else prefix, prefix, builder.glob, node, kind)


def _piece(node: Node, kind: str, text: str, home: str, out: _Builder, source: bytes) -> None:
    if kind == "word" or kind == "number":
        out.add(_unquoted(text, out) if _UNQUOTED_SPECIAL.search(text) else text)
    elif kind == "raw_string":
        out.add(text[1:-1])
    elif kind == "string":
        for child in node.named_children:
            if out.dynamic:
                return
            child_kind = child.type
            if child_kind == "string_content":
                out.add(_DOUBLE_QUOTE_ESCAPE.sub(_keep_escaped, _text(child, source)))
            else:
                _piece(child, child_kind, _text(child, source), home, out, source)
    elif kind == "concatenation":
        for child in node.children:
            if out.dynamic:
                return
            _piece(child, child.type, _text(child, source), home, out, source)
    elif kind == "ansi_c_string":
        out.add(_ANSI_ESCAPE.sub(_ansi_escape, text[2:-1]))
    elif kind in ("simple_expansion", "expansion") and text in ("$HOME", "${HOME}"):
        out.add(home)
    else:
        out.dynamic = True


def _unquoted(text: str, out: _Builder) -> str:
    """Backslash removal for an unquoted word; notes globbing and brace expansion."""
    if _has_brace_expansion(text):
        out.glob = True
    chars: list[str] = []
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char == "\\":
            if index + 1 < length and text[index + 1] != "\n":
                chars.append(text[index + 1])
            index += 2
            continue
        if char in "*?[":
            out.glob = True
        chars.append(char)
        index += 1
    return "".join(chars)


def _has_brace_expansion(text: str) -> bool:
    if "{" not in text:
        return False
    for match in _BRACE_GROUP.finditer(text):
        group = match.group()
        if "," in group or ".." in group:
            return True
    return False


def _keep_escaped(match: re.Match[str]) -> str:
    escaped = match.group(1)
    return "" if escaped == "\n" else escaped


def _ansi_escape(match: re.Match[str]) -> str:
    body = match.group(1)
    head = body[0]
    if head in "xuU" and len(body) > 1:
        code = int(body[1:], 16)
        return chr(code) if code < 0x110000 else "\ufffd"
    if head in "01234567":
        return chr(int(body, 8))
    if head == "c" and len(body) == 2:
        return chr(ord(body[1]) & 0x1F)
    if head in "\\'\"?":
        return head
    # bash keeps the backslash of an escape it does not know (`$'\9'` is the two characters `\9`).
    return _ANSI_ESCAPES.get(head, "\\" + body)


def _text(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")
