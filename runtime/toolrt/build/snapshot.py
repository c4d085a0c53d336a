"""Build an immutable Snapshot from config: definitions, compiled validators and templates, rules, digest.

A snapshot is built once per load and never mutated; a call runs entirely against the snapshot it
started with. Everything that can be compiled is compiled here, so the per-call path only renders
and matches.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from ..attribution import Hold, Journal, journal_for
from ..config.collect import collector_paused
from ..config.document import Document
from ..config.layers import ConfigSet, Layer, read_config, read_single
from ..config.model import (
    ProjectSettings,
    settings_from_documents,
    tool_from_document,
)
from ..config.reuse import Reused
from ..config.settings import (
    CommandLineSettings,
    ResolvedSettings,
    Settings,
    resolve_settings,
)
from ..errors import ConfigError, Problem, ToolrtError
from ..permissions.config import PermissionConfig
from ..permissions.model import CallSite
from ..permissions.protected import ProtectedPaths
from ..sandbox.config import build_policy, host_layer, tool_policy
from ..sandbox.policy import SandboxPolicy
from ..truncate import tool_output_dir
from .checks import check_flags, check_references, unapproved_background
from .compiled import CompiledTool, DescribeInfo
from .digests import canonical_digest, snapshot_digests
from .handler_code import project_code
from .project_import import guard_imports
from .reuse import BuildReuse, Reusing, compile_cached, permission_config
from .tool_layers import compile_with_description, keep_builtin_identity, merge_tools, subagents
from .trusted import hold_untrusted
from .walls import walls_of

__all__ = ["BuildReuse", "Snapshot", "blocked_message", "build_snapshot", "degraded_lines", "with_tool"]


@dataclass(frozen=True)
class Snapshot:
    """One build of a project's config: everything a call needs, compiled, immutable."""

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
    reusing = Reusing(earlier, Reused(earlier.files))
    with collector_paused(age=previous is None):
        root_path = Path(root).resolve()
        if config is None:
            _guard_before_plugins(root_path, cli, reusing)
            config = read_config(root_path, reused=reusing.files, located=located)
        return _build_snapshot(root_path, config, cli, partial, reusing)


def _guard_before_plugins(root_path: Path, cli: CommandLineSettings | None, reusing: Reusing) -> None:
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


class _Settled(NamedTuple):
    """The settings stage: what toolrt.yaml declares, the project's own file, every setting's value."""

    settings: ProjectSettings
    project: Document | None
    resolved: ResolvedSettings


class _Verdict(NamedTuple):
    """The verdict stage: the build's rules, its warnings, and what blocks every call (partial builds)."""

    permissions: PermissionConfig
    warnings: tuple[Problem, ...]
    blocked: ConfigError | None


def _build_snapshot(
    root: Path, config: ConfigSet, cli: CommandLineSettings | None, partial: bool, reusing: Reusing
) -> Snapshot:
    problems = list(config.problems)
    settled = _settle(root, config, cli, problems, reusing)
    data_dir = settled.resolved.values.data_dir
    journal = journal_for(data_dir)
    guard_imports(root, journal)
    held = hold_untrusted(config, journal, problems, reusing.files.listed)  # before anything is compiled or imported
    config = held.config
    locked_path = settled.resolved.values.locked_permissions
    locked = _locked_document(locked_path, problems, reusing)
    permissions = _permissions(root, config, locked, data_dir, partial, problems, reusing)
    tools = _compiled_tools(root, config, settled.settings, data_dir, permissions, problems, reusing)
    sandbox, tool_sandboxes = _sandboxes(root, settled, locked, journal, tools, problems)
    withheld = _withhold(config, tools, tool_sandboxes, problems) if partial else {}
    _check_across(config, settled, tools, withheld, problems)
    verdict = _verdict(permissions, problems, withheld, partial)
    code = project_code(root, tools)
    walls = walls_of(root, journal, locked_path, tools, verdict.permissions)
    sandbox = walls.around(sandbox)
    tool_sandboxes = {tool_id: walls.around(policy) for tool_id, policy in tool_sandboxes.items()}
    digest, config_digest = snapshot_digests(
        root, config, locked, code.files, sandbox, settled.resolved, withheld, verdict.blocked is not None, partial
    )
    return Snapshot(
        root=root,
        data_dir=data_dir,
        tools=MappingProxyType(tools),
        permissions=verdict.permissions,
        settings=settled.settings,
        resolved=settled.resolved,
        digest=digest,
        config_digest=config_digest,
        warnings=verdict.warnings,
        watched=config.watched + ((locked_path,) if locked_path else ()) + tuple(code.files),
        handler_files=code.files,
        tool_code=code.by_tool,
        protected_files=walls.files,
        loaded_at=time.time(),
        config=config,
        sandbox=sandbox,
        tool_sandboxes=MappingProxyType(tool_sandboxes),
        withheld=MappingProxyType(withheld),
        blocked=verdict.blocked,
        held=held.holds,
        reuse=reusing.done(),
    )


