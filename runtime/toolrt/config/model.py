"""Frozen definitions built from validated config documents: tools, selectors, project settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from .document import Document

__all__ = [
    "ArgvHandler",
    "FlagDef",
    "Handler",
    "HostHandler",
    "PathArg",
    "PermissionSpec",
    "ProjectSettings",
    "PythonHandler",
    "Selector",
    "ShellHandler",
    "ToolDefinition",
    "TruncateSpec",
    "When",
    "settings_from_documents",
    "tool_from_document",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PythonHandler:
    """A `handler: {python: module:function}`: a function of the project, a plugin or the package."""

    ref: str
    """`package.module:function`, called with `(args, ctx)`."""
    blocking: bool = True
    """Sync functions run in a worker thread unless this is false."""


@dataclass(frozen=True, slots=True)
class ProcessOptions:
    """What a process handler sets besides its command: working directory, environment, stdin, exit statuses."""

    cwd: str | None = None
    env_allow: tuple[str, ...] | None = None
    env_set: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    stdin: str | None = None
    ok_exit: tuple[int, ...] = (0,)
    """Exit statuses that are a success; any other makes an error result that keeps the output."""
    background: bool = False
    """The process is left running after the call (a server), when the host approves (`Settings.background`)."""


@dataclass(frozen=True, slots=True)
class ArgvHandler:
    """A `handler: {argv: [...]}`: one process started without a shell, each element a template."""

    argv: tuple[str, ...]
    options: ProcessOptions = ProcessOptions()


@dataclass(frozen=True, slots=True)
class ShellHandler:
    """A `handler: {shell: ...}`: a script run by `shell`, its values quoted into it."""

    script: str
    shell: str = "/bin/sh"
    options: ProcessOptions = ProcessOptions()


@dataclass(frozen=True, slots=True)
class HostHandler:
    """A `handler: {host: name}`: a function the embedding host registers at run time."""

    name: str
    """The slot a host fills with `Runtime.register_handler(name, fn)`."""


Handler = PythonHandler | ArgvHandler | ShellHandler | HostHandler


@dataclass(frozen=True, slots=True)
class PathArg:
    """A parameter that names a file or directory (`permission.paths`): checked against the path rules."""

    arg: str
    kind: Literal["file", "directory"] = "file"


@dataclass(frozen=True, slots=True)
class PermissionSpec:
    """A tool's `permission:`: the key its calls ask under and the patterns they ask with."""

    key: str
    patterns: tuple[str, ...] = ("*",)
    always: tuple[str, ...] = ()
    paths: tuple[PathArg, ...] = ()
    analyzer: str | None = None
    preview: str | None = None
    """`module:function` (args, cwd) -> the diff a call would make, shown by its `protected` ask."""


@dataclass(frozen=True, slots=True)
class Selector:
    """AND of its fields; `not_` holds selectors none of which may match."""

    model: str | None = None
    provider: str | None = None
    group: str | None = None
    not_: tuple[Selector, ...] = ()


@dataclass(frozen=True, slots=True)
class When:
    """A tool's `when:`: the models, providers, flags and clients it is offered to."""

    models: tuple[Selector, ...] | None = None
    models_group: str | None = None
    providers: tuple[str, ...] | None = None
    flags: tuple[str, ...] = ()
    clients: tuple[str, ...] | None = None
    any_: tuple[When, ...] = ()
    """Alternatives (`any:`): at least one must hold, on top of the filters above."""


