"""Jinja2 templates of tool definitions, compiled once per snapshot.

Three kinds:
- text (titles, confirm messages, permission patterns): values rendered as they are; `None` is empty.
- shell: every `{{ }}` value is shell-quoted (the environment's `finalize`); lists become several
  quoted words. There is no `| raw`: a model-supplied value can never become shell code.
- argv: each element rendered separately, run without a shell; an element that is exactly one
  expression evaluating to a list expands into several arguments, and to nothing when it is `None`.

Nearly every template in practice is text with `{{ name }}` or `{{ name | filter }}` substitutions.
Those compile to a list of parts with the same output as Jinja2 (same finalize, same filters)
without Jinja2's parse-and-codegen, which costs about a millisecond per template; everything else
(`{% if %}`, expressions, whitespace control) goes to Jinja2, imported on first use.
"""

from __future__ import annotations

import functools
import os.path
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2
    import jinja2.nodes
    from tree_sitter import Node

    from .shell.wrappers import WrapperTable

__all__ = ["ArgvTemplate", "Template", "TemplateProblem", "compile_argv", "compile_template", "render", "render_argv"]

ROOT_VARIABLE = "__root__"
_ALLOWED_GLOBALS = frozenset({ROOT_VARIABLE, "range", "dict", "lipsum", "cycler", "joiner", "namespace"})


class TemplateProblem(Exception):
    """A template does not compile or names a variable that is not a declared parameter."""

    element: int | None = None
    """For an argv template: the index of the element at fault."""


# --- values and filters (shared by both paths) ---------------------------------------------------


def _value_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _is_undefined(value: Any) -> bool:
    jinja2 = sys.modules.get("jinja2")  # only Jinja2 templates produce Undefined, and only once it is imported
    return jinja2 is not None and isinstance(value, jinja2.Undefined)


def _shell_quote(value: Any) -> str:
    if value is None or _is_undefined(value):
        return "''"
    if isinstance(value, (list, tuple)):
        return " ".join(shlex.quote(_value_text(item)) for item in value) if value else ""
    return shlex.quote(_value_text(value))


def _abspath(root: str, value: Any) -> str:
    path = os.path.expanduser(_value_text(value) or ".")
    return os.path.normpath(os.path.join(root, path)).replace("\\", "/")


def _relpath(root: str, value: Any) -> str:
    return os.path.relpath(_abspath(root, value), root).replace("\\", "/")


def _realpath(root: str, value: Any) -> str:
    """The path's target with every symlink resolved: rules see the file, not only its name."""
    path = _abspath(root, value)
    if "\x00" in path:  # names no file (realpath raises): the rules see it as written
        return path
    return os.path.realpath(path).replace("\\", "/")


def _realrelpath(root: str, value: Any) -> str:
    """`_realpath` relative to the root's own real path (`../x` when the target lies outside it)."""
    return os.path.relpath(_realpath(root, value), os.path.realpath(root)).replace("\\", "/")


def _quote(root: str, value: Any) -> str:
    return shlex.quote(_value_text(value))


_FILTERS: Mapping[str, Callable[[str, Any], str]] = {
    "abspath": _abspath,
    "relpath": _relpath,
    "realpath": _realpath,
    "realrelpath": _realrelpath,
    "quote": _quote,
}


# --- the fast path ---------------------------------------------------------------------------------

_EXPRESSION = re.compile(
    r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\|\s*(abspath|relpath|realpath|realrelpath|quote)\s*)?\}\}"
)
_JINJA_SYNTAX = re.compile(r"\{\{|\}\}|\{%|%\}|\{#|#\}")

_Part = str | tuple[str, str | None]
"""Literal text, or (parameter name, filter name or None)."""


def _fast_parts(source: str) -> list[_Part] | None:
    """The parts of a template in the simple subset, or None when Jinja2 must handle it."""
    parts: list[_Part] = []
    position = 0
    for match in _EXPRESSION.finditer(source):
        parts.append(source[position : match.start()])
        parts.append((match.group(1), match.group(2)))
        position = match.end()
    parts.append(source[position:])
    for part in parts:
        if isinstance(part, str) and _JINJA_SYNTAX.search(part):
            return None  # Jinja2 syntax left outside the simple expressions
    return [part for part in parts if part != ""]


