"""Compiling one tool definition: its argument validator, its templates, its permission requests.

Everything a call needs is prepared here once per snapshot, so the per-call path only renders and
matches. Problems are appended to the caller's list, located at the definition's file:line.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import jsonschema_rs

from ..config.document import Document
from ..config.model import ArgvHandler, HostHandler, PythonHandler, ShellHandler, ToolDefinition
from ..config.schema_check import parameter_schema_problems
from ..errors import Problem
from ..permissions.model import PermissionRequest
from ..specs.properties import declared_properties, value_types
from .project_import import in_project, project_module_name
from .templates import ArgvTemplate, TemplateProblem, compile_argv, compile_template, shell_path_problem

__all__ = [
    "EDIT_TOOLS",
    "OFFERED_MARK",
    "CompiledTool",
    "DescribeInfo",
    "call_arity_problem",
    "compile_tool",
    "description_problem",
    "import_ref",
    "locate",
]

OFFERED_MARK = "{%"
"""A description holding this is a Jinja2 template over `tools`, the names the selection offers
(`{% if "task" in tools %}…{% endif %}`), rendered per selection (`selection.describe_offered`)."""

EDIT_TOOLS = frozenset({"edit", "write", "apply_patch", "patch", "multiedit"})


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """A definition with everything a call needs precompiled."""

    definition: ToolDefinition
    description: str
    parameter_names: frozenset[str]
    validator: Any
    """jsonschema-rs validator of the parameters, built once."""
    output_validator: Any = None
    """jsonschema-rs validator of the `output:` schema, built once; None without one."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Top-level parameter defaults, applied to arguments before validation."""
    title: Any = None
    confirm_title: Any = None
    confirm_message: Any = None
    patterns: tuple[Any, ...] = ()
    always: tuple[Any, ...] = ()
    argv: ArgvTemplate | None = None
    shell: Any = None
    cwd: Any = None
    stdin: Any = None
    env_set: Mapping[str, Any] = field(default_factory=dict)
    static_requests: tuple[PermissionRequest, ...] | None = None
    """The permission requests of every call when they do not depend on the arguments (no templates,
    no path arguments, no analyzer): computed once, and their allow decisions can be reused."""
    specs: dict[tuple[Any, ...], Mapping[str, Any]] | None = field(default=None, compare=False, repr=False)
    """Provider specs by (format, offered name), compiled on first use (`selection.spec_of`); None until
    the first (most tools of a large config are never offered in every format: no dict per tool for them)."""

    def spec_cache(self) -> dict[tuple[Any, ...], Mapping[str, Any]]:
        """`specs`, made on the first use (a memo on the frozen instance, like `Document.marks`)."""
        cache = self.specs
        if cache is None:
            cache = {}
            object.__setattr__(self, "specs", cache)
        return cache

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def permission_key(self) -> str:
        key = self.definition.permission.key
        return "edit" if key in EDIT_TOOLS else key


def import_ref(ref: str, root: Path | None = None) -> Any:
    """Resolve `package.module:attribute` (dots allowed in the attribute); ImportError says what failed.

    With `root`, a module that lives under the project root is imported from there, under the root's
    own package name (see `project_import`); any other module imports normally.
    """
    import sys

    module_name, _, attribute = ref.partition(":")
    target: Any = None
    if root is not None:
        prefixed = project_module_name(root, module_name)
        target = sys.modules.get(prefixed)
        if target is None and in_project(root, module_name):
            target = _import(prefixed, module_name)
    if target is None:
        target = _import(module_name, module_name)
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ImportError(f"module '{module_name}' has no attribute '{attribute}'") from None
    return target


def _import(name: str, shown: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"cannot import module '{shown}': {str(exc).replace(name, shown)}") from exc
    except SyntaxError as exc:  # project code: any failure of its import is a finding, never a traceback
        where = f" ({exc.filename}, line {exc.lineno})" if exc.filename else ""
        raise ImportError(f"module '{shown}' has a syntax error: {exc.msg}{where}") from exc
    except (Exception, SystemExit) as exc:
        raise ImportError(f"importing module '{shown}' raised {type(exc).__name__}: {exc}") from exc


def project_root_of(definition: ToolDefinition, root: Path) -> Path | None:
    """The root a tool's `module:function` references import from: the project's, for project tools."""
    return root if definition.layer == "project" else None


def call_arity_problem(function: Any, arity: int, shape: str) -> str | None:
    """Why `function` cannot be called with `arity` positional arguments (None when it can, or when unknown)."""
    import inspect

    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None  # builtins and C callables without a signature: trust them
    try:
        signature.bind(*([None] * arity))
    except TypeError:
        return f"it takes {signature}, but is called as {shape}"
    return None