@dataclass(frozen=True, slots=True)
class TruncateSpec:
    """A tool's `truncate:`: its own output limits (None: the setting's)."""

    max_lines: int | None = None
    max_bytes: int | None = None
    direction: Literal["head", "tail"] | None = None


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """One tool as its YAML (or a host's registration) defines it, before compilation."""

    id: str
    description: str
    parameters: Mapping[str, Any]
    """The declared JSON Schema; never mutated (spec compilers copy it)."""
    handler: Handler
    permission: PermissionSpec
    when: When = When()
    source: str = ""
    """`file:line` of the definition."""
    layer: str = "project"
    title: str | None = None
    confirm_title: str | None = None
    confirm_message: str | None = None
    overrides: str | None = None
    internal: bool = False
    timeout: float | None = None
    truncate: TruncateSpec | None = TruncateSpec()
    """None: the handler truncates its own output."""
    annotations: Mapping[str, bool] = field(default_factory=lambda: _EMPTY)
    parallel: bool = False
    task: Literal["never", "optional", "required"] = "never"
    """Over MCP, whether calls run as tasks (YAML `task:` false, true, `required`; see `faces.serve_tasks`)."""
    scopes: tuple[str, ...] = ()
    """OAuth scopes a caller's token needs for this tool over authenticated HTTP (`toolrt serve`, `auth.*`)."""
    cache_ttl: float | None = None
    examples_valid: tuple[Mapping[str, Any], ...] = ()
    examples_invalid: tuple[Mapping[str, Any], ...] = ()
    output: Mapping[str, Any] | None = None
    """The JSON Schema of the data a python or host handler returns (`output:`), or None."""
    describe: str | None = None
    format_validation_error: str | None = None
    enabled: bool = True
    document: Document | None = field(default=None, compare=False, repr=False)
    """Where the definition came from (for located errors); None for tools registered at run time."""


@dataclass(frozen=True, slots=True)
class FlagDef:
    """A feature flag `toolrt.yaml` declares (`flags:`)."""

    name: str
    description: str
    default: bool = False
    stage: str = "experimental"
    source: str = ""


@dataclass(frozen=True, slots=True)
class ProjectSettings:
    """What the `toolrt.yaml` files declare: flags, model groups, tool sets, the built-in tools kept."""

    flags: Mapping[str, FlagDef] = field(default_factory=lambda: _EMPTY)
    model_groups: Mapping[str, tuple[Selector, ...]] = field(default_factory=lambda: _EMPTY)
    toolsets: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)
    builtin_tools: bool | tuple[str, ...] = True


def _selector(data: Mapping[str, Any]) -> Selector:
    return Selector(
        model=data.get("model"),
        provider=data.get("provider"),
        group=data.get("group"),
        not_=tuple(_selector(s) for s in data.get("not", ())),
    )


_ALWAYS = When()
"""A tool without `when:`: one value shared by every such tool (a build holds fewer objects per tool)."""
_NO_LIMITS = TruncateSpec()
_DEFAULT_OPTIONS = ProcessOptions()