def _line_of(source: str, part_index: int, parts: Sequence[_Part]) -> int:
    before = "".join(p if isinstance(p, str) else "{{}}" for p in parts[:part_index])
    return before.count("\n") + 1


@dataclass(frozen=True, slots=True)
class _FastTemplate:
    """A template of literal text and `{{ name }}` / `{{ name | filter }}` parts; renders like Jinja2."""

    parts: tuple[_Part, ...]
    shell: bool

    def render(self, context: Mapping[str, Any]) -> str:
        finalize = _shell_quote if self.shell else _value_text
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            name, filter_name = part
            value = context.get(name)
            if filter_name is not None:
                value = _FILTERS[filter_name](str(context.get(ROOT_VARIABLE, ".")), value)
            out.append(finalize(value))
        return "".join(out)


@dataclass(frozen=True, slots=True)
class _FastExpression:
    """A whole-element argv expression `{{ name }}` / `{{ name | filter }}`: the value itself, not text."""

    name: str
    filter_name: str | None

    def __call__(self, **context: Any) -> Any:
        value = context.get(self.name)
        if self.filter_name is not None:
            value = _FILTERS[self.filter_name](str(context.get(ROOT_VARIABLE, ".")), value)
        return value


Template = Any
"""A compiled template: `_FastTemplate` or `jinja2.Template` (both have `.render(context)`)."""


def _check_names(names: Sequence[str], parameters: frozenset[str]) -> None:
    unknown = sorted(set(names) - parameters - _ALLOWED_GLOBALS)
    if unknown:
        listed = ", ".join(repr(n) for n in unknown)
        declared = ", ".join(sorted(parameters)) or "none"
        raise TemplateProblem(f"template uses {listed}, which is not a declared parameter (declared: {declared})")


# --- the Jinja2 path -------------------------------------------------------------------------------


@functools.cache
def _jinja(shell: bool) -> jinja2.Environment:
    import jinja2
    import jinja2.sandbox

    def context_filter(function: Callable[[str, Any], str]) -> Any:
        @jinja2.pass_context
        def apply(context: jinja2.runtime.Context, value: Any) -> str:
            return function(str(context.get(ROOT_VARIABLE, ".")), value)

        return apply

    # Sandboxed: a template cannot reach Python internals (`x.__class__.__mro__`, `.__globals__`).
    env = jinja2.sandbox.SandboxedEnvironment(
        autoescape=False, keep_trailing_newline=True, finalize=_shell_quote if shell else _value_text
    )
    for name, function in _FILTERS.items():
        env.filters[name] = context_filter(function)
    return env


def _jinja_check(source: str, parameters: frozenset[str], *, shell: bool = False) -> jinja2.nodes.Template:
    import jinja2
    import jinja2.meta

    env = _jinja(shell)
    try:
        tree = env.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateProblem(f"template syntax error: {exc.message} (template line {exc.lineno})") from None
    _check_filters_and_tests(tree, env)  # before the names: finding them runs Jinja2's code generator
    try:
        names = jinja2.meta.find_undeclared_variables(tree)
    except jinja2.TemplateError as exc:
        raise TemplateProblem(f"template error: {exc.message or exc}") from None
    _check_names(sorted(names), parameters)
    return tree


def _check_filters_and_tests(tree: jinja2.nodes.Template, env: jinja2.Environment) -> None:
    """Unknown `| filter` and `is test` names, reported at load time (Jinja2 finds them only when compiling)."""
    import difflib

    import jinja2.nodes

    for node_type, known, word in (
        (jinja2.nodes.Filter, env.filters, "filter"),
        (jinja2.nodes.Test, env.tests, "test"),
    ):
        for node in tree.find_all(node_type):
            name = node.name
            if name in known:
                continue
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise TemplateProblem(f"unknown {word} '{name}' (template line {node.lineno}){hint}")


def _jinja_compile(shell: bool, source: str, *, expression: bool = False) -> Any:
    """Jinja2's compile step, its errors as TemplateProblem (the checks above catch nearly all first)."""
    import jinja2

    try:
        if expression:
            return _jinja(shell).compile_expression(source, undefined_to_none=True)
        return _jinja(shell).from_string(source)
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        where = f" (template line {line})" if line else ""
        raise TemplateProblem(f"template error: {exc.message or exc}{where}") from None