def locate(tool: ToolDefinition, pointer: str, message: str, severity: str = "error") -> Problem:
    document = tool.document
    if document is None:
        return Problem(tool.source or "<registered>", 0, 0, pointer, message, severity)  # type: ignore[arg-type]
    line, column = document.locate(pointer)
    return Problem(document.name, line, column, pointer, message, severity)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=256)
def description_problem(description: str) -> str | None:
    """Why a description written as a template cannot be rendered per selection; None when it can.

    A value-keyed memo (bounded) of a pure function: parsing the template costs a millisecond, and
    every new Runtime compiles the same built-in descriptions."""
    import jinja2
    import jinja2.meta

    try:
        names = jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(description))
    except jinja2.TemplateSyntaxError as exc:
        return f"description template syntax error: {exc.message} (description line {exc.lineno})"
    unknown = sorted(names - {"tools"})
    if unknown:
        return f"description template uses {', '.join(unknown)}; it may only use `tools` (the offered tool names)"
    return None


def _output_validator(tool: ToolDefinition, document: Document, problems: list[Problem]) -> Any:
    """The `output:` schema's validator; problems (not a schema, a handler that returns text) appended."""
    if tool.output is None:
        return None
    found = parameter_schema_problems(document, "/output", tool.output)
    if not isinstance(tool.handler, (PythonHandler, HostHandler)):
        kind = "argv" if isinstance(tool.handler, ArgvHandler) else "shell"
        found.append(
            locate(tool, "/output", f"'output' needs a python or host handler: an {kind} tool's output is text")
        )
    problems.extend(found)
    return None if found else jsonschema_rs.validator_for(dict(tool.output))


def compile_tool(tool: ToolDefinition, description: str, problems: list[Problem]) -> CompiledTool | None:
    """Compile one definition; append located problems and return None when it cannot be used."""
    before = len(problems)
    document = tool.document or Document(Path(tool.source or "<registered>"), {})
    problems.extend(parameter_schema_problems(document, "/parameters", tool.parameters))
    if len(problems) > before:
        return None
    properties = declared_properties(tool.parameters)
    names = frozenset(properties)
    _check_required(tool, names, problems)
    validator = jsonschema_rs.validator_for(dict(tool.parameters))
    output_validator = _output_validator(tool, document, problems)
    template = _Templates(tool, names, problems)
    _check_description(tool, description, problems)
    spec = tool.permission
    patterns = tuple(template(f"/permission/patterns/{i}", p) for i, p in enumerate(spec.patterns))
    always = tuple(template(f"/permission/always/{i}", p) for i, p in enumerate(spec.always))
    _check_path_arguments(tool, properties, problems)
    command = _command(tool, template, names, problems)
    compiled = CompiledTool(
        static_requests=_static_requests(tool, patterns, always),
        definition=tool,
        description=description,
        parameter_names=names,
        validator=validator,
        output_validator=output_validator,
        defaults=_read_only({name: schema["default"] for name, schema in properties.items() if "default" in schema}),
        title=template("/title", tool.title),
        confirm_title=template("/confirm/title", tool.confirm_title),
        confirm_message=template("/confirm/message", tool.confirm_message),
        patterns=patterns,
        always=always,
        argv=command.argv,
        shell=command.shell,
        cwd=command.cwd,
        stdin=command.stdin,
        env_set=_read_only(command.env_set),
    )
    _check_examples(compiled, problems)
    return compiled if len(problems) == before else None


_NOTHING: Mapping[str, Any] = MappingProxyType({})


