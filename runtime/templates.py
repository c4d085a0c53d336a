"""Jinja2 templates of tool definitions, compiled once per snapshot.

Three kinds, three environments:
- text (titles, confirm messages, permission patterns): values rendered as they are; `None` is empty.
- shell: every `{{ }}` value is shell-quoted by the environment's `finalize`; lists become several
  quoted words. There is no `| raw`: a model-supplied value can never become shell code.
- argv: each element rendered separately, run without a shell; an element that is exactly one
  expression evaluating to a list expands into several arguments, and to nothing when it is `None`.
"""

from __future__ import annotations

import os.path
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import jinja2.nodes

__all__ = ["ArgvTemplate", "TemplateProblem", "compile_argv", "compile_template", "render", "render_argv"]

ROOT_VARIABLE = "__root__"


class TemplateProblem(Exception):
    """A template does not compile or names a variable that is not a declared parameter."""


def _value_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _shell_quote(value: Any) -> str:
    if isinstance(value, jinja2.Undefined) or value is None:
        return "''"
    if isinstance(value, (list, tuple)):
        return " ".join(shlex.quote(_value_text(item)) for item in value) if value else ""
    return shlex.quote(_value_text(value))


@jinja2.pass_context
def _abspath(context: jinja2.runtime.Context, value: Any) -> str:
    root = str(context.get(ROOT_VARIABLE, "."))
    path = os.path.expanduser(_value_text(value) or ".")
    return os.path.normpath(os.path.join(root, path)).replace("\\", "/")


@jinja2.pass_context
def _relpath(context: jinja2.runtime.Context, value: Any) -> str:
    root = str(context.get(ROOT_VARIABLE, "."))
    absolute = _abspath(context, value)
    return os.path.relpath(absolute, root).replace("\\", "/")


def _environment(finalize: Any) -> jinja2.Environment:
    env = jinja2.Environment(autoescape=False, keep_trailing_newline=True, finalize=finalize)
    env.filters["abspath"] = _abspath
    env.filters["relpath"] = _relpath
    env.filters["quote"] = lambda v: shlex.quote(_value_text(v))
    return env


_TEXT = _environment(_value_text)
_SHELL = _environment(_shell_quote)
_ALLOWED_GLOBALS = frozenset({ROOT_VARIABLE, "range", "dict", "lipsum", "cycler", "joiner", "namespace"})


def _check(env: jinja2.Environment, source: str, parameters: frozenset[str]) -> jinja2.nodes.Template:
    try:
        tree = env.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateProblem(f"template syntax error: {exc.message} (template line {exc.lineno})") from None
    unknown = sorted(jinja2.meta.find_undeclared_variables(tree) - parameters - _ALLOWED_GLOBALS)
    if unknown:
        names = ", ".join(repr(n) for n in unknown)
        declared = ", ".join(sorted(parameters)) or "none"
        raise TemplateProblem(f"template uses {names}, which is not a declared parameter (declared: {declared})")
    return tree


def compile_template(source: str, parameters: frozenset[str], *, shell: bool = False) -> jinja2.Template:
    """Compile a text (or shell-quoting) template that may reference only `parameters`."""
    env = _SHELL if shell else _TEXT
    _check(env, source, parameters)
    if shell:
        _check_shell_positions(source)
    return env.from_string(source)


def _check_shell_positions(source: str) -> None:
    """Reject `{{ }}` where a quoted word would not stay one word: inside quotes or a here-document.

    The value is quoted with `shlex.quote`, which is only safe as a word of its own: inside `"..."`
    the single quotes are literal and `$( )` would run; inside `'...'` the value would be unquoted.
    """
    quote: str | None = None
    heredoc = False
    for lineno, token, value in _SHELL.lex(source):
        if token == "data":
            index = 0
            while index < len(value):
                char = value[index]
                if quote is None and value.startswith("<<<", index):
                    index += 3  # a here-string takes an ordinary word; its last two `<` are no `<<`
                    continue
                if quote is None and value.startswith("<<", index):
                    heredoc = True
                if char == "\\" and quote != "'":
                    index += 2
                    continue
                if quote is None and char in "'\"":
                    quote = char
                elif quote == char:
                    quote = None
                index += 1
        elif token == "variable_begin":
            if quote is not None:
                kind = "double" if quote == '"' else "single"
                raise TemplateProblem(
                    f"{{{{ }}}} inside {kind} quotes (template line {lineno}): values are shell-quoted automatically, "
                    "write the expression outside quotes"
                )
            if heredoc:
                raise TemplateProblem(
                    f"{{{{ }}}} after a here-document (template line {lineno}) is not quoted by the shell; "
                    "pass the value with the handler's `stdin:` instead"
                )


def render(template: jinja2.Template | str, args: Mapping[str, Any], parameters: frozenset[str], root: Path) -> str:
    """Render with every declared parameter defined (absent ones as None) and the project root.

    A plain string is a template without expressions, compiled away at load time.
    """
    if isinstance(template, str):
        return template
    context = dict.fromkeys(parameters)
    context.update(args)
    context[ROOT_VARIABLE] = str(root)
    return template.render(context)


@dataclass(frozen=True, slots=True)
class ArgvTemplate:
    elements: tuple[Any, ...]
    """A `jinja2.Template` per element, or a compiled expression (a callable) for whole-expression ones."""
    expands: tuple[bool, ...]


def compile_argv(elements: Sequence[str], parameters: frozenset[str]) -> ArgvTemplate:
    compiled: list[Any] = []
    expands: list[bool] = []
    for element in elements:
        tree = _check(_TEXT, element, parameters)
        expression = _single_expression(tree, element)
        if expression is not None:
            compiled.append(_TEXT.compile_expression(expression, undefined_to_none=True))
            expands.append(True)
        else:
            compiled.append(_TEXT.from_string(element))
            expands.append(False)
    return ArgvTemplate(tuple(compiled), tuple(expands))


def _single_expression(tree: jinja2.nodes.Template, source: str) -> str | None:
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
