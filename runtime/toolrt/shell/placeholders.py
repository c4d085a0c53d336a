"""Where a shell template's `{{ }}` may stand, read on the tree-sitter parse of the template.

A value reaches the shell as an environment variable, `"${TOOLRT_ARG_<NAME>}"` (see
`toolrt.templates`): bash expands it once and never reads it as code, *if* the place the expansion
stands does not evaluate it again. So a placeholder may stand as a word, or part of a word, of a
simple command's arguments, as a redirect target, a here-string, an assignment's value, a `for` or
`case` subject, or inside double quotes. Everywhere else it is refused: arithmetic (`$(( ))`,
`(( ))`, `let`, subscripts evaluate `a[$(cmd)]`), `[ ]` / `[[ ]]` tests, backticks, comments,
here-documents, case patterns, `${ }` expansions, variable names, and the value of a variable that
loads code or picks programs. The command check then refuses the program a command runs and any
word a wrapper from the wrapper table (`bash -c`, `eval`, `python -c`) reads as code.

The template's text is parsed once with each `{{ }}` replaced by a marker word; a placeholder's
context is `word` or `quoted` (inside double quotes), which decides how its expansion is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..templates import TemplateProblem

if TYPE_CHECKING:
    from tree_sitter import Node

    from .wrappers import WrapperTable

__all__ = ["MARKER", "placeholder_contexts"]

MARKER = "toolrtVALUE{}x"
"""The word that stands for the n-th `{{ }}` while the template's shell text is parsed."""

_PASS = frozenset(
    {
        "word",
        "concatenation",
        "string",
        "string_content",
        "program",
        "list",
        "pipeline",
        "redirected_statement",
        "subshell",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "do_group",
        "negated_command",
        "process_substitution",
        "herestring_redirect",
        "array",
        "command_name",
    }
)
"""Nodes a placeholder may sit in whatever its place inside them."""

_REJECTED: Mapping[str, str] = {
    "raw_string": "inside single quotes",
    "ansi_c_string": "inside $'...' quotes",
    "translated_string": 'inside $"..." quotes',
    "comment": "inside a comment",
    "arithmetic_expansion": "inside arithmetic $(( ))",
    "c_style_for_statement": "inside arithmetic for (( ))",
    "expansion": "inside a ${ } expansion",
    "simple_expansion": "after a $",
    "subscript": "inside an array subscript (it is arithmetic)",
    "variable_name": "as a variable name",
    "unset_command": "as a name unset removes",
    "regex": "inside a [[ =~ ]] pattern",
    "extglob_pattern": "inside a pattern",
    "ERROR": "where the shell parser finds no valid command",
}
_HEREDOC = frozenset({"heredoc_body", "heredoc_redirect", "heredoc_content", "heredoc_start", "heredoc_end"})
_ASSIGNED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
"""A word that assigns a variable when a wrapper such as `env` reads it (`env NAME=value cmd`)."""
_CODE_KINDS = frozenset({"shell", "script", "argument"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})


def _within(nodes: Sequence[Node], start: int) -> bool:
    return any(node.start_byte <= start < node.end_byte for node in nodes)


def placeholder_contexts(probe: str, lines: Sequence[int] | None) -> tuple[str, ...]:
    """Each marker's context in `probe` (`word` or `quoted`); TemplateProblem for a refused place.

    `lines` are the template lines of the markers (compile time); None: the probe is a rendered
    template, and its own lines are named.
    """
    from .parser import parse
    from .wrappers import default_wrappers

    data = probe.encode()
    root = parse(data).root_node
    table = default_wrappers()
    contexts: list[str] = []
    index = 0
    while True:
        marker = MARKER.format(index).encode()
        start = data.find(marker)
        if start < 0:
            return tuple(contexts)
        line = lines[index] if lines is not None else data.count(b"\n", 0, start) + 1
        where = f"(template line {line})" if lines is not None else f"(rendered line {line})"
        contexts.append(_context(root, data, start, len(marker), where, table))
        index += 1


def _context(root: Node, data: bytes, start: int, size: int, where: str, table: WrapperTable) -> str:
    slashes = len(data[:start]) - len(data[:start].rstrip(b"\\"))
    if slashes % 2:
        raise TemplateProblem(f"{{{{ }}}} after a backslash {where}: the backslash would escape the value's quoting")
    node: Node | None = root.descendant_for_byte_range(start, start + size)
    context: str | None = None
    found: list[tuple[int, TemplateProblem]] = []
    while node is not None:
        kind = node.type
        if context is None and kind == "string":
            context = "quoted"
        elif context is None and kind not in ("word", "concatenation", "string_content"):
            context = "word"
        try:
            _check_node(node, kind, data, start, where, table)
        except TemplateProblem as problem:
            found.append((0 if isinstance(problem, _Unnamed) else 1, problem))
        node = node.parent
    if found:
        raise max(reversed(found), key=lambda item: item[0])[1]  # the outermost named place
    return context or "word"


