"""Lines of plain commands, read without the syntax tree.

Most lines a model runs are a few commands of plain words joined by `&&`, `||`, `;` and `|`: `ls -la src`,
`git commit -m "wip" && git push`, `grep -rn TODO src | head`. For those, tree-sitter-bash gives one
tree shape and nothing in it the analyzer would read beyond the words: `read_plain` reads the same
commands straight from the text, and returns None for any line holding anything else (a `$`, a glob,
a quote inside a word, a redirection, a newline, a comment, a non-ASCII character). The analyzer then
reads the line from its tree, as it reads every other line; it also leaves to the tree every command
whose name is an assignment, a keyword or anything else it reads specially (`analyzer._plain_head`).

The shape (tree-sitter-bash 0.25): `;` separates the program's statements; a statement is a chain of
pipelines joined by `&&`/`||`, read left to right (`a && b || c` is `list(list(a && b) || c)`), and a
pipeline of one command is that command. `analyzer` walks that shape as the tree walk does. A statement
where a pipeline of three commands or more is followed by `&&`/`||` is not read: tree-sitter gives it
another shape (`a | b | c && d` is `a | (b | c && d)`, not what bash runs), which the tree walk reads.
`tests/test_bash_fast_paths.py` checks that both readings give the same requests.
"""

from __future__ import annotations

import re

from .words import Word

__all__ = ["MAX_CHARS", "Command", "Pipeline", "Statement", "read_plain"]

MAX_CHARS = 768
"""Longest line read this way: a few hundred words at most, far below every budget of the tree walk."""

# Unquoted: letters, digits and `_./:@%+,=-`, nothing bash expands or treats as an operator.
_WORD = r"[A-Za-z0-9_./:@%+,=-]+"
# Quoted: printable ASCII without what bash expands inside (`$`, backtick, backslash), not starting
# with `~` (`"~"` is read by `words.evaluate`, as the tree walk does).
_DOUBLE = r'"(?:[\x20\x21\x23\x25-\x5b\x5d-\x5f\x61-\x7d][\x20\x21\x23\x25-\x5b\x5d-\x5f\x61-\x7e]*)?"'
_SINGLE = r"'(?:[\x20-\x26\x28-\x7d][\x20-\x26\x28-\x7e]*)?'"
_TOKEN = f"(?:{_WORD}|{_DOUBLE}|{_SINGLE})"
_COMMAND = f"{_TOKEN}(?:[ \\t]+{_TOKEN})*"
_OPERATORS = frozenset(("&&", "||", ";"))  # and `|`, which joins a pipeline
_UNQUOTED = r"[A-Za-z0-9_./:@%+,=| \t;&-]*"  # plain words, blanks and operators
_UNQUOTED_LINE = re.compile(_UNQUOTED)
# The same with quoted text, each quote closed (what a quoted word can be at most): every repeat starts
# at a quote, which the unquoted characters never hold, so a line is matched one way only.
_QUOTED_LINE = re.compile(f"{_UNQUOTED}(?:(?:\"[^\"]*\"|'[^']*'){_UNQUOTED})*")
_OPERATOR_SPLIT = re.compile(r" (&&|\|\||;|\|) ")
_COMMANDS = re.compile(_COMMAND)
_UNQUOTED_COMMANDS = re.compile(f"{_WORD}(?:[ \\t]+{_WORD})*")  # the same, for a line without quotes
_TOKENS = re.compile(_TOKEN)
_QUOTED_WORD = re.compile(f"{_DOUBLE}|{_SINGLE}")
_NUMBER = re.compile(r"-?(?:0x)?[0-9]+")  # what tree-sitter-bash reads as a `number` node
_NOT_WORD = "\"'-0123456789"  # what a word starts with when it may be quoted or a number
_DIGITS = frozenset("0123456789")
_new_word = tuple.__new__  # a `Word` without the keyword-taking constructor

Command = tuple[str, list[Word], list[str | None]]
"""A command's text, its words (name first) as the tree walk reads them, and their values."""
Pipeline = list[Command]
"""The commands of one pipeline (one command: no pipe)."""
Statement = list[tuple[str, Pipeline]]
"""The pipelines of a statement, each with the operator before it (`""` before the first)."""


def read_plain(text: str) -> list[Statement] | None:
    """The statements of `text` when it is a line of plain commands (see the module), else None.

    The line is split at its operators where that is plain to see (`_split`), else scanned for its
    commands: whatever lies between two of them must be one operator (blanks around it), before the
    first only blanks, after the last only blanks and one `;`; anything else there (a `$`, a quote
    inside a word, `&`, `>`) is text no command took, and the line is not plain."""
    if len(text) > MAX_CHARS or not text.isascii():
        return None
    quoted = '"' in text or "'" in text
    if (_QUOTED_LINE if quoted else _UNQUOTED_LINE).fullmatch(text) is None:
        return None  # outside its quotes, a plain line holds only words, blanks and operators
    line = _split(text, quoted)
    if line is None:
        line = _scan(text, quoted)
    if line is not None and (len(line) > 1 or len(line[0]) > 1):  # not one pipeline alone
        for statement in line:
            for index in range(len(statement) - 1):
                if len(statement[index][1]) > 2:
                    return None  # tree-sitter reads `a | b | c && d` as `a | (b | c && d)`: the walk reads that
    return line