# --- shell positions -------------------------------------------------------------------------------


_MARKER = "toolrtVALUE{}x"
"""The word that stands for the n-th `{{ }}` while the template's shell text is parsed."""

_REJECTED_CONTEXTS: Mapping[str, str] = {
    "string": "inside double quotes",
    "raw_string": "inside single quotes",
    "ansi_c_string": "inside $'...' quotes",
    "translated_string": 'inside $"..." quotes',
    "comment": "inside a comment",
    "arithmetic_expansion": "inside arithmetic $(( ))",
    "compound_statement": "inside arithmetic (( ))",
    "test_command": "inside a [[ ]] test",
    "case_item": "in a case pattern",
    "case_statement": "as a case subject",
    "ERROR": "where the shell parser finds no valid command",
}
_HEREDOC_CONTEXTS = frozenset({"heredoc_body", "heredoc_redirect", "heredoc_content"})
_ASSIGNED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
"""A word that assigns a variable when a wrapper such as `env` reads it (`env NAME=value cmd`)."""
_CODE_KINDS = frozenset({"shell", "script", "argument"})


def _shell_probe(source: str, parts: Sequence[_Part] | None) -> tuple[str, list[int]]:
    """The template's shell text with each `{{ }}` as a marker word, and each marker's template line."""
    text: list[str] = []
    lines: list[int] = []
    if parts is not None:
        for index, part in enumerate(parts):
            if isinstance(part, str):
                text.append(part)
            else:
                lines.append(_line_of(source, index, parts))
                text.append(_MARKER.format(len(lines) - 1))
        return "".join(text), lines
    inside = False
    for lineno, token, value in _jinja(True).lex(source):
        if token == "data":
            text.append(value)
        elif token == "variable_begin":
            inside = True
            lines.append(lineno)
            text.append(_MARKER.format(len(lines) - 1))
        elif token == "variable_end":
            inside = False
        elif not inside:
            text.append("\n" * str(value).count("\n"))  # a `{% %}` tag's newlines keep later lines in place
    return "".join(text), lines


def _check_shell_positions(source: str, parts: Sequence[_Part] | None) -> None:
    """Reject a `{{ }}` anywhere its quoted value would not stay one plain word of a simple command.

    The value is quoted with `shlex.quote`, which is only safe as a word (or part of a word) of a
    command's arguments, a redirect target or an assignment to a harmless variable. The positions are
    read on the tree-sitter parse of the template, each `{{ }}` replaced by a marker word.
    """
    from .shell.parser import parse
    from .shell.wrappers import default_wrappers

    probe, lines = _shell_probe(source, parts)
    if not lines:
        return
    data = probe.encode()
    root = parse(data).root_node
    table = default_wrappers()
    for index, lineno in enumerate(lines):
        marker = _MARKER.format(index).encode()
        start = data.index(marker)
        node = root.descendant_for_byte_range(start, start + len(marker))
        where = f"(template line {lineno})"
        while node is not None:
            kind = node.type
            if kind in _HEREDOC_CONTEXTS:
                raise TemplateProblem(
                    f"{{{{ }}}} after a here-document {where} is not quoted by the shell; "
                    "pass the value with the handler's `stdin:` instead"
                )
            if kind == "command_substitution" and data[node.start_byte : node.start_byte + 1] == b"`":
                raise TemplateProblem(f"{{{{ }}}} inside backticks {where}: write $( ) instead")
            context = _REJECTED_CONTEXTS.get(kind)
            if kind == "compound_statement" and not data[node.start_byte :].startswith(b"(("):
                context = None
            if context is not None:
                raise TemplateProblem(
                    f"{{{{ }}}} {context} {where}: values are shell-quoted automatically and may stand only "
                    "as a word of a command, a redirect target or an assignment's value"
                )
            if kind == "variable_assignment":
                name = node.child_by_field_name("name")
                variable = data[name.start_byte : name.end_byte].decode() if name is not None else ""
                if table.is_dangerous_env(variable):
                    raise TemplateProblem(
                        f"{{{{ }}}} as the value of {variable} {where}: that variable loads code or picks programs"
                    )
            if kind == "command":
                _check_command_word(node, data, start, where, table)
            node = node.parent


