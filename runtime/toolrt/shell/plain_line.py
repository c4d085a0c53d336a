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
pipeline of one command is that command. `analyzer` walks that shape as the tree walk does.
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
_JOINERS = frozenset(("&&", "||", ";", "|"))
_UNQUOTED_LINE = re.compile(r"[A-Za-z0-9_./:@%+,=| ;&-]*")  # plain words, blanks and operators
_COMMANDS = re.compile(_COMMAND)
_UNQUOTED_COMMANDS = re.compile(f"{_WORD}(?:[ \\t]+{_WORD})*")  # the same, for a line without quotes
_TOKENS = re.compile(_TOKEN)
_SPLIT_TOKEN = re.compile(_TOKEN)  # one word of a line split at its blanks
_NUMBER = re.compile(r"-?(?:0x)?[0-9]+")  # what tree-sitter-bash reads as a `number` node
_NOT_WORD = "\"'-0123456789"  # what a word starts with when it may be quoted or a number
_new_word = tuple.__new__  # a `Word` without the keyword-taking constructor

Command = tuple[str, list[Word]]
"""A command's text and its words (name first), as the tree walk reads them."""
Pipeline = list[Command]
"""The commands of one pipeline (one command: no pipe)."""
Statement = list[tuple[str, Pipeline]]
"""The pipelines of a statement, each with the operator before it (`""` before the first)."""


def read_plain(text: str) -> list[Statement] | None:
    """The statements of `text` when it is a line of plain commands (see the module), else None.

    One scan for the commands: whatever lies between two of them must be one operator (blanks around
    it), before the first only blanks, after the last only blanks and one `;`; anything else there
    (a `$`, a quote inside a word, `&`, `>`) is text no command took, and the line is not plain."""
    if len(text) > MAX_CHARS or not text.isascii():
        return None
    quoted = '"' in text or "'" in text
    tokens = text.split()
    if " ".join(tokens) == text and (quoted or _UNQUOTED_LINE.fullmatch(text) is not None):
        # One blank between words and operators (the common case): split at the blanks.
        split = _split_line(tokens, quoted)
        if split is not None:
            return split
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
        pipeline.append((command, _words(_TOKENS.findall(command) if quoted else command.split())))
    if not statement or text[end:].strip(" \t") not in ("", ";"):
        return None
    statements.append(statement)
    return statements


def _split_line(tokens: list[str], quoted: bool) -> list[Statement] | None:
    """`read_plain` of a line of words and operators, each between single blanks (`tokens`); None when a
    word is no plain or quoted word (without quotes, the line holds only their characters)."""
    statements: list[Statement] = []
    statement: Statement = []
    pipeline: Pipeline = []
    command: list[str] = []
    operator = ""  # the one before the pipeline being read
    for token in tokens:
        if token not in _JOINERS:
            if quoted and _SPLIT_TOKEN.fullmatch(token) is None:
                return None  # a quote inside a word, a quoted blank, `$`, ...
            if not quoted and ("&" in token or "|" in token or ";" in token):
                return None  # an operator run into a word, or `&`
            command.append(token)
            continue
        if not command:
            return None  # an operator with no command before it (`; ls`, `ls | | wc`)
        pipeline.append((" ".join(command), _words(command)))
        command = []
        if token == "|":
            continue
        statement.append((operator, pipeline))
        pipeline = []
        operator = "" if token == ";" else token
        if token == ";":
            statements.append(statement)
            statement = []
    if command:
        pipeline.append((" ".join(command), _words(command)))
        statement.append((operator, pipeline))
    elif pipeline or operator:
        return None  # the line ends with `|`, `&&` or `||`
    if statement:
        statements.append(statement)
    return statements or None


def _words(raws: list[str]) -> list[Word]:
    return [
        _new_word(Word, (raw, raw, raw, False, None, "word", (), "", ())) if raw[0] not in _NOT_WORD else _word(raw)
        for raw in raws
    ]


def _word(raw: str) -> Word:
    """The word `_name_word` and `_arguments` read from a plain word, number or quoted word's text."""
    first = raw[0]
    if first == '"' or first == "'":
        value = raw[1:-1]
        return _new_word(
            Word, (raw, value, value, False, None, "string" if first == '"' else "raw_string", (), value, ())
        )
    if (first == "-" or "0" <= first <= "9") and _NUMBER.fullmatch(raw) is not None:
        return _new_word(Word, (raw, raw, raw, False, None, "number", (), raw, ()))
    return _new_word(Word, (raw, raw, raw, False, None, "word", (), "", ()))