def _settle(
    root: Path, config: ConfigSet, cli: CommandLineSettings | None, problems: list[Problem], reusing: Reusing
) -> _Settled:
    """The settings: toolrt.yaml's declarations (flags checked), then every setting's value and origin."""
    settings = settings_from_documents(
        [layer.settings for layer in config.layers if layer.settings is not None], root=root
    )
    check_flags(config, settings, problems)
    project = next((layer.settings for layer in config.layers if layer.name == "project"), None)
    try:
        resolved = resolve_settings(root, project=project, declared_flags=settings.flags, cli=cli, reused=reusing.files)
    except ConfigError as error:
        problems.extend(error.problems)
        resolved = ResolvedSettings(Settings(), MappingProxyType({}), MappingProxyType({}))
    problems.extend(resolved.warnings)
    return _Settled(settings, project, resolved)


def _locked_document(locked_path: Path | None, problems: list[Problem], reusing: Reusing) -> Document | None:
    """The host's locked permissions file, read (None when the host names none or it is missing)."""
    if locked_path is None:
        return None
    if not locked_path.is_file():
        problems.append(Problem(str(locked_path), 0, 0, "", "locked permissions file does not exist"))
        return None
    return read_single(locked_path, "permissions", problems, reused=reusing.files)


def _permissions(
    root: Path,
    config: ConfigSet,
    locked: Document | None,
    data_dir: Path,
    partial: bool,
    problems: list[Problem],
    reusing: Reusing,
) -> PermissionConfig | None:
    """The rules of the built-in, project and locked files; for a partial build whose rules are broken,
    the built-in ones alone (the tools are listed, and every call is blocked by the problems)."""
    builtin = next((layer.permissions for layer in config.layers if layer.name == "builtin"), None)
    if builtin is None:
        problems.append(
            Problem("<builtin>/permissions.yaml", 0, 0, "", "the built-in permissions file is missing or invalid")
        )
        return None
    project = next((layer.permissions for layer in config.layers if layer.name == "project"), None)
    output_dir = tool_output_dir(data_dir, root)
    permissions = permission_config(builtin, project, locked, data_dir, output_dir, root, problems, reusing)
    if permissions is None and partial:
        permissions = permission_config(builtin, None, None, data_dir, output_dir, root, [], reusing)
    return permissions