class _Unnamed(TemplateProblem):
    """A refusal for a place the checks do not name (a node type not listed): reported only when no
    named place refuses the same placeholder."""


def _refuse(where: str, context: str, problem: type[TemplateProblem] = TemplateProblem) -> TemplateProblem:
    return problem(
        f"{{{{ }}}} {context} {where}: a value may stand only as a word of a command (or part of one, "
        "or inside double quotes), a redirect target or an assignment's value"
    )


def _check_node(node: Node, kind: str, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    if kind in _PASS:
        return
    if kind in _HEREDOC:
        raise TemplateProblem(
            f"{{{{ }}}} in a here-document {where}: pass the value with the handler's `stdin:` instead"
        )
    if kind == "command_substitution":
        if data[node.start_byte : node.start_byte + 1] == b"`":
            raise TemplateProblem(f"{{{{ }}}} inside backticks {where}: write $( ) instead")
        return
    if kind == "compound_statement":
        if data[node.start_byte :].startswith(b"(("):
            raise _refuse(where, "inside arithmetic (( ))")
        return
    if kind == "test_command":
        brackets = "[[ ]]" if data[node.start_byte :].startswith(b"[[") else "[ ]"
        raise _refuse(where, f"inside a {brackets} test")
    rejected = _REJECTED.get(kind)
    if rejected is not None:
        raise _refuse(where, rejected)
    if kind == "variable_assignment":
        if not _within(node.children_by_field_name("value"), start):
            raise _refuse(where, "as a variable name")
        name = node.child_by_field_name("name")
        variable = data[name.start_byte : name.end_byte].decode() if name is not None else ""
        if table.is_dangerous_env(variable):
            raise TemplateProblem(
                f"{{{{ }}}} as the value of {variable} {where}: that variable loads code or picks programs"
            )
        return
    if kind in ("variable_assignments", "file_redirect"):
        if kind == "file_redirect" and not _within(node.children_by_field_name("destination"), start):
            raise _refuse(where, "as a file descriptor")
        return
    if kind == "for_statement" or kind == "case_statement":
        if not _within(node.children_by_field_name("value"), start) and kind == "for_statement":
            raise _refuse(where, "as a loop variable")
        return
    if kind == "case_item":
        if not _within(node.children_by_field_name("value"), start):
            return
        raise _refuse(where, "in a case pattern")
    if kind == "function_definition":
        if not _within(node.children_by_field_name("body"), start):
            raise _refuse(where, "as a function name")
        return
    if kind == "declaration_command":
        for child in node.named_children:
            if child.type in ("word", "variable_name", "concatenation", "string") and _within([child], start):
                raise _refuse(where, "as a name a declaration evaluates")
        return
    if kind == "command":
        _check_command_word(node, data, start, where, table)
        return
    raise _refuse(where, f"inside a {kind.replace('_', ' ')}", _Unnamed)


def _check_command_word(command: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    """Reject the marker at `start` as the program a command runs, a dangerous `env NAME=` value, or code."""
    name = command.child_by_field_name("name")
    if name is not None and name.start_byte <= start < name.end_byte:
        raise TemplateProblem(f"{{{{ }}}} as the program a command runs {where}: name the program in the template")
    words = [
        child
        for child in command.children
        if child.is_named and child.type != "variable_assignment" and child.type not in _REDIRECTS
    ]
    code_options: frozenset[str] = frozenset()
    for word in words:
        text = data[word.start_byte : word.end_byte].decode(errors="replace")
        if word.start_byte <= start < word.end_byte:
            variable = _ASSIGNED.match(text)
            if variable is not None and table.is_dangerous_env(variable.group(1)):
                raise TemplateProblem(
                    f"{{{{ }}}} as the value of {variable.group(1)} {where}: that variable loads code or picks programs"
                )
            return
        wrapper = table.match([text], 0)
        if text == "eval" or (wrapper is not None and wrapper.kind in _CODE_KINDS):
            break
        code_options = code_options | (table.code_options_of(text) or frozenset())
        if code_options and any(text.startswith(option) for option in code_options):
            break
    else:
        return
    raise TemplateProblem(f"{{{{ }}}} in a word the shell or a program reads as code {where}")
