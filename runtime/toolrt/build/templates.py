"""Jinja2 templates of tool definitions, compiled once per snapshot.

Three kinds:
- text (titles, confirm messages, permission patterns): values rendered as they are; `None` is empty.
- shell: no value is ever spliced into the script. Each `{{ }}` becomes an expansion of an
  environment variable, `"${TOOLRT_ARG_<NAME>}"` (`${TOOLRT_ARG_<NAME>}` inside double quotes), and a
  list several (`"${TOOLRT_ARG_<NAME>_0}" "${TOOLRT_ARG_<NAME>_1}"`, one word per item), and the values
  travel in the process environment (`render_shell`). Where a placeholder may stand is checked on
  the tree-sitter parse (`toolrt.shell.placeholders`). People and the deny analysis see the same
  command with the values substituted as quoted literals (`ShellCommand.shown`).
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
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..beneath import steady_realpath

if TYPE_CHECKING:
    import jinja2
    import jinja2.nodes

__all__ = [
    "ARG_PREFIX",
    "POSIX_SHELLS",
    "ArgvTemplate",
    "ShellCommand",
    "ShellTemplate",
    "Template",
    "TemplateProblem",
    "compile_argv",
    "compile_template",
    "render",
    "render_argv",
    "render_shell",
    "shell_path_problem",
]

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
    return steady_realpath(path).replace("\\", "/")


def _realrelpath(root: str, value: Any) -> str:
    """`_realpath` relative to the root's own real path (`../x` when the target lies outside it)."""
    return os.path.relpath(_realpath(root, value), steady_realpath(root)).replace("\\", "/")


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


def _part_value(name: str, filter_name: str | None, context: Mapping[str, Any]) -> Any:
    """The value of a `{{ name }}` / `{{ name | filter }}` part."""
    value = context.get(name)
    if filter_name is not None:
        value = _FILTERS[filter_name](str(context.get(ROOT_VARIABLE, ".")), value)
    return value


@dataclass(frozen=True, slots=True)
class _FastTemplate:
    """A template of literal text and `{{ name }}` / `{{ name | filter }}` parts; renders like Jinja2."""

    parts: tuple[_Part, ...]

    def render(self, context: Mapping[str, Any]) -> str:
        return "".join(
            part if isinstance(part, str) else _value_text(_part_value(*part, context)) for part in self.parts
        )


@dataclass(frozen=True, slots=True)
class _FastExpression:
    """A whole-element argv expression `{{ name }}` / `{{ name | filter }}`: the value itself, not text."""

    name: str
    filter_name: str | None

    def __call__(self, **context: Any) -> Any:
        return _part_value(self.name, self.filter_name, context)


@dataclass(frozen=True)
class _PackagedTemplate:
    """A Jinja2 text template of the installed built-in layer, compiled by its first render: the
    package's tests check and compile every one, so a build (every start of toolrt) need not import
    Jinja2 for them; the first call of the tool pays the compile once (a few milliseconds)."""

    source: str

    @functools.cached_property
    def _compiled(self) -> Any:
        return _jinja_compile(False, self.source)

    def render(self, context: Mapping[str, Any]) -> str:
        text: str = self._compiled.render(context)
        return text


Template = Any
"""A compiled template: `_FastTemplate`, `_PackagedTemplate` or `jinja2.Template` (each has `.render(context)`)."""


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
        autoescape=False, keep_trailing_newline=True, finalize=_slot if shell else _value_text
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


# --- shell templates -------------------------------------------------------------------------------

ARG_PREFIX = "TOOLRT_ARG_"
"""The environment variables that carry a shell template's values; inherited ones are cleared."""

_TOKEN = "\ue000{}\ue001"
_TOKENS = re.compile("\ue000([0-9]+)\ue001")
_SLOTS: ContextVar[list[Any] | None] = ContextVar("toolrt_template_slots", default=None)
"""The values a Jinja2 shell template outputs while `render_shell` renders it, in order."""


def _slot(value: Any) -> str:
    """The shell environment's `finalize`: the value is kept aside, a token stands in the text."""
    slots = _SLOTS.get()
    if slots is None:
        raise TemplateProblem("a shell template renders only through render_shell")
    if isinstance(value, str) and _TOKENS.fullmatch(value):
        return value  # a `{% set %}` block holding one placeholder, output again
    slots.append(value)
    return _TOKEN.format(len(slots) - 1)


def _shell_probe(source: str, parts: Sequence[_Part] | None) -> tuple[str, list[int]]:
    """The template's shell text with each `{{ }}` as a marker word, and each marker's template line."""
    from ..shell.placeholders import MARKER

    text: list[str] = []
    lines: list[int] = []
    if parts is not None:
        for index, part in enumerate(parts):
            if isinstance(part, str):
                text.append(part)
            else:
                lines.append(_line_of(source, index, parts))
                text.append(MARKER.format(len(lines) - 1))
        return "".join(text), lines
    inside = False
    for lineno, token, value in _jinja(True).lex(source):
        if token == "data":
            text.append(value)
        elif token == "variable_begin":
            inside = True
            lines.append(lineno)
            text.append(MARKER.format(len(lines) - 1))
        elif token == "variable_end":
            inside = False
        elif not inside:
            text.append("\n" * str(value).count("\n"))  # a `{% %}` tag's newlines keep later lines in place
    return "".join(text), lines