def _check_command_word(command: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    """Reject the marker at `start` as the program a command runs, a dangerous `env NAME=` value, or code."""
    name = command.child_by_field_name("name")
    if name is not None and name.start_byte <= start < name.end_byte:
        raise TemplateProblem(f"{{{{ }}}} as the program a command runs {where}: name the program in the template")
    words = [child for child in command.children if child.type != "variable_assignment" and child.is_named]
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


# --- compile and render ----------------------------------------------------------------------------


def compile_template(source: str, parameters: frozenset[str], *, shell: bool = False) -> Template:
    """Compile a text (or shell-quoting) template that may reference only `parameters`."""
    parts = _fast_parts(source)
    if parts is not None:
        _check_names([p[0] for p in parts if not isinstance(p, str)], parameters)
        if shell:
            _check_shell_positions(source, parts)
        return _FastTemplate(tuple(parts), shell)
    _jinja_check(source, parameters, shell=shell)
    if shell:
        _check_shell_positions(source, None)
    return _jinja_compile(shell, source)


def render(template: Template | str, args: Mapping[str, Any], parameters: frozenset[str], root: Path) -> str:
    """Render with every declared parameter defined (absent ones as None) and the project root.

    A plain string is a template without expressions, compiled away at load time.
    """
    if isinstance(template, str):
        return template
    context = dict.fromkeys(parameters)
    context.update(args)
    context[ROOT_VARIABLE] = str(root)
    result: str = template.render(context)
    return result


@dataclass(frozen=True, slots=True)
class ArgvTemplate:
    elements: tuple[Any, ...]
    """A template per element, or a compiled expression (a callable) for whole-expression ones."""
    expands: tuple[bool, ...]


def compile_argv(elements: Sequence[str], parameters: frozenset[str]) -> ArgvTemplate:
    compiled: list[Any] = []
    expands: list[bool] = []
    for index, element in enumerate(elements):
        try:
            template, expands_ = _compile_argv_element(element, parameters)
        except TemplateProblem as problem:
            problem.element = index
            raise
        compiled.append(template)
        expands.append(expands_)
    return ArgvTemplate(tuple(compiled), tuple(expands))


def _compile_argv_element(element: str, parameters: frozenset[str]) -> tuple[Any, bool]:
    """One argv element: (template, whether it is a whole expression that may expand to several words)."""
    parts = _fast_parts(element)
    if parts is not None:
        _check_names([p[0] for p in parts if not isinstance(p, str)], parameters)
        if len(parts) == 1 and not isinstance(parts[0], str):
            return _FastExpression(*parts[0]), True
        return _FastTemplate(tuple(parts), shell=False), False
    tree = _jinja_check(element, parameters)
    expression = _single_expression(tree, element)
    if expression is not None:
        return _jinja_compile(False, expression, expression=True), True
    return _jinja_compile(False, element), False


def _single_expression(tree: jinja2.nodes.Template, source: str) -> str | None:
    import jinja2.nodes

    stripped = source.strip()
    if len(tree.body) != 1 or not stripped.startswith("{{") or not stripped.endswith("}}"):
        return None
    output = tree.body[0]
    if not isinstance(output, jinja2.nodes.Output) or len(output.nodes) != 1:
        return None
    if isinstance(output.nodes[0], jinja2.nodes.TemplateData):
        return None
    return stripped[2:-2].strip().lstrip("-").rstrip("-").strip()


def render_argv(template: ArgvTemplate, args: Mapping[str, Any], parameters: frozenset[str], root: Path) -> list[str]:
    context = dict.fromkeys(parameters)
    context.update(args)
    context[ROOT_VARIABLE] = str(root)
    argv: list[str] = []
    for element, expands in zip(template.elements, template.expands, strict=True):
        if not expands:
            argv.append(element.render(context))
            continue
        value = element(**context)
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            argv.extend(_value_text(item) for item in value)
        else:
            argv.append(_value_text(value))
    return argv