def _frozen(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy of `data` (the one empty mapping when it is empty)."""
    return MappingProxyType(dict(data)) if data else _EMPTY


def _when(data: Mapping[str, Any]) -> When:
    if not data:
        return _ALWAYS
    models = data.get("models")
    providers, clients = data.get("providers"), data.get("clients")
    return When(
        models=tuple(_selector(s) for s in models) if isinstance(models, list) else None,
        models_group=models if isinstance(models, str) else None,
        providers=tuple(providers) if providers is not None else None,
        flags=tuple(data.get("flags", ())),
        clients=tuple(clients) if clients is not None else None,
        any_=tuple(_when(alternative) for alternative in data.get("any", ())),
    )


_PROCESS_KEYS = frozenset({"cwd", "env", "stdin", "ok_exit", "background"})


def _process_options(data: Mapping[str, Any]) -> ProcessOptions:
    if _PROCESS_KEYS.isdisjoint(data):
        return _DEFAULT_OPTIONS
    env = data.get("env", {})
    allow = env.get("allow")
    return ProcessOptions(
        cwd=data.get("cwd"),
        env_allow=tuple(allow) if allow is not None else None,
        env_set=_frozen(env.get("set", {})),
        stdin=data.get("stdin"),
        ok_exit=tuple(data.get("ok_exit", (0,))),
        background=bool(data.get("background", False)),
    )


def _handler(data: Mapping[str, Any]) -> Handler:
    if "python" in data:
        return PythonHandler(data["python"], blocking=data.get("blocking", True))
    if "argv" in data:
        return ArgvHandler(tuple(data["argv"]), _process_options(data))
    if "shell" in data:
        return ShellHandler(data["shell"], data.get("shell_path", "/bin/sh"), _process_options(data))
    return HostHandler(data["host"])


def _permission(tool_id: str, data: Mapping[str, Any]) -> PermissionSpec:
    paths = tuple(
        PathArg(p) if isinstance(p, str) else PathArg(p["arg"], p.get("kind", "file")) for p in data.get("paths", ())
    )
    return PermissionSpec(
        key=data.get("key", tool_id),
        patterns=tuple(data.get("patterns", ("*",))),
        always=tuple(data.get("always", ())),
        paths=paths,
        analyzer=data.get("analyzer"),
        preview=data.get("preview"),
    )


_TASK_MODES: Mapping[bool | str, Literal["never", "optional", "required"]] = {
    False: "never",
    True: "optional",
    "required": "required",
}
"""The YAML `task:` values (the schema allows only these) and what each means."""


def _truncate(data: Any) -> TruncateSpec | None:
    if data is False:
        return None
    if not data:
        return _NO_LIMITS
    return TruncateSpec(data.get("max_lines"), data.get("max_bytes"), data.get("direction"))


def tool_from_document(document: Document, *, description: str, layer: str) -> ToolDefinition:
    """A definition from a schema-valid tool document (the description already resolved)."""
    data: Mapping[str, Any] = document.data
    tool_id: str = data["id"]
    confirm = data.get("confirm", {})
    examples = data.get("examples", {})
    cache = data.get("cache")
    return ToolDefinition(
        id=tool_id,
        description=description,
        parameters=data.get("parameters", {"type": "object", "properties": {}}),
        handler=_handler(data["handler"]),
        permission=_permission(tool_id, data.get("permission", {})),
        when=_when(data.get("when", {})),
        source=document.source(""),
        layer=layer,
        title=data.get("title"),
        confirm_title=confirm.get("title"),
        confirm_message=confirm.get("message"),
        overrides=data.get("overrides"),
        internal=data.get("internal", False),
        timeout=data.get("timeout"),
        truncate=_truncate(data.get("truncate")),
        annotations=_frozen(data.get("annotations", {})),
        parallel=data.get("parallel", False),
        task=_TASK_MODES[data.get("task", False)],
        scopes=tuple(data.get("scopes", ())),
        cache_ttl=cache["ttl"] if cache else None,
        examples_valid=tuple(examples.get("valid", ())),
        examples_invalid=tuple(examples.get("invalid", ())),
        output=data.get("output"),
        describe=data.get("describe"),
        format_validation_error=data.get("format_validation_error"),
        enabled=data.get("enabled", True),
        document=document,
    )


def settings_from_documents(documents: list[Document], *, root: Path) -> ProjectSettings:
    """What the built-in and project `toolrt.yaml` declare (later documents win per key): flags, model
    groups, tool sets, the built-in tools kept. Settings values are `toolrt.config.settings`'.

    Flags and model groups accumulate; a flag declared twice is reported by the snapshot builder.
    """
    flags: dict[str, FlagDef] = {}
    groups: dict[str, tuple[Selector, ...]] = {}
    toolsets: dict[str, tuple[str, ...]] = {}
    merged: dict[str, Any] = {}
    for document in documents:
        data: Mapping[str, Any] = document.data or {}
        for index, flag in enumerate(data.get("flags", ())):
            earlier = flags.get(flag["name"])
            if earlier is not None and "description" not in flag:  # `{name, default}` sets a declared flag's default
                flags[flag["name"]] = replace(earlier, default=flag.get("default", earlier.default))
                continue
            flags[flag["name"]] = FlagDef(
                name=flag["name"],
                description=flag.get("description", ""),
                default=flag.get("default", False),
                stage=flag.get("stage", "experimental"),
                source=document.source(f"/flags/{index}"),
            )
        for name, selectors in data.get("model_groups", {}).items():
            groups[name] = tuple(_selector(s) for s in selectors)
        for name, ids in data.get("toolsets", {}).items():
            toolsets[name] = tuple(ids)
        if "builtin_tools" in data:
            merged["builtin_tools"] = data["builtin_tools"]
    builtin_tools = merged.get("builtin_tools", True)
    return ProjectSettings(
        flags=MappingProxyType(flags),
        model_groups=MappingProxyType(groups),
        toolsets=MappingProxyType(toolsets),
        builtin_tools=tuple(builtin_tools) if isinstance(builtin_tools, list) else builtin_tools,
    )
