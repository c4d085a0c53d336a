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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..attribution import Hold, journal_for
from ..config.collect import collector_paused
from ..config.document import Document
from ..config.layers import ConfigSet, Layer, ToolSource, read_config, read_single
from ..config.model import (
    ArgvHandler,
    ProjectSettings,
    PythonHandler,
    ShellHandler,
    ToolDefinition,
    When,
    settings_from_documents,
    tool_from_document,
)
from ..config.reuse import Reused
from ..config.settings import (
    CommandLineSettings,
    ResolvedSettings,
    Settings,
    resolve_settings,
    user_settings_file,
)
from ..errors import ConfigError, Problem, ToolrtError
from ..permissions.config import PermissionConfig, build_permission_config
from ..permissions.model import CallSite
from ..permissions.protected import ProtectedPaths
from ..sandbox.config import build_policy, concrete_protected, host_layer, tool_policy
from ..sandbox.policy import SandboxPolicy
from ..truncate import tool_output_dir
from .compiled import CompiledTool, DescribeInfo, compile_tool, import_ref, locate, project_root_of
from .handler_code import imported_names, project_code
from .project_import import environments_inside, guard_imports
from .trusted import hold_untrusted

__all__ = ["BuildReuse", "Snapshot", "blocked_message", "build_snapshot", "degraded_lines", "with_tool"]


_CompiledEntry = tuple[Document, str, str, CompiledTool | None, tuple[Problem, ...]]
_PermissionEntry = tuple[tuple[Any, ...], PermissionConfig | None, tuple[Problem, ...]]


@dataclass(frozen=True)
class BuildReuse:
    """What one build read and compiled, kept with its snapshot so that the next build of the same
    Runtime (a reload) reads and compiles only what changed. Holds exactly what the build used:
    bounded by the config, not by the number of reloads; never shared between Runtimes."""

    files: Mapping[Any, Any] = field(default_factory=dict)
    """Parsed and schema-checked project files by path and stat signature (`config.reuse`)."""
    compiled: Mapping[int, _CompiledEntry] = field(default_factory=dict)
    """Compiled tools by source document (held, so its id stays unique), description and layer."""
    permissions: tuple[_PermissionEntry, ...] = ()
    """The permission configs built, with the documents they came from: unchanged files keep their
    compiled rulesets (and the per-permission indexes those build lazily)."""


@dataclass
class _Reusing:
    """The reuse of one build in progress: the previous build's entries, and what this one uses."""

    previous: BuildReuse
    files: Reused
    compiled: dict[int, _CompiledEntry] = field(default_factory=dict)
    permissions: list[_PermissionEntry] = field(default_factory=list)

    def done(self) -> BuildReuse:
        return BuildReuse(self.files.done(), MappingProxyType(self.compiled), tuple(self.permissions))


