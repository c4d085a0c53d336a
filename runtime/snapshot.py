"""Build an immutable Snapshot from config: definitions, compiled validators and templates, rules, digest.

A snapshot is built once per load and never mutated; a call runs entirely against the snapshot it
started with. Everything that can be compiled is compiled here, so the per-call path only renders
and matches.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema_rs

from .config.document import Document
from .config.layers import ConfigSet, Layer, ToolSource, read_config, read_single
from .config.model import (
    ArgvHandler,
    ProjectSettings,
    PythonHandler,
    ShellHandler,
    ToolDefinition,
    settings_from_documents,
    tool_from_document,
)
from .config.validation import parameter_schema_problems
from .context import DescribeInfo
from .errors import ConfigError, Problem
from .permissions.config import PermissionConfig, build_permission_config
from .permissions.model import CallSite, PermissionRequest
from .settings import default_data_dir
from .templates import ArgvTemplate, TemplateProblem, compile_argv, compile_template

__all__ = [
    "CompiledTool",
    "Snapshot",
    "build_snapshot",
    "compile_tool",
    "import_ref",
    "python_handler_problems",
    "with_tool",
]

EDIT_TOOLS = frozenset({"edit", "write", "apply_patch", "patch", "multiedit"})


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """A definition with everything a call needs precompiled."""

    definition: ToolDefinition
    description: str
    parameter_names: frozenset[str]
    validator: Any
    """jsonschema-rs validator of the parameters, built once."""
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

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def permission_key(self) -> str:
        key = self.definition.permission.key
        return "edit" if key in EDIT_TOOLS else key


@dataclass(frozen=True)
class Snapshot:
    root: Path
    data_dir: Path
    tools: Mapping[str, CompiledTool]
    permissions: PermissionConfig
    settings: ProjectSettings
    digest: str
    warnings: tuple[Problem, ...] = ()
    watched: tuple[Path, ...] = ()
    loaded_at: float = 0.0
    config: ConfigSet | None = field(default=None, compare=False, repr=False)

    @property
    def truncation_dir(self) -> Path:
        return self.data_dir / "tool-output"

    @functools.cached_property
    def site(self) -> CallSite:
        """Where calls run by default: the root, the home directory, the truncation dir exempt."""
        return CallSite(root=self.root, cwd=self.root, home=Path.home(), exempt=(self.truncation_dir,))


def import_ref(ref: str) -> Any:
    """Resolve `package.module:attribute` (dots allowed in the attribute); ImportError says what failed."""
    import importlib

    module_name, _, attribute = ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"cannot import module '{module_name}': {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ImportError(f"module '{module_name}' has no attribute '{attribute}'") from None
    return target


def _locate(tool: ToolDefinition, pointer: str, message: str, severity: str = "error") -> Problem:
    document = tool.document
    if document is None:
        return Problem(tool.source or "<registered>", 0, 0, pointer, message, severity)  # type: ignore[arg-type]
    line, column = document.locate(pointer)
    return Problem(document.name, line, column, pointer, message, severity)  # type: ignore[arg-type]


def compile_tool(tool: ToolDefinition, description: str, problems: list[Problem]) -> CompiledTool | None:
    """Compile one definition; append located problems and return None when it cannot be used."""
    before = len(problems)
    document = tool.document or Document(Path(tool.source or "<registered>"), {})
    problems.extend(parameter_schema_problems(document, "/parameters", tool.parameters))
    if len(problems) > before:
        return None
    names = frozenset(tool.parameters.get("properties", {}))
    for index, name in enumerate(tool.parameters.get("required", ())):
        if name not in names:
            problems.append(
                _locate(
                    tool,
                    f"/parameters/required/{index}",
                    f"required names '{name}', which is not a property (properties: {_names(names)})",
                )
            )
    validator = jsonschema_rs.validator_for(dict(tool.parameters))

    def template(pointer: str, source: str | None, *, quote_shell: bool = False) -> Any:
        if source is None:
            return None
        if not quote_shell and "{" not in source:
            return source  # constant text: nothing to render per call
        try:
            return compile_template(source, names, shell=quote_shell)
        except TemplateProblem as exc:
            problems.append(_locate(tool, pointer, str(exc)))
            return None

    spec = tool.permission
    patterns = tuple(template(f"/permission/patterns/{i}", p) for i, p in enumerate(spec.patterns))
    always = tuple(template(f"/permission/always/{i}", p) for i, p in enumerate(spec.always))
    for index, path_arg in enumerate(spec.paths):
        if path_arg.arg not in names:
            problems.append(
                _locate(
                    tool, f"/permission/paths/{index}", f"path argument '{path_arg.arg}' is not a declared parameter"
                )
            )
    handler = tool.handler
    argv = shell = cwd = stdin = None
    env_set: dict[str, Any] = {}
    if isinstance(handler, ArgvHandler):
        try:
            argv = compile_argv(handler.argv, names)
        except TemplateProblem as exc:
            problems.append(_locate(tool, "/handler/argv", str(exc)))
    if isinstance(handler, ShellHandler):
        shell = template("/handler/shell", handler.script, quote_shell=True)
    if isinstance(handler, (ArgvHandler, ShellHandler)):
        cwd = template("/handler/cwd", handler.options.cwd)
        stdin = template("/handler/stdin", handler.options.stdin)
        env_set = {k: template(f"/handler/env/set/{k}", v) for k, v in handler.options.env_set.items()}
    static = None
    if spec.analyzer is None and not spec.paths and all(isinstance(t, str) for t in patterns + always):
        static = (PermissionRequest(spec.key, tuple(patterns), tuple(always)),)
    compiled = CompiledTool(
        static_requests=static,
        definition=tool,
        description=description,
        parameter_names=names,
        validator=validator,
        defaults=MappingProxyType(
            {
                n: spec["default"]
                for n, spec in tool.parameters.get("properties", {}).items()
                if isinstance(spec, Mapping) and "default" in spec
            }
        ),
        title=template("/title", tool.title),
        confirm_title=template("/confirm/title", tool.confirm_title),
        confirm_message=template("/confirm/message", tool.confirm_message),
        patterns=patterns,
        always=always,
        argv=argv,
        shell=shell,
        cwd=cwd,
        stdin=stdin,
        env_set=MappingProxyType(env_set),
    )
    _check_examples(compiled, problems)
    return compiled if len(problems) == before else None


def _check_examples(tool: CompiledTool, problems: list[Problem]) -> None:
    for index, example in enumerate(tool.definition.examples_valid):
        if not tool.validator.is_valid(example):
            error = next(iter(tool.validator.iter_errors(example)))
            problems.append(
                _locate(
                    tool.definition,
                    f"/examples/valid/{index}",
                    f"valid example does not pass the parameters schema: {error.message}",
                )
            )
    for index, example in enumerate(tool.definition.examples_invalid):
        if tool.validator.is_valid(example):
            problems.append(
                _locate(
                    tool.definition,
                    f"/examples/invalid/{index}",
                    "invalid example passes the parameters schema (the schema is too loose, or the example is wrong)",
                )
            )


def _merge_tools(
    layers: tuple[Layer, ...], settings: ProjectSettings, problems: list[Problem]
) -> dict[str, tuple[ToolSource, str]]:
    merged: dict[str, tuple[ToolSource, str]] = {}
    for layer in layers:
        seen: dict[str, ToolSource] = {}
        for source in layer.tools:
            tool_id = source.document.data["id"]
            if tool_id in seen:
                first = seen[tool_id].document
                line, column = source.document.locate("/id")
                problems.append(
                    Problem(
                        source.document.name,
                        line,
                        column,
                        "/id",
                        f"duplicate tool id '{tool_id}' (also defined in {first.source('/id')})",
                    )
                )
                continue
            seen[tool_id] = source
            if layer.name == "builtin" and settings.builtin_tools is not True:
                if settings.builtin_tools is False or tool_id not in settings.builtin_tools:
                    continue
            if source.document.data.get("enabled", True) is False:
                merged.pop(tool_id, None)
                continue
            merged[tool_id] = (source, layer.name)
    return merged


_PERMISSIONS: list[tuple[tuple[Any, ...], PermissionConfig | None, tuple[Problem, ...]]] = []
"""The last permission config built, with the documents it came from: unchanged files keep their
compiled rulesets (and the per-permission indexes those build lazily) across reloads."""


def _permission_config(
    builtin: Document, project: Document | None, locked: Document | None, data_dir: Path, problems: list[Problem]
) -> PermissionConfig | None:
    key = (builtin, project, locked, Path.home(), data_dir)
    for cached_key, config, found in _PERMISSIONS:
        same_files = all(a is b for a, b in zip(cached_key[:3], key[:3], strict=True))
        if same_files and cached_key[3:] == key[3:]:
            problems.extend(found)
            return config
    found_problems: list[Problem] = []
    config = None
    try:
        config = build_permission_config(
            builtin, project, locked, home=Path.home(), data_dir=data_dir, truncation_dir=data_dir / "tool-output"
        )
    except ConfigError as error:
        found_problems.extend(error.problems)
    problems.extend(found_problems)
    _PERMISSIONS[:] = [(key, config, tuple(found_problems))]
    return config


def _data(document: Document | None) -> Any:
    return document.data if document is not None else None


def _names(names: Iterable[str]) -> str:
    """Names for a message: sorted, comma-separated, or `none`."""
    return ", ".join(sorted(names)) or "none"


def _digest(parts: list[Any]) -> str:
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def build_snapshot(
    root: str | Path = ".",
    *,
    config: ConfigSet | None = None,
) -> Snapshot:
    """Read, validate and compile the config at `root`; raise ConfigError listing every problem."""
    root_path = Path(root).resolve()
    config = config if config is not None else read_config(root_path)
    problems = list(config.problems)
    warnings: list[Problem] = []
    settings = settings_from_documents(
        [layer.settings for layer in config.layers if layer.settings is not None], root=root_path
    )
    _check_flags(config, settings, problems)
    data_dir = settings.data_dir or default_data_dir()
    locked_doc = None
    locked_path = (
        Path(os.environ["TOOLRT_LOCKED_PERMISSIONS"])
        if os.environ.get("TOOLRT_LOCKED_PERMISSIONS")
        else settings.locked_permissions
    )
    if locked_path is not None:
        if not locked_path.is_file():
            problems.append(Problem(str(locked_path), 0, 0, "", "locked permissions file does not exist"))
        else:
            locked_doc = read_single(locked_path, "permissions", problems)
    builtin_permissions = next((layer.permissions for layer in config.layers if layer.name == "builtin"), None)
    project_permissions = next((layer.permissions for layer in config.layers if layer.name == "project"), None)
    permissions: PermissionConfig | None = None
    if builtin_permissions is not None:
        permissions = _permission_config(builtin_permissions, project_permissions, locked_doc, data_dir, problems)
    else:
        problems.append(
            Problem("<builtin>/permissions.yaml", 0, 0, "", "the built-in permissions file is missing or invalid")
        )
    tools: dict[str, CompiledTool] = {}
    describe_info = DescribeInfo(
        root=root_path,
        home=Path.home(),
        subagents=_subagents(permissions),
    )
    for tool_id, (source, layer) in _merge_tools(config.layers, settings, problems).items():
        compiled = _compile_cached(source.document, source.description or "", layer, describe_info, problems)
        if compiled is not None:
            tools[tool_id] = compiled
    _check_references(tools, settings, problems)
    errors = [p for p in problems if p.severity == "error"]
    warnings.extend(p for p in problems if p.severity == "warning")
    if errors or permissions is None:
        raise ConfigError(errors or problems)
    digest = _digest(
        [
            [layer.name, [t.digest for t in layer.tools], _data(layer.permissions), _data(layer.settings)]
            for layer in config.layers
        ]
        + [_data(locked_doc)]
    )
    return Snapshot(
        root=root_path,
        data_dir=data_dir,
        tools=MappingProxyType(tools),
        permissions=permissions,
        settings=settings,
        digest=digest,
        warnings=tuple(warnings),
        watched=config.watched + ((locked_path,) if locked_path else ()),
        loaded_at=time.time(),
        config=config,
    )


def _subagents(permissions: PermissionConfig | None) -> Mapping[str, str]:
    if permissions is None:
        return {}
    return {name: info.description or "" for name, info in permissions.agents.items() if info.mode != "primary"}


_COMPILED: dict[int, tuple[Document, str, str, CompiledTool | None, tuple[Problem, ...]]] = {}
"""Compiled tools by source document (held, so its id stays unique), description and layer."""


def _compile_cached(
    document: Document, description: str, layer: str, info: DescribeInfo, problems: list[Problem]
) -> CompiledTool | None:
    """Compile a tool document, reusing the result for a document unchanged since the last build."""
    if "describe" in document.data:  # describe hooks read the world: always rerun them
        definition = tool_from_document(document, description=description, layer=layer)
        return _compile_with_description(definition, info, problems)
    hit = _COMPILED.get(id(document))
    if hit is not None and hit[0] is document and hit[1] == description and hit[2] == layer:
        problems.extend(hit[4])
        return hit[3]
    found: list[Problem] = []
    definition = tool_from_document(document, description=description, layer=layer)
    compiled = _compile_with_description(definition, info, found)
    problems.extend(found)
    if len(_COMPILED) > 20_000:
        _COMPILED.clear()
    _COMPILED[id(document)] = (document, description, layer, compiled, tuple(found))
    return compiled


def _compile_with_description(
    definition: ToolDefinition, info: DescribeInfo, problems: list[Problem]
) -> CompiledTool | None:
    description = definition.description
    if definition.describe:
        try:
            hook: Callable[[str, DescribeInfo], str] = import_ref(definition.describe)
            description = hook(description, info)
        except Exception as exc:  # a hook is project code: report it as a config problem
            problems.append(_locate(definition, "/describe", f"describe hook failed: {type(exc).__name__}: {exc}"))
            return None
    return compile_tool(definition, description, problems)


def _check_flags(config: ConfigSet, settings: ProjectSettings, problems: list[Problem]) -> None:
    declared = settings.flags
    for layer in config.layers:
        for source in layer.tools:
            for index, flag in enumerate(source.document.data.get("when", {}).get("flags", ())):
                name = flag.lstrip("!")
                if name not in declared:
                    line, column = source.document.locate(f"/when/flags/{index}")
                    known = ", ".join(sorted(declared)) or "none declared"
                    problems.append(
                        Problem(
                            source.document.name,
                            line,
                            column,
                            f"/when/flags/{index}",
                            f"unknown flag '{name}' (declared flags: {known}); declare it under 'flags:' in toolrt.yaml",  # noqa: E501
                        )
                    )
    for key in os.environ:
        if key.startswith("TOOLRT_FLAG_") and key[12:].lower() not in declared:
            problems.append(
                Problem(
                    "<environment>",
                    0,
                    0,
                    "",
                    f"environment variable {key} names an unknown flag '{key[12:].lower()}' "
                    f"(declared flags: {_names(declared)})",
                )
            )


def _check_references(tools: Mapping[str, CompiledTool], settings: ProjectSettings, problems: list[Problem]) -> None:
    groups = settings.model_groups
    for tool in tools.values():
        definition = tool.definition
        when = definition.when
        if when.models_group is not None and when.models_group not in groups:
            problems.append(
                _locate(
                    definition,
                    "/when/models",
                    f"unknown model group '{when.models_group}' (groups: {_names(groups)})",
                )
            )
        for index, selector in enumerate(when.models or ()):
            for group in _selector_groups(selector):
                if group not in groups:
                    problems.append(
                        _locate(
                            definition,
                            f"/when/models/{index}",
                            f"unknown model group '{group}' (groups: {_names(groups)})",
                        )
                    )
        if definition.overrides is not None and definition.overrides not in tools:
            problems.append(
                _locate(definition, "/overrides", f"overrides '{definition.overrides}', which is not a tool")
            )
    for name, ids in settings.toolsets.items():
        for tool_id in ids:
            if tool_id not in tools:
                problems.append(
                    Problem(
                        "toolrt.yaml", 0, 0, f"/toolsets/{name}", f"tool set '{name}' names unknown tool '{tool_id}'"
                    )
                )


def _selector_groups(selector: Any) -> list[str]:
    found = [selector.group] if selector.group else []
    for inner in selector.not_:
        found.extend(_selector_groups(inner))
    return found


def python_handler_problems(snapshot: Snapshot) -> list[Problem]:
    """Handlers, hooks and analyzers that cannot be imported (project root first on sys.path)."""
    import sys

    problems: list[Problem] = []
    root = str(snapshot.root)
    if root not in sys.path:
        sys.path.insert(0, root)
    for tool in snapshot.tools.values():
        definition = tool.definition
        refs = []
        if isinstance(definition.handler, PythonHandler):
            refs.append(("/handler/python", definition.handler.ref))
        if definition.permission.analyzer and ":" in definition.permission.analyzer:
            refs.append(("/permission/analyzer", definition.permission.analyzer))
        if definition.format_validation_error:
            refs.append(("/format_validation_error", definition.format_validation_error))
        for pointer, ref in refs:
            try:
                target = import_ref(ref)
            except ImportError as exc:
                problems.append(_locate(definition, pointer, f"handler '{ref}' cannot be imported: {exc}"))
                continue
            if not callable(target):
                problems.append(_locate(definition, pointer, f"'{ref}' is not callable"))
    return problems


def with_tool(snapshot: Snapshot, data: Mapping[str, Any]) -> Snapshot:
    """A new snapshot with one tool added or replaced, validated exactly like a file (ToolRegistry.register)."""
    from dataclasses import replace

    from .config.layers import _description
    from .config.validation import check_document

    document = Document(Path("<registered>"), dict(data), {}, f"<registered {data.get('id', '?')}>")
    problems = check_document(document, "tool")
    description = _description(document, problems) if not problems else None
    if problems:
        raise ConfigError(problems)
    definition = tool_from_document(document, description=description or "", layer="runtime")
    info = DescribeInfo(root=snapshot.root, home=Path.home(), subagents=_subagents(snapshot.permissions))
    compiled = _compile_with_description(definition, info, problems)
    if compiled is None or problems:
        raise ConfigError(problems)
    tools = dict(snapshot.tools)
    if definition.enabled:
        tools[definition.id] = compiled
    else:
        tools.pop(definition.id, None)
    digest = _digest([snapshot.digest, dict(data)])
    return replace(snapshot, tools=MappingProxyType(tools), digest=digest, loaded_at=time.time())