def _split(text: str, quoted: bool) -> list[Statement] | None:
    """The common case, one blank between words and operators: the line split at its operators and each
    command at its blanks; None for any other line, or one the split cannot tell. Every word holding a
    quote must be one quoted word, so no quoted word holds a blank: neither split cuts into one (an
    operator splits only between blanks)."""
    if "  " in text or "\t" in text or text[:1] == " " or text[-1:] == " ":
        return None
    body = text[:-2] if text[-2:] == " ;" else text
    if "&" not in body and "|" not in body and ";" not in body:  # one command, the most common line
        command = _command(body, body.split(" "), quoted) if body else None
        return None if command is None else [[("", [command])]]
    return _split_commands(_OPERATOR_SPLIT.split(body), quoted)


def _scan(text: str, quoted: bool) -> list[Statement] | None:
    """`read_plain` by one scan for the commands (see there)."""
    statements: list[Statement] = []
    statement: Statement = []
    pipeline: Pipeline = []
    end = 0
    for match in (_COMMANDS if quoted else _UNQUOTED_COMMANDS).finditer(text):
        operator = text[end : match.start()].strip(" \t")
        if not statement and not operator:  # the line's first command
            pipeline = []
            statement.append(("", pipeline))
        elif not statement or (operator not in _OPERATORS and operator != "|"):
            return None
        elif operator == "|":
            pipeline = statement[-1][1]
        else:
            pipeline = []
            if operator == ";":
                statements.append(statement)
                statement = []
            statement.append((operator if statement else "", pipeline))
        end = match.end()
        command = match.group()
        if not quoted:
            raws = command.split()
            pipeline.append((command, _words(raws), list(raws)))
        else:
            words = [_word(raw) for raw in _TOKENS.findall(command)]
            pipeline.append((command, words, [word.value for word in words]))
    if not statement or text[end:].strip(" \t") not in ("", ";"):
        return None
    statements.append(statement)
    return statements


def _split_commands(parts: list[str], quoted: bool) -> list[Statement] | None:
    """`read_plain` of a line split at its operators, each between single blanks: the commands with the
    operators between them; None when a command is empty or holds what is left of an
    operator (`ls;`, `a &`, `a |& b`), which the scan reads instead, or a word holding a quote that is
    not one quoted word."""
    statements: list[Statement] = []
    statement: Statement = []
    pipeline: Pipeline = []
    operator = ""  # the one before the pipeline being read
    for index in range(0, len(parts), 2):
        command = parts[index]
        if not command or "&" in command or "|" in command or ";" in command:
            return None
        read = _command(command, command.split(" "), quoted)
        if read is None:
            return None
        pipeline.append(read)
        joiner = parts[index + 1] if index + 1 < len(parts) else ""
        if joiner == "|":
            continue
        statement.append((operator, pipeline))
        pipeline = []
        operator = "" if joiner == ";" else joiner
        if joiner == ";":
            statements.append(statement)
            statement = []
    statements.append(statement)
    return statements


def _command(text: str, raws: list[str], quoted: bool) -> Command | None:
    """The command `text` of the words `raws` (split at single blanks, none empty): a plain word's value is
    its text, a quoted word's what its quotes hold; None when a word holds a quote and is not one quoted
    word (`a"b"`, `"a b"` split at its blank). `quoted`: the line holds a quote somewhere."""
    if not quoted or ('"' not in text and "'" not in text):
        return text, _words(raws), list(raws)
    words = _words(raws)
    values: list[str | None] = []
    for word in words:
        if word.kind == "word" and ('"' in word.raw or "'" in word.raw):
            return None  # a quote inside a word (`a"b"`) or a quoted word split at its blank (`"a`, `b"`)
        values.append(word.value)
    return text, words, values


def _words(raws: list[str]) -> list[Word]:
    return [
        _new_word(Word, (raw, raw, raw, False, None, "word", (), "", ()))
        if raw[0] not in _NOT_WORD or raw[0] == "-" and raw[1:2] not in _DIGITS  # an option: no number
        else _word(raw)
        for raw in raws
    ]


def _word(raw: str) -> Word:
    """The word `_name_word` and `_arguments` read from a plain word, number or quoted word's text; a word
    that starts with a quote and is not one quoted word is a plain word, which `_command` refuses."""
    first = raw[0]
    if (first == '"' or first == "'") and _QUOTED_WORD.fullmatch(raw) is not None:
        value = raw[1:-1]
        return _new_word(
            Word, (raw, value, value, False, None, "string" if first == '"' else "raw_string", (), value, ())
        )
    if (first == "-" or "0" <= first <= "9") and _NUMBER.fullmatch(raw) is not None:
        return _new_word(Word, (raw, raw, raw, False, None, "number", (), raw, ()))
    return _new_word(Word, (raw, raw, raw, False, None, "word", (), "", ()))