def _compiled_tools(
    root: Path,
    config: ConfigSet,
    settings: ProjectSettings,
    data_dir: Path,
    permissions: PermissionConfig | None,
    problems: list[Problem],
    reusing: Reusing,
) -> dict[str, CompiledTool]:
    """Each tool id's winning definition, compiled (an unchanged document's compiled tool taken again)."""
    describe_info = DescribeInfo(root=root, home=Path.home(), subagents=subagents(permissions), data_dir=data_dir)
    builtins = {
        source.document.data["id"]: source.document.data
        for layer in config.layers
        if layer.name == "builtin"
        for source in layer.tools
    }
    tools: dict[str, CompiledTool] = {}
    for tool_id, (source, layer) in merge_tools(config.layers, settings, problems).items():
        document = source.document if layer == "builtin" else keep_builtin_identity(source.document, builtins)
        if document is source.document:
            compiled = compile_cached(document, source.description or "", layer, describe_info, problems, reusing)
        else:
            definition = tool_from_document(document, description=source.description or "", layer=layer)
            compiled = compile_with_description(definition, describe_info, problems)
        if compiled is not None:
            tools[tool_id] = compiled
    return tools


def _sandboxes(
    root: Path,
    settled: _Settled,
    locked: Document | None,
    journal: Journal,
    tools: Mapping[str, CompiledTool],
    problems: list[Problem],
) -> tuple[SandboxPolicy, dict[str, SandboxPolicy]]:
    """The sandbox of every process (host, locked file, then the project, tighten-only), and the
    policies of the tools whose file tightens it further."""
    host = settled.resolved.values.sandbox
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
    sandbox = build_policy(root=root, project=settled.project, locked=locked, host=host_sandbox, problems=problems)
    tool_sandboxes = {}
    for tool_id, tool in tools.items():
        tightened = tool_policy(sandbox, tool.definition.document, root=root, problems=problems)
        if tightened is not None:
            tool_sandboxes[tool_id] = tightened
    return sandbox, tool_sandboxes


def _withhold(
    config: ConfigSet,
    tools: dict[str, CompiledTool],
    tool_sandboxes: dict[str, SandboxPolicy],
    problems: list[Problem],
) -> dict[str, tuple[Problem, ...]]:
    """A partial build leaves out the tools of invalid tool files; which, with their files' problems."""
    withheld = _withheld(config.layers, problems)
    for tool_id in withheld:
        tools.pop(tool_id, None)
        tool_sandboxes.pop(tool_id, None)
    return withheld


def _check_across(
    config: ConfigSet,
    settled: _Settled,
    tools: Mapping[str, CompiledTool],
    withheld: Mapping[str, object],
    problems: list[Problem],
) -> None:
    """What only the whole build can check: the names tools and tool sets use, approved background."""
    settings_documents = [layer.settings for layer in config.layers if layer.settings]
    check_references(tools, settled.settings, settings_documents, problems, withheld)
    problems.extend(unapproved_background(tools, settled.resolved.values.background))


def _verdict(
    permissions: PermissionConfig | None,
    problems: list[Problem],
    withheld: Mapping[str, tuple[Problem, ...]],
    partial: bool,
) -> _Verdict:
    """The build stands or falls: a whole build raises on any error; a partial one is blocked by the
    errors that are not a withheld file's, and raises only without rules at all.

    Raises:
        ConfigError: the errors (every problem when there are none but the rules are missing).
    """
    errors = [p for p in problems if p.severity == "error"]
    warnings = tuple(p for p in problems if p.severity == "warning")
    blocked = None
    if partial:
        left_out = {p for found in withheld.values() for p in found}
        blocking = [p for p in errors if p not in left_out]
        blocked = ConfigError(blocking) if blocking else None
    elif errors:
        raise ConfigError(errors)
    if permissions is None:
        raise ConfigError(errors or problems)
    return _Verdict(permissions, warnings, blocked)


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
        root=snapshot.root, home=Path.home(), subagents=subagents(snapshot.permissions), data_dir=snapshot.data_dir
    )
    compiled = compile_with_description(definition, info, problems)
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
    digest = canonical_digest([snapshot.digest, dict(data)])
    return replace(
        snapshot,
        tools=MappingProxyType(tools),
        tool_sandboxes=MappingProxyType(sandboxes),
        digest=digest,
        config_digest=canonical_digest([snapshot.config_digest, dict(data)]),
        loaded_at=time.time(),
    )