def _read_only(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only view of `values`; the one empty mapping every tool without any shares."""
    return MappingProxyType(values) if values else _NOTHING


class _Templates:
    """Compiles one tool's templates against its parameter names; a template that cannot compile is a
    located problem, and None in its place."""

    __slots__ = ("names", "problems", "tool")

    def __init__(self, tool: ToolDefinition, names: frozenset[str], problems: list[Problem]) -> None:
        self.tool, self.names, self.problems = tool, names, problems

    def __call__(self, pointer: str, source: str | None, *, quote_shell: bool = False) -> Any:
        if source is None:
            return None
        if not quote_shell and "{" not in source:
            return source  # constant text: nothing to render per call
        try:
            return compile_template(source, self.names, shell=quote_shell, packaged=self.tool.layer == "builtin")
        except TemplateProblem as exc:
            self.problems.append(locate(self.tool, pointer, str(exc)))
            return None


class _Command(NamedTuple):
    """The compiled parts of an argv or shell handler (None and empty for other handlers)."""

    argv: ArgvTemplate | None
    shell: Any
    cwd: Any
    stdin: Any
    env_set: Mapping[str, Any]


_NO_COMMAND = _Command(None, None, None, None, {})


def _command(tool: ToolDefinition, template: _Templates, names: frozenset[str], problems: list[Problem]) -> _Command:
    handler = tool.handler
    if not isinstance(handler, (ArgvHandler, ShellHandler)):
        return _NO_COMMAND
    argv = shell = None
    if isinstance(handler, ArgvHandler):
        try:
            argv = compile_argv(handler.argv, names)
        except TemplateProblem as exc:
            where = "/handler/argv" if exc.element is None else f"/handler/argv/{exc.element}"
            problems.append(locate(tool, where, str(exc)))
    else:
        shell = template("/handler/shell", handler.script, quote_shell=True)
        problem = shell_path_problem(handler.shell) if shell is not None and shell.has_values else None
        if problem is not None:
            problems.append(locate(tool, "/handler/shell_path", problem))
    options = handler.options
    return _Command(
        argv=argv,
        shell=shell,
        cwd=template("/handler/cwd", options.cwd),
        stdin=template("/handler/stdin", options.stdin),
        env_set={k: template(f"/handler/env/set/{k}", v) for k, v in options.env_set.items()},
    )


def _check_required(tool: ToolDefinition, names: frozenset[str], problems: list[Problem]) -> None:
    for index, name in enumerate(tool.parameters.get("required", ())):
        if name not in names:
            problems.append(
                locate(
                    tool,
                    f"/parameters/required/{index}",
                    f"required names '{name}', which is not a property "
                    f"(properties: {', '.join(sorted(names)) or 'none'})",
                )
            )


def _check_description(tool: ToolDefinition, description: str, problems: list[Problem]) -> None:
    if OFFERED_MARK in description and (tool.layer != "builtin" or tool.describe):
        # the installed built-in descriptions are the package's own, checked by its tests (jinja2 not imported)
        problem = description_problem(description)
        if problem is not None:
            problems.append(locate(tool, "/description", problem))


def _check_path_arguments(
    tool: ToolDefinition, properties: Mapping[str, Mapping[str, Any]], problems: list[Problem]
) -> None:
    for index, path_arg in enumerate(tool.permission.paths):
        problem = _path_argument_problem(path_arg.arg, properties, tool.parameters)
        if problem is not None:
            problems.append(locate(tool, f"/permission/paths/{index}", problem))


def _static_requests(
    tool: ToolDefinition, patterns: tuple[Any, ...], always: tuple[Any, ...]
) -> tuple[PermissionRequest, ...] | None:
    """The tool's permission requests when no argument changes them (constant patterns, no analyzer)."""
    spec = tool.permission
    if spec.analyzer is None and not spec.paths and all(isinstance(t, str) for t in patterns + always):
        return (PermissionRequest(spec.key, tuple(patterns), tuple(always)),)
    return None


_PATH_TYPES = frozenset({"string", "array", "null"})


def _path_argument_problem(
    name: str, properties: Mapping[str, Mapping[str, Any]], parameters: Mapping[str, Any]
) -> str | None:
    """Why parameter `name` cannot be a `permission.paths` argument (a string or an array of strings)."""
    if name not in properties:
        declared = ", ".join(sorted(properties)) or "none"
        return f"path argument '{name}' is not a declared parameter (declared: {declared})"
    schema = properties[name]
    types = value_types(schema, parameters)
    if not types or not types <= _PATH_TYPES or types == {"null"}:
        found = " or ".join(sorted(types)) if types else "no type"
        return (
            f"path argument '{name}' must be declared as a string or an array of strings (found {found}): "
            "only those can be checked against the project root"
        )
    if "array" in types:
        items = schema.get("items")
        item_types = value_types(items, parameters) if isinstance(items, Mapping) else set()
        if not item_types or not item_types <= {"string"}:
            return (
                f"path argument '{name}' is an array whose items are not declared as strings "
                "(give it `items: {type: string}`): only strings can be checked against the project root"
            )
    return None


def _check_examples(tool: CompiledTool, problems: list[Problem]) -> None:
    for index, example in enumerate(tool.definition.examples_valid):
        if not tool.validator.is_valid(example):
            error = next(iter(tool.validator.iter_errors(example)))
            problems.append(
                locate(
                    tool.definition,
                    f"/examples/valid/{index}",
                    f"valid example does not pass the parameters schema: {error.message}",
                )
            )
    for index, example in enumerate(tool.definition.examples_invalid):
        if tool.validator.is_valid(example):
            problems.append(
                locate(
                    tool.definition,
                    f"/examples/invalid/{index}",
                    "invalid example passes the parameters schema (the schema is too loose, or the example is wrong)",
                )
            )


@dataclass(frozen=True, slots=True)
class DescribeInfo:
    """What a tool's `describe:` hook may use to finish its description at snapshot build time."""

    root: Path
    home: Path
    subagents: Mapping[str, str]
    """Subagent names → their descriptions (the `task` tool lists them)."""
    data_dir: Path | None = None
    """The data directory, whose attribution journal says which project files are held (the `skill`
    tool leaves a held skill out); None: nothing is held."""