@dataclass(frozen=True)
class Snapshot:
    root: Path
    data_dir: Path
    tools: Mapping[str, CompiledTool]
    permissions: PermissionConfig
    settings: ProjectSettings
    """What toolrt.yaml declares: flags, model groups, tool sets."""
    resolved: ResolvedSettings
    """Every setting's effective value and origin (`toolrt settings`), and the flags' values."""
    digest: str
    config_digest: str = ""
    """The digest of what the config says, the same wherever and however it is loaded: the tools,
    permissions, the project's settings and its handler code by content, not the project's path, the
    host's settings or file times (replicas serving one config report one `config_digest`)."""
    warnings: tuple[Problem, ...] = ()
    watched: tuple[Path, ...] = ()
    loaded_at: float = 0.0
    config: ConfigSet | None = field(default=None, compare=False, repr=False)
    handler_files: Mapping[Path, tuple[int, int]] = field(default_factory=dict)
    """Source files of the project's Python handlers and the project modules they import (module file →
    mtime_ns, size): a reload that sees one change imports the new code before it swaps (`handler_code`)."""
    tool_code: Mapping[str, frozenset[Path]] = field(default_factory=dict)
    """Project tool id → the module files it runs (its references and what they import)."""
    sandbox: SandboxPolicy = SandboxPolicy()
    """The OS sandbox of every process a call starts (host, locked file, then the project, tighten-only)."""
    tool_sandboxes: Mapping[str, SandboxPolicy] = field(default_factory=dict)
    """Tools whose file tightens the sandbox further, by id."""

    protected_files: tuple[Path, ...] = ()
    """Files protected by identity: the locked file, the handler modules and the project modules they import."""

    def sandbox_for(self, tool_id: str) -> SandboxPolicy:
        """The sandbox policy of one tool's processes (before per-call widening)."""
        return self.tool_sandboxes.get(tool_id, self.sandbox)

    withheld: Mapping[str, tuple[Problem, ...]] = field(default_factory=dict)
    """Tool ids left out because the file that defines them (or would, or would replace or disable
    them) is invalid, with the problems of that file. Only a partial build withholds."""
    blocked: ConfigError | None = None
    held: tuple[Hold, ...] = ()
    """Project files this build left out because the model changed them and the person has not approved
    (`toolrt.attribution`; `toolrt trust` shows them)."""
    """Set when `permissions.yaml`, `toolrt.yaml` or the locked file is invalid (partial builds only):
    the tools are listed, but no call runs; every call answers with these problems."""
    reuse: BuildReuse = field(default_factory=BuildReuse, compare=False, repr=False)
    """What this build parsed and compiled, for the next build of the same Runtime (`previous=`)."""

    @property
    def problems(self) -> tuple[Problem, ...]:
        """The errors a partial build tolerated (withheld files, then blocking ones); () when valid."""
        found = [p for problems in self.withheld.values() for p in problems]
        if self.blocked is not None:
            found.extend(self.blocked.problems)
        return tuple(dict.fromkeys(found))

    @property
    def truncation_dir(self) -> Path:
        """This project's tool-output directory (`truncate.tool_output_dir`)."""
        return tool_output_dir(self.data_dir, self.root)

    @functools.cached_property
    def site(self) -> CallSite:
        """Where calls run by default: the root, the home directory, the truncation dir exempt."""
        protected = ProtectedPaths(
            str(self.root), self.permissions.protected, tuple(str(path) for path in self.protected_files)
        )
        return CallSite(
            root=self.root,
            cwd=self.root,
            home=Path.home(),
            exempt=(self.truncation_dir,),
            protected=protected,
            journal=journal_for(self.data_dir),
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


def _permission_config(
    builtin: Document,
    project: Document | None,
    locked: Document | None,
    data_dir: Path,
    truncation_dir: Path,
    root: Path,
    problems: list[Problem],
    reusing: _Reusing,
) -> PermissionConfig | None:
    key = (builtin, project, locked, Path.home(), data_dir, truncation_dir, root)
    for cached_key, config, found in (*reusing.permissions, *reusing.previous.permissions):
        same_files = all(a is b for a, b in zip(cached_key[:3], key[:3], strict=True))
        if same_files and cached_key[3:] == key[3:]:
            problems.extend(found)
            reusing.permissions.append((cached_key, config, found))
            return config
    found_problems: list[Problem] = []
    config = None
    try:
        config = build_permission_config(
            builtin, project, locked, home=Path.home(), data_dir=data_dir, truncation_dir=truncation_dir, root=root
        )
    except ConfigError as error:
        found_problems.extend(error.problems)
    problems.extend(found_problems)
    reusing.permissions.append((key, config, tuple(found_problems)))
    return config


def _data(document: Document | None) -> Any:
    return document.data if document is not None else None


def _names(names: Iterable[str]) -> str:
    """Names for a message: sorted, comma-separated, or `none`."""
    return ", ".join(sorted(names)) or "none"


def _code_digests(root: Path, files: Mapping[Path, tuple[int, int]]) -> list[tuple[str, str]]:
    """(path relative to the project, digest of the content) of each handler code file."""
    found = []
    for path in files:
        try:
            content = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            content = "unreadable"
        try:
            shown = str(path.relative_to(root))
        except ValueError:
            shown = str(path)
        found.append((shown, content))
    return sorted(found)


def _digest(parts: list[Any]) -> str:
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def build_snapshot(
    root: str | Path = ".",
    *,
    config: ConfigSet | None = None,
    cli: CommandLineSettings | None = None,
    partial: bool = False,
    previous: Snapshot | None = None,
    located: bool = False,
) -> Snapshot:
    """Read, validate and compile the config at `root`; raise ConfigError listing every problem.

    `cli` holds what the command line (or the embedding host) sets: the highest settings layer.
    `previous`, the same Runtime's last snapshot: files and tools unchanged since it are taken from it.
    `located`: record every value's position while parsing the project's tool files, for a caller
    that reports problems of most of them (`validate`); otherwise positions are found on demand.

    With `partial`, a broken config still gives a snapshot that fails closed: the tools of invalid
    tool files are withheld (and never replaced by a built-in of the same id), and problems in
    `permissions.yaml`, `toolrt.yaml` or the locked file set `blocked` (no call runs).

    Raises:
        ConfigError: every problem found, located (unless `partial`).
        UsageError: `cli` names a flag the config does not declare.
    """
    earlier = previous.reuse if previous is not None else BuildReuse()
    reusing = _Reusing(earlier, Reused(earlier.files))
    with collector_paused(age=previous is None):
        root_path = Path(root).resolve()
        if config is None:
            _guard_before_plugins(root_path, cli, reusing)
            config = read_config(root_path, reused=reusing.files, located=located)
        return _build_snapshot(root_path, config, cli, partial, reusing)


def _guard_before_plugins(root_path: Path, cli: CommandLineSettings | None, reusing: _Reusing) -> None:
    """Check the project's modules against the journal before `read_config` loads the plugins' entry
    points: a plugin installed in editable mode from inside the project (`pip install -e plugins/x`) is a
    project module the model may have changed. The data directory is the host's (no project file sets
    it), so it is known before the project's files are read; the build registers it again after."""
    host = CommandLineSettings(values=cli.values) if cli is not None else None
    try:
        data_dir = resolve_settings(root_path, cli=host, reused=reusing.files).values.data_dir
    except ToolrtError:
        return  # reported by the build itself, which registers the guard before anything is compiled
    guard_imports(root_path, journal_for(data_dir))


def _state_directory(data_dir: Path, root: Path) -> Path:
    """What stays read-only of toolrt's data directory in the sandbox: all of it (the journal, the
    person's kept approvals and sessions; its tool-output directory is bound writable again), or only
    the journal where the project lies inside it."""
    if root == data_dir or data_dir in root.parents:
        return data_dir / "attribution"
    return data_dir


def _settings_directory(root: Path) -> tuple[Path, ...]:
    """The directory of the person's settings file (`$XDG_CONFIG_HOME/toolrt`), made when missing so the
    sandbox can keep it read-only: a settings file a process put there would turn the sandbox off at
    toolrt's next start (it may set every host-only setting). None inside the project, whose own
    settings files are the project's."""
    directory = user_settings_file().parent.resolve()  # compared with the writable set, which is resolved
    if directory == root or directory.is_relative_to(root) or root.is_relative_to(directory):
        return ()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass  # a read-only home: nothing can be put there either
    return (directory,)


def _build_snapshot(
    root_path: Path, config: ConfigSet, cli: CommandLineSettings | None, partial: bool, reusing: _Reusing
) -> Snapshot:
    problems = list(config.problems)
    warnings: list[Problem] = []
    settings = settings_from_documents(
        [layer.settings for layer in config.layers if layer.settings is not None], root=root_path
    )
    _check_flags(config, settings, problems)
    project_settings = next((layer.settings for layer in config.layers if layer.name == "project"), None)
    try:
        resolved = resolve_settings(
            root_path, project=project_settings, declared_flags=settings.flags, cli=cli, reused=reusing.files
        )
    except ConfigError as error:
        problems.extend(error.problems)
        resolved = ResolvedSettings(Settings(), MappingProxyType({}), MappingProxyType({}))
    problems.extend(resolved.warnings)
    data_dir = resolved.values.data_dir
    output_dir = tool_output_dir(data_dir, root_path)
    journal = journal_for(data_dir)
    guard_imports(root_path, journal)
    held = hold_untrusted(config, journal, problems, reusing.files.listed)  # before anything is compiled or imported
    config = held.config
    locked_doc = None
    locked_path = resolved.values.locked_permissions
    if locked_path is not None:
        if not locked_path.is_file():
            problems.append(Problem(str(locked_path), 0, 0, "", "locked permissions file does not exist"))
        else:
            locked_doc = read_single(locked_path, "permissions", problems, reused=reusing.files)
    builtin_permissions = next((layer.permissions for layer in config.layers if layer.name == "builtin"), None)
    project_permissions = next((layer.permissions for layer in config.layers if layer.name == "project"), None)
    permissions: PermissionConfig | None = None
    if builtin_permissions is not None:
        permissions = _permission_config(
            builtin_permissions, project_permissions, locked_doc, data_dir, output_dir, root_path, problems, reusing
        )
        if permissions is None and partial:  # listing only: every call is blocked by the problems
            permissions = _permission_config(
                builtin_permissions, None, None, data_dir, output_dir, root_path, [], reusing
            )
    else:
        problems.append(
            Problem("<builtin>/permissions.yaml", 0, 0, "", "the built-in permissions file is missing or invalid")
        )
    tools: dict[str, CompiledTool] = {}
    describe_info = DescribeInfo(
        root=root_path,
        home=Path.home(),
        subagents=_subagents(permissions),
        data_dir=data_dir,
    )
    builtins = {
        source.document.data["id"]: source.document.data
        for layer in config.layers
        if layer.name == "builtin"
        for source in layer.tools
    }
    for tool_id, (source, layer) in _merge_tools(config.layers, settings, problems).items():
        document = source.document if layer == "builtin" else _keep_builtin_identity(source.document, builtins)
        if document is source.document:
            compiled = _compile_cached(document, source.description or "", layer, describe_info, problems, reusing)
        else:
            definition = tool_from_document(document, description=source.description or "", layer=layer)
            compiled = _compile_with_description(definition, describe_info, problems)
        if compiled is not None:
            tools[tool_id] = compiled
    host = resolved.values.sandbox
    host_sandbox = host_layer(
        host.mode,
        host.network,
        host.writable,
        source="host settings",
        problems=problems,
        sockets=host.sockets,
        journal=journal,
        credentials=host.credentials,
    )
    sandbox = build_policy(
        root=root_path, project=project_settings, locked=locked_doc, host=host_sandbox, problems=problems
    )
    tool_sandboxes = {}
    for tool_id, compiled_tool in tools.items():
        tightened = tool_policy(sandbox, compiled_tool.definition.document, root=root_path, problems=problems)
        if tightened is not None:
            tool_sandboxes[tool_id] = tightened
    withheld: dict[str, tuple[Problem, ...]] = {}
    if partial:
        withheld = _withheld(config.layers, problems)
        for tool_id in withheld:
            tools.pop(tool_id, None)
            tool_sandboxes.pop(tool_id, None)
    _check_references(
        tools, settings, [layer.settings for layer in config.layers if layer.settings], problems, withheld
    )
    problems.extend(_unapproved_background(tools, resolved.values.background))
    errors = [p for p in problems if p.severity == "error"]
    warnings.extend(p for p in problems if p.severity == "warning")
    blocked = None
    if partial:
        left_out = {p for found in withheld.values() for p in found}
        blocking = [p for p in errors if p not in left_out]
        blocked = ConfigError(blocking) if blocking else None
    elif errors or permissions is None:
        raise ConfigError(errors or problems)
    if permissions is None:
        raise ConfigError(errors or problems)
    modules = handler_modules(root_path, tools)
    code = project_code(root_path, tools)
    # toolrt's data directory (the journal, the person's kept approvals, sessions), the person's settings
    # directory, the environment toolrt runs from and the locked file first: the other walls rest on them.
    essential = (
        (_state_directory(journal.directory.parent.resolve(), root_path),)
        + _settings_directory(root_path)
        + environments_inside(root_path)
        + ((locked_path.resolve(),) if locked_path else ())
    )
    protected_files = essential + imported_modules(root_path, modules)
    protected = concrete_protected(root_path, permissions.protected, protected_files, first=essential)
    walls = tuple(Path(os.path.normpath(path)) for path in essential)
    sandbox = replace(sandbox, protected=protected, essential=walls)
    tool_sandboxes = {
        tool_id: replace(policy, protected=protected, essential=walls) for tool_id, policy in tool_sandboxes.items()
    }
    digest = _digest(
        [
            [layer.name, [t.digest for t in layer.tools], _data(layer.permissions), _data(layer.settings)]
            for layer in config.layers
        ]
        + [_data(locked_doc), [(str(path), stamp) for path, stamp in code.files.items()], repr(sandbox)]
        + [list(resolved.items())]
        + ([sorted(withheld), blocked is not None] if partial and (withheld or blocked) else [])
    )
    config_digest = _digest(
        [
            [layer.name, [t.digest for t in layer.tools], _data(layer.permissions), _data(layer.settings)]
            for layer in config.layers
        ]
        + [_data(locked_doc), _code_digests(root_path, code.files), sorted(withheld), blocked is not None]
    )
    return Snapshot(
        root=root_path,
        data_dir=data_dir,
        tools=MappingProxyType(tools),
        permissions=permissions,
        settings=settings,
        resolved=resolved,
        digest=digest,
        config_digest=config_digest,
        warnings=tuple(warnings),
        watched=config.watched + ((locked_path,) if locked_path else ()) + tuple(code.files),
        handler_files=code.files,
        tool_code=code.by_tool,
        protected_files=protected_files,
        loaded_at=time.time(),
        config=config,
        sandbox=sandbox,
        tool_sandboxes=MappingProxyType(tool_sandboxes),
        withheld=MappingProxyType(withheld),
        blocked=blocked,
        held=held.holds,
        reuse=reusing.done(),
    )


def degraded_lines(snapshot: Snapshot) -> list[str]:
    """What a partial build left out and why, one line per problem, for stderr and MCP log messages."""
    ids_by_problem: dict[Problem, list[str]] = {}
    for tool_id, problems in snapshot.withheld.items():
        for problem in problems:
            ids_by_problem.setdefault(problem, []).append(tool_id)
    lines = []
    for problem, ids in ids_by_problem.items():
        names = ", ".join(f"'{tool_id}'" for tool_id in sorted(ids))
        lines.append(f"{problem} (tool {names} left out until this is fixed)")
    if snapshot.blocked is not None:
        lines.extend(f"{problem} (no tool runs until this is fixed)" for problem in snapshot.blocked.problems)
    return lines


def blocked_message(blocked: ConfigError) -> str:
    """The error result of every call while the config is blocked: what is wrong, where, what to do."""
    listed = "\n".join(f"- {problem}" for problem in blocked.problems)
    return (
        "No tool can run: the project's permission or settings configuration is invalid. "
        f"Ask the user to fix it (toolrt validate shows the same problems):\n{listed}"
    )


def _withheld(layers: Iterable[Layer], problems: list[Problem]) -> dict[str, tuple[Problem, ...]]:
    """Tool id → the errors of the invalid tool file that defines it (or meant to)."""
    ids_by_file = {display: ids for layer in layers for display, ids in layer.files}
    by_file: dict[str, list[Problem]] = {}
    for problem in problems:
        if problem.severity == "error" and problem.file in ids_by_file:
            by_file.setdefault(problem.file, []).append(problem)
    withheld: dict[str, tuple[Problem, ...]] = {}
    for file, found in by_file.items():
        for tool_id in ids_by_file[file]:
            withheld[tool_id] = withheld.get(tool_id, ()) + tuple(found)
    return withheld


def handler_modules(root: Path, tools: Mapping[str, CompiledTool]) -> dict[Path, tuple[int, int]]:
    """The files inside the project root that hold `python:` handlers, with their (mtime_ns, size).

    Found by path (`pkg.mod` → `pkg/mod.py` or `pkg/mod/__init__.py`), never by importing.
    """
    names = {
        tool.definition.handler.ref.partition(":")[0]
        for tool in tools.values()
        if isinstance(tool.definition.handler, PythonHandler) and tool.definition.layer == "project"
    }
    found: dict[Path, tuple[int, int]] = {}
    for name in sorted(names):
        parts = name.split(".")
        for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
            try:
                stat = candidate.stat()
            except OSError:
                continue
            found[candidate] = (stat.st_mtime_ns, stat.st_size)
            break
    return found


def _keep_builtin_identity(document: Document, builtins: Mapping[str, Mapping[str, Any]]) -> Document:
    """A tool that replaces a built-in (same id, or `overrides:` it) keeps the built-in's permission key
    and analyzer, so the rules written for the built-in (a locked `bash` deny) still bind it; its own
    `patterns`, `always` and `paths` stay. Returns `document` itself when nothing changes."""
    data = document.data
    base_id = data["id"] if data["id"] in builtins else data.get("overrides")
    base = builtins.get(base_id) if isinstance(base_id, str) else None
    if base is None:
        return document
    base_permission = base.get("permission") or {}
    own = dict(data.get("permission") or {})
    key, analyzer = base_permission.get("key", base["id"]), base_permission.get("analyzer")
    if own.get("key", data["id"]) == key and own.get("analyzer") == analyzer:
        return document
    own["key"] = key
    if analyzer is not None:
        own["analyzer"] = analyzer
        own.pop("patterns", None)
        own.pop("always", None)
    else:
        own.pop("analyzer", None)
    from dataclasses import replace

    return replace(document, data={**data, "permission": own})


MAX_IMPORTED_MODULES = 500


def imported_modules(root: Path, modules: Iterable[Path]) -> tuple[Path, ...]:
    """`modules` and the project modules they import, transitively (at most 500 files): all of them are
    code toolrt runs, so each is a protected path. Imports are read from the source, never executed."""
    import ast

    found: dict[Path, None] = {}
    pending = list(modules)
    while pending and len(found) < MAX_IMPORTED_MODULES:
        path = pending.pop()
        if path in found:
            continue
        found[path] = None
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        for parts in imported_names(tree, path, root):
            for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
                if parts and candidate.is_file() and candidate not in found:
                    pending.append(candidate)
    return tuple(found)


def _subagents(permissions: PermissionConfig | None) -> Mapping[str, str]:
    if permissions is None:
        return {}
    return {name: info.description or "" for name, info in permissions.agents.items() if info.mode != "primary"}


def _compile_cached(
    document: Document, description: str, layer: str, info: DescribeInfo, problems: list[Problem], reusing: _Reusing
) -> CompiledTool | None:
    """Compile a tool document, reusing the result for a document unchanged since the previous build."""
    if "describe" in document.data:  # describe hooks read the world: always rerun them
        definition = tool_from_document(document, description=description, layer=layer)
        return _compile_with_description(definition, info, problems)
    hit = reusing.compiled.get(id(document)) or reusing.previous.compiled.get(id(document))
    if hit is not None and hit[0] is document and hit[1] == description and hit[2] == layer:
        reusing.compiled[id(document)] = hit
        problems.extend(hit[4])
        return hit[3]
    found: list[Problem] = []
    definition = tool_from_document(document, description=description, layer=layer)
    compiled = _compile_with_description(definition, info, found)
    problems.extend(found)
    reusing.compiled[id(document)] = (document, description, layer, compiled, tuple(found))
    return compiled


def _compile_with_description(
    definition: ToolDefinition, info: DescribeInfo, problems: list[Problem]
) -> CompiledTool | None:
    description = definition.description
    if definition.describe:
        try:
            hook: Callable[[str, DescribeInfo], str] = import_ref(
                definition.describe, project_root_of(definition, info.root)
            )
            description = hook(description, info)
        except Exception as exc:  # a hook is project code: report it as a config problem
            problems.append(locate(definition, "/describe", f"describe hook failed: {type(exc).__name__}: {exc}"))
            return None
    return compile_tool(definition, description, problems)


def _when_flags(when: Mapping[str, Any], pointer: str) -> Iterator[tuple[str, str]]:
    """(JSON pointer, flag) of every flag a `when` block names, its `any` alternatives' included."""
    for index, flag in enumerate(when.get("flags", ())):
        yield f"{pointer}/flags/{index}", flag
    for index, alternative in enumerate(when.get("any", ())):
        yield from _when_flags(alternative, f"{pointer}/any/{index}")


def _check_flags(config: ConfigSet, settings: ProjectSettings, problems: list[Problem]) -> None:
    declared = settings.flags
    seen: set[str] = set()
    for document in (layer.settings for layer in config.layers):
        if document is None:
            continue
        for index, flag in enumerate((document.data or {}).get("flags", ())):
            if "description" not in flag and flag["name"] not in seen:
                line, column = document.locate(f"/flags/{index}")
                message = (
                    f"flag '{flag['name']}' has no description: a new flag says what it switches on "
                    f"(only a flag declared before, such as {_names(seen)}, may be given as name and default)"
                )
                problems.append(Problem(document.name, line, column, f"/flags/{index}", message))
            seen.add(flag["name"])
    for layer in config.layers:
        for source in layer.tools:
            when = source.document.data.get("when")
            if not when:
                continue  # most tools: no flag to check
            for pointer, flag in _when_flags(when, "/when"):
                name = flag.lstrip("!")
                if name not in declared:
                    line, column = source.document.locate(pointer)
                    known = ", ".join(sorted(declared)) or "none declared"
                    problems.append(
                        Problem(
                            source.document.name,
                            line,
                            column,
                            pointer,
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


def _unapproved_background(tools: Mapping[str, CompiledTool], approved: Iterable[str]) -> list[Problem]:
    """A located warning per tool declaring `background: true` that the host did not approve: its
    processes end with each call, as every other tool's."""
    found = []
    for tool_id, tool in tools.items():
        handler = tool.definition.handler
        if isinstance(handler, (ArgvHandler, ShellHandler)) and handler.options.background and tool_id not in approved:
            message = (
                f"background: true needs the host's approval: the host setting `background` does not name "
                f"'{tool_id}', so its processes end with each call (the host adds it with "
                f"TOOLRT_BACKGROUND='[\"{tool_id}\"]' or `background: [{tool_id}]` in its settings file)"
            )
            found.append(locate(tool.definition, "/handler/background", message, "warning"))
    return found


def _check_references(
    tools: Mapping[str, CompiledTool],
    settings: ProjectSettings,
    settings_documents: Iterable[Document],
    problems: list[Problem],
    withheld: Mapping[str, object],
) -> None:
    """Model groups, overrides and tool sets must name what exists; naming a withheld tool is a warning."""
    groups = settings.model_groups
    for tool in tools.values():
        definition = tool.definition
        for pointer, group in _when_groups(definition.when, "/when"):
            if group not in groups:
                problems.append(
                    locate(definition, pointer, f"unknown model group '{group}' (groups: {_names(groups)})")
                )
        if definition.overrides is not None and definition.overrides not in tools:
            if definition.overrides in withheld:
                message = f"overrides '{definition.overrides}', which is left out (its file is invalid)"
                problems.append(locate(definition, "/overrides", message, "warning"))
            else:
                message = f"overrides '{definition.overrides}', which is not a tool"
                problems.append(locate(definition, "/overrides", message))
    for document in settings_documents:
        toolsets = document.data.get("toolsets") if isinstance(document.data, dict) else None
        for name, ids in (toolsets or {}).items():
            for index, tool_id in enumerate(ids):
                if tool_id not in tools:
                    pointer = f"/toolsets/{name}/{index}"
                    line, column = document.locate(pointer)
                    if tool_id in withheld:
                        message = f"tool set '{name}' names '{tool_id}', which is left out (its file is invalid)"
                        problems.append(Problem(document.name, line, column, pointer, message, "warning"))
                    else:
                        message = f"tool set '{name}' names unknown tool '{tool_id}'"
                        problems.append(Problem(document.name, line, column, pointer, message))


def _when_groups(when: When, pointer: str) -> Iterator[tuple[str, str]]:
    """(JSON pointer, group) of every model group a `when` names, its `any` alternatives' included."""
    if when.models_group is not None:
        yield f"{pointer}/models", when.models_group
    for index, selector in enumerate(when.models or ()):
        for group in _selector_groups(selector):
            yield f"{pointer}/models/{index}", group
    for index, alternative in enumerate(when.any_):
        yield from _when_groups(alternative, f"{pointer}/any/{index}")


def _selector_groups(selector: Any) -> list[str]:
    found = [selector.group] if selector.group else []
    for inner in selector.not_:
        found.extend(_selector_groups(inner))
    return found


def with_tool(snapshot: Snapshot, data: Mapping[str, Any]) -> Snapshot:
    """A new snapshot with one tool added or replaced, validated exactly like a file (ToolRegistry.register)."""

    from ..config.layers import _description
    from ..config.schema_check import check_document

    document = Document(Path("<registered>"), dict(data), {}, f"<registered {data.get('id', '?')}>")
    problems = check_document(document, "tool")
    description = _description(document, problems) if not problems else None
    if problems:
        raise ConfigError(problems)
    definition = tool_from_document(document, description=description or "", layer="runtime")
    info = DescribeInfo(
        root=snapshot.root, home=Path.home(), subagents=_subagents(snapshot.permissions), data_dir=snapshot.data_dir
    )
    compiled = _compile_with_description(definition, info, problems)
    if compiled is None or problems:
        raise ConfigError(problems)
    tightened = tool_policy(snapshot.sandbox, document, root=snapshot.root, problems=problems)
    if problems:
        raise ConfigError(problems)
    tools = dict(snapshot.tools)
    sandboxes = dict(snapshot.tool_sandboxes)
    sandboxes.pop(definition.id, None)
    if definition.enabled:
        tools[definition.id] = compiled
        if tightened is not None:
            sandboxes[definition.id] = tightened
    else:
        tools.pop(definition.id, None)
    digest = _digest([snapshot.digest, dict(data)])
    return replace(
        snapshot,
        tools=MappingProxyType(tools),
        tool_sandboxes=MappingProxyType(sandboxes),
        digest=digest,
        config_digest=_digest([snapshot.config_digest, dict(data)]),
        loaded_at=time.time(),
    )