def _check_shell_positions(source: str, parts: Sequence[_Part] | None) -> tuple[str, ...]:
    """Each `{{ }}`'s context (`word` or `quoted`); TemplateProblem where a value could become code."""
    if "\ue000" in source or "\ue001" in source:
        raise TemplateProblem("a shell template may not contain the characters U+E000 and U+E001")
    probe, lines = _shell_probe(source, parts)
    if not lines:
        return ()
    return _placed(probe, lines)


def _placed(probe: str, lines: Sequence[int] | None) -> tuple[str, ...]:
    from ..shell.placeholders import PlaceholderProblem, placeholder_contexts

    try:
        return placeholder_contexts(probe, lines)
    except PlaceholderProblem as problem:
        raise TemplateProblem(str(problem)) from None


POSIX_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "ksh93", "mksh", "lksh", "oksh", "yash", "posh"})
"""Shells that expand `"${NAME}"` as POSIX says: once, never as code. Other `shell_path`s (fish,
csh, nu, pwsh...) read it differently, so their scripts may not hold `{{ }}`."""


def shell_path_problem(shell_path: str) -> str | None:
    """Why a script with `{{ }}` cannot run under `shell_path`, or None for a POSIX-family shell."""
    base = shell_path.rpartition("/")[2]
    if base in POSIX_SHELLS or base.rstrip("0123456789.") in POSIX_SHELLS:
        return None
    known = ", ".join(sorted(POSIX_SHELLS))
    return (
        f"shell_path {shell_path!r} is not a POSIX shell ({known}); a script for it may not hold {{{{ }}}}, "
        'since its values travel as "${TOOLRT_ARG_...}" expansions: use an argv: handler'
    )


@dataclass(frozen=True, slots=True)
class ShellTemplate:
    """A compiled `shell:` script: the fast parts with each placeholder's context, or a Jinja2 template."""

    parts: tuple[_Part, ...] | None
    contexts: tuple[str, ...]
    """Fast path: `word` or `quoted` for each placeholder, in order."""
    jinja: Any = None
    """Jinja2 path: the template, whose placeholders are placed again on each rendering."""

    @property
    def has_values(self) -> bool:
        return self.jinja is not None or any(not isinstance(part, str) for part in self.parts or ())


@dataclass(frozen=True, slots=True)
class ShellCommand:
    """A rendered shell template."""

    script: str
    """What the shell runs: every value as `"${TOOLRT_ARG_...}"`."""
    env: Mapping[str, str]
    """The `TOOLRT_ARG_*` variables the script reads."""
    shown: str
    """The same command with the values substituted as quoted literals (control characters as
    `$'\\n'` escapes): what a person reads, and what the deny analysis parses."""


_UNSAFE_NAME = re.compile(r"[^A-Z0-9_]")


class _Names:
    """Environment names for one rendering: from the parameter's name, unique, reused per parameter."""

    def __init__(self) -> None:
        self.by_key: dict[Any, str] = {}
        self.taken: set[str] = set()

    def get(self, key: Any, base: str) -> str:
        found = self.by_key.get(key)
        if found is not None:
            return found
        name = ARG_PREFIX + _UNSAFE_NAME.sub("_", base.upper())
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        self.by_key[key] = name
        return name


def _shown_word(text: str) -> str:
    if not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in text):
        return shlex.quote(text)
    return "$'" + "".join(_ansi_c(c) for c in text) + "'"


_ANSI_C_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "'": "\\'"}


def _ansi_c(char: str) -> str:
    named = _ANSI_C_NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if unicodedata.category(char) not in ("Cc", "Cf", "Zl", "Zp", "Cs"):
        return char
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _shown_quoted(text: str) -> str:
    """`text` inside double quotes: as it is when nothing in it is special there, else the quote is
    closed around it as a quoted word (`"hello "'$(x)'"!"`), which the analyzer reads as a literal."""
    if not any(c in '\\"$`' or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in text):
        return text
    return '"' + _shown_word(text) + '"'


class _Command:
    """A shell command being assembled: script text, environment and the shown text side by side."""

    def __init__(self) -> None:
        self.script: list[str] = []
        self.shown: list[str] = []
        self.env: dict[str, str] = {}
        self.names = _Names()

    def text(self, text: str) -> None:
        self.script.append(text)
        self.shown.append(text)

    def value(self, value: Any, context: str, key: Any, base: str) -> None:
        if value is None or _is_undefined(value):
            value = ""
        items = [_value_text(item) for item in value] if isinstance(value, (list, tuple)) else None
        quoted = context == "quoted"
        if items is None:
            name = self.names.get(key, base)
            self.env[name] = _value_text(value)
            self.script.append(f"${{{name}}}" if quoted else f'"${{{name}}}"')
            self.shown.append(_shown_quoted(self.env[name]) if quoted else _shown_word(self.env[name]))
            return
        names = [self.names.get((key, index), f"{base}_{index}") for index in range(len(items))]
        self.env.update(zip(names, items, strict=True))
        self.script.append(" ".join(f"${{{n}}}" if quoted else f'"${{{n}}}"' for n in names))
        self.shown.append(" ".join(_shown_quoted(item) if quoted else _shown_word(item) for item in items))

    def done(self) -> ShellCommand:
        return ShellCommand("".join(self.script), self.env, "".join(self.shown))


