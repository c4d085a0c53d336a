"""Shell words after quote removal: what the shell would pass as one argument, when that is knowable.

`'rm'`, `r\\m`, `"r"m` and `$'\\x72m'` are all the word `rm`. A word holding a variable, a
substitution or an arithmetic expansion has no static value; its literal prefix (the text before
the first dynamic part) is kept, because `/etc/$name` still names something under `/etc`.
`$HOME` and `${HOME}` are the one expansion resolved, to the call site's home directory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["ALTERNATIVE_OPERATORS", "Word", "alternative", "ansi_c", "evaluate"]

_QUOTED_TILDE = ('"~', "'~", "\\~")
_UNQUOTED_SPECIAL = re.compile(r"[\\*?\[{]")
# A `{...}` group without braces or blanks inside; whether it holds `,` or `..` is checked on the
# match. (One regex with the check inside, `\{[^{}\s]*,[^{}\s]*\}`, backtracks quadratically on
# `{,,,,...`.)
_BRACE_GROUP = re.compile(r"\{[^{}\s]*\}")
_ANSI_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ANSI_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S)
_DOUBLE_QUOTE_ESCAPE = re.compile(r'\\([$`"\\\n])')
ALTERNATIVE_OPERATORS = frozenset((":-", "-", ":=", "=", ":+", "+"))
"""`${name OP word}` forms whose value may be `word` (its default, or its alternative)."""


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
    node: Node | None
    """Where the word sits in the source (byte offsets are read only when needed); None for a word read
    without the syntax tree (`plain_line`), which is plain: nothing reads its node."""
    kind: str
    """The node type (`word`, `string`, `concatenation`, ...)."""
    variables: tuple[str, ...] | None = ()
    """The variables (`$x`, `${x}`) whose values were not known; None when a dynamic part is
    something else (a substitution, `${x:-...}`), so knowing the variables would not help."""
    shape: str = ""
    """The value with each dynamic part as NUL (`"$d/../x"` → `\\0/../x`): what its literal parts say."""
    defaults: tuple[str | None, ...] = ()
    """The word as it is when each `${x:-word}`-like expansion in it (`:-`, `-`, `:=`, `=`, `:+`, `+`)
    gives its word: `(value,)`, or `(None,)` when that is only known when it runs; a value starting
    with `~` comes with its `./~` form too (`(value, "./" + value)`), as whether bash expands that tilde
    depends on quotes. Empty when the word holds no such expansion."""


# The named tuple's own constructor takes keywords and defaults, at several times the cost.
_new_word = tuple.__new__


class _Builder:
    __slots__ = ("alternatives", "defaulted", "dynamic", "glob", "parts", "shape", "variables")

    def __init__(self, *, alternatives: bool = False) -> None:
        self.parts: list[str] = []
        self.shape: list[str] = []
        self.dynamic = False
        self.glob = False
        self.variables: list[str] | None = []
        self.alternatives = alternatives
        """Whether `${x:-word}`-like expansions give their word (the second reading of a word)."""
        self.defaulted = False
        """Whether the word holds such an expansion."""

    def unknown(self, name: str | None) -> None:
        self.dynamic = True
        self.shape.append("\0")
        if name is None:
            self.variables = None
        elif self.variables is not None:
            self.variables.append(name)

    def add(self, text: str) -> None:
        if not self.dynamic:
            self.parts.append(text)
        self.shape.append(text)


def evaluate(node: Node, known: Mapping[str, str], kind: str | None = None, *, source: bytes) -> Word:
    """The word `node` (a command name or argument) after quote removal; `kind` is its node type.

    `known` holds the variables whose value is known (`HOME`, and what the line assigned).

    Text comes from `source`, the command as given, not from the tree: the parser may have seen a
    sanitized copy of the same length (see `parser.parse`).
    """
    if kind is None:
        kind = node.type
    raw = source[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")
    if kind == "word" and not _UNQUOTED_SPECIAL.search(raw):
        return _new_word(Word, (raw, raw, raw, False, node, kind, (), "", ()))  # Word(raw, raw, raw, False, node, kind)
    builder = _Builder()
    if kind == "concatenation" and "{" in raw and "}" in raw and ("," in raw or ".." in raw):
        # `{a,b}` and `{'a b',c}` arrive as several pieces (`{`, `a,b`, `}`), so no single piece
        # shows them; bash expands braces before it removes quotes.
        builder.glob = True
    _piece(node, kind, raw, known, builder, source)
    prefix = "".join(builder.parts)
    tilde = prefix[:1] == "~" and literal_tilde(raw)
    if tilde:  # `"~/x"` is `./~/x`: bash expands only a tilde-prefix none of whose characters is quoted
        prefix = "./" + prefix
    if not builder.dynamic:
        return Word(raw, prefix, prefix, builder.glob, node, kind, (), prefix)
    variables = tuple(builder.variables) if builder.variables is not None else None
    defaults: tuple[str | None, ...] = ()
    if builder.defaulted:
        again = _Builder(alternatives=True)
        _piece(node, kind, raw, known, again, source)
        default = None if again.dynamic else "".join(again.parts)
        # `"${x:-~/y}"` gives `~/y` as it is (quoted), `${x:-~/y}` the home directory's: both are checked
        defaults = (default,) if default is None or default[:1] != "~" else (default, "./" + default)
    shape = "".join(builder.shape)
    return Word(raw, None, prefix, builder.glob, node, kind, variables, "./" + shape if tilde else shape, defaults)


def literal_tilde(raw: str) -> bool:
    """Whether a word's text starts with a `~` bash leaves as it is: quoted (`"~/x"`, `'~'`, `$'~'`),
    escaped (`\\~`), or heading a tilde-prefix that holds a quoted character (`~"/x"`, `~""`). Such a
    word names `./~...`, an entry of the working directory, never the home directory."""
    if raw[:2] in _QUOTED_TILDE or raw[:3] == "$'~":
        return True
    return raw[:1] == "~" and any(quote in raw.partition("/")[0] for quote in "\"'\\")


def alternative(node: Node, source: bytes) -> tuple[str, str, Node | None] | None:
    """(name, operator, word node) of a `${name OP word}` expansion whose value may be `word`
    (OP one of `ALTERNATIVE_OPERATORS`; the word node is None when the word is empty), else None."""
    children = node.children
    if len(children) < 4 or children[0].type != "${" or children[2].type not in ALTERNATIVE_OPERATORS:
        return None
    name = children[1]
    if name.type not in ("variable_name", "special_variable_name"):
        return None
    word = children[3] if children[3].type != "}" else None
    return _text(name, source), children[2].type, word


def _piece(node: Node, kind: str, text: str, known: Mapping[str, str], out: _Builder, source: bytes) -> None:
    if kind == "word" or kind == "number":
        out.add(_unquoted(text, out) if _UNQUOTED_SPECIAL.search(text) else text)
    elif kind == "raw_string":
        out.add(text[1:-1])
    elif kind == "string":
        _double_quoted(node, known, out, source)
    elif kind == "concatenation":
        for child in node.children:
            _piece(child, child.type, _text(child, source), known, out, source)
    elif kind == "brace_expression":  # `{1..10}`: a sequence, expanded with the word's other braces
        out.glob = True
        out.add(text)
    elif kind == "ansi_c_string":
        out.add(ansi_c(text[2:-1]))
    elif kind == "simple_expansion" or kind == "expansion":
        _expansion(node, kind, text, known, out, source)
    else:
        out.unknown(None)


def _double_quoted(node: Node, known: Mapping[str, str], out: _Builder, source: bytes) -> None:
    """`"…"`. tree-sitter leaves blanks and line breaks between its pieces out of every piece (`"a⏎b"`
    is `a` and `b`, `" "` has none): the text between the pieces is read from the source, so the value
    is the one bash gives (a symlink named `a⏎b` is the one `cat "a⏎b/x"` opens)."""
    start, end = node.start_byte, node.end_byte
    position = start + 1 if source[start : start + 1] == b'"' else start
    if end - 1 >= position and source[end - 1 : end] == b'"':
        end -= 1
    for child in node.named_children:
        _between(source[position : child.start_byte], out)
        child_kind = child.type
        if child_kind == "string_content":
            out.add(_DOUBLE_QUOTE_ESCAPE.sub(_keep_escaped, _text(child, source)))
        else:
            _piece(child, child_kind, _text(child, source), known, out, source)
        position = max(position, child.end_byte)
    _between(source[position:end], out)


def _between(gap: bytes, out: _Builder) -> None:
    """Text of a double-quoted string that no piece holds: blanks and line breaks, taken literally. Anything
    else there is not understood, and makes the word only known when it runs."""
    if not gap:
        return
    if gap.isspace():
        out.add(gap.decode("utf-8", "surrogateescape"))
    else:
        out.unknown(None)


def _expansion(node: Node, kind: str, text: str, known: Mapping[str, str], out: _Builder, source: bytes) -> None:
    """`$NAME`, `${NAME}`; `${NAME:-word}` and its kin, whose word is the value bash may use instead."""
    if kind == "expansion" and (parts := alternative(node, source)) is not None:
        out.defaulted = True
        word = parts[2]
        if not out.alternatives:  # the variable's value (its word is checked as `Word.defaults`)
            out.unknown(parts[0] if _NAME.fullmatch(parts[0]) else None)
        elif word is not None:
            _piece(word, word.type, _text(word, source), known, out, source)
        return
    name = _variable(text)
    value = known.get(name) if name is not None else None
    if value is not None:
        out.add(value)
    else:
        out.unknown(name)


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


def _variable(text: str) -> str | None:
    """`x` for `$x` or `${x}`; None for any other expansion (`${x:-y}`, `$1`, `$@`)."""
    name = text[2:-1] if text.startswith("${") and text.endswith("}") else text[1:]
    return name if _NAME.fullmatch(name) else None


def ansi_c(body: str) -> str:
    """The value of `$'body'` as bash gives it in a UTF-8 locale (C.UTF-8, the bash tool's).

    `\\xHH` and octal escapes are bytes (octal keeps the low 8 bits: `\\777` is 0xFF), `\\u`
    and `\\U` are characters encoded as UTF-8, `\\cX` is a control character, and the value
    ends at the first NUL, as bash's C strings do. Bytes that are not UTF-8 stay as surrogate
    escapes.
    """
    out = bytearray()
    position = 0
    for match in _ANSI_ESCAPE.finditer(body):
        out += body[position : match.start()].encode("utf-8", "surrogateescape")
        position = match.end()
        out += _ansi_escape(match.group(1))
    out += body[position:].encode("utf-8", "surrogateescape")
    nul = out.find(0)
    if nul >= 0:
        del out[nul:]
    return out.decode("utf-8", "surrogateescape")


def _ansi_escape(body: str) -> bytes:
    head = body[0]
    if head == "x" and len(body) > 1:
        return bytes((int(body[1:], 16),))
    if head in "uU" and len(body) > 1:
        code = int(body[1:], 16)
        return (chr(code) if code < 0x110000 and not 0xD800 <= code < 0xE000 else "\ufffd").encode()
    if head in "01234567":
        return bytes((int(body, 8) & 0xFF,))
    if head == "c" and len(body) == 2:
        return bytes((0x7F if body[1] == "?" else ord(body[1]) & 0x1F,))
    if head in "\\'\"?":
        return head.encode()
    # bash keeps the backslash of an escape it does not know (`$'\9'` is the two characters `\9`).
    return _ANSI_ESCAPES.get(head, "\\" + body).encode("utf-8", "surrogateescape")


def _text(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")