def _context(args: Mapping[str, Any], parameters: frozenset[str], root: Path) -> dict[str, Any]:
    context = dict.fromkeys(parameters)
    context.update(args)
    context[ROOT_VARIABLE] = str(root)
    return context


def render_shell(
    template: ShellTemplate, args: Mapping[str, Any], parameters: frozenset[str], root: Path
) -> ShellCommand:
    """The script, its `TOOLRT_ARG_*` environment and the command as shown.

    Raises:
        TemplateProblem: a Jinja2 template whose rendering puts a value where it could become code.
    """
    context = _context(args, parameters, root)
    command = _Command()
    if template.parts is not None:
        placeholders = iter(template.contexts)
        for part in template.parts:
            if isinstance(part, str):
                command.text(part)
                continue
            name, filter_name = part
            base = name if filter_name is None else f"{name}_{filter_name}"
            command.value(_part_value(name, filter_name, context), next(placeholders), part, base)
        return command.done()
    slots: list[Any] = []
    reset = _SLOTS.set(slots)
    try:
        text: str = template.jinja.render(context)
    finally:
        _SLOTS.reset(reset)
    from ..shell.placeholders import MARKER

    found = list(_TOKENS.finditer(text))
    counter = iter(range(len(found)))
    contexts = _placed(_TOKENS.sub(lambda _: MARKER.format(next(counter)), text), None) if found else ()
    position = 0
    for match, placed in zip(found, contexts, strict=True):
        command.text(text[position : match.start()])
        index = int(match.group(1))
        value = slots[index]
        named = next((p for p in sorted(parameters) if context[p] is value and value is not None), None)
        key = (named, None) if named is not None else index
        command.value(value, placed, key, named if named is not None else str(index))
        position = match.end()
    command.text(text[position:])
    return command.done()


# --- compile and render ----------------------------------------------------------------------------


_FAST_CACHE_SIZE = 4096
"""Fast-path templates kept compiled, by source and declared parameters: the same few templates
(`{{ path }}`, `git`, `--`) recur across the tools of a large config, and what they compile to is immutable.
A template with a problem is not kept (its error is raised again on every compile)."""


@functools.lru_cache(maxsize=_FAST_CACHE_SIZE)
def _fast_template(source: str, parameters: frozenset[str], shell: bool) -> Template | None:
    """`compile_template`'s simple subset (None when Jinja2 must handle `source`)."""
    parts = _fast_parts(source)
    if parts is None:
        return None
    _check_names([p[0] for p in parts if not isinstance(p, str)], parameters)
    if shell:
        return ShellTemplate(tuple(parts), _check_shell_positions(source, parts))
    return _FastTemplate(tuple(parts))


@functools.lru_cache(maxsize=_FAST_CACHE_SIZE)
def _fast_argv_element(element: str, parameters: frozenset[str]) -> tuple[Any, bool] | None:
    """`_compile_argv_element`'s simple subset (None when Jinja2 must handle `element`)."""
    parts = _fast_parts(element)
    if parts is None:
        return None
    _check_names([p[0] for p in parts if not isinstance(p, str)], parameters)
    if len(parts) == 1 and not isinstance(parts[0], str):
        return _FastExpression(*parts[0]), True
    return _FastTemplate(tuple(parts)), False


def compile_template(
    source: str, parameters: frozenset[str], *, shell: bool = False, packaged: bool = False
) -> Template:
    """Compile a text template (or, with `shell`, a `ShellTemplate`) that may reference only `parameters`.

    `packaged`: the source is the installed built-in layer's (checked by the package's tests), so a
    text template Jinja2 must handle is compiled by its first render (`_PackagedTemplate`)."""
    fast = _fast_template(source, parameters, shell)
    if fast is not None:
        return fast
    if packaged and not shell:
        return _PackagedTemplate(source)
    _jinja_check(source, parameters, shell=shell)
    if shell:
        _check_shell_positions(source, None)
        return ShellTemplate(None, (), _jinja_compile(True, source))
    return _jinja_compile(shell, source)


def render(template: Template | str, args: Mapping[str, Any], parameters: frozenset[str], root: Path) -> str:
    """Render a text template with every declared parameter defined (absent ones as None) and the root.

    A plain string is a template without expressions, compiled away at load time.
    """
    if isinstance(template, str):
        return template
    result: str = template.render(_context(args, parameters, root))
    return result


@dataclass(frozen=True, slots=True)
class ArgvTemplate:
    """A compiled `handler.argv`: one compiled element per argv element."""

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
    fast = _fast_argv_element(element, parameters)
    if fast is not None:
        return fast
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
    context = _context(args, parameters, root)
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
