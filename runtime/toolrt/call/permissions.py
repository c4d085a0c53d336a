"""The permission step of a call: the requests it makes, the doom-loop check, the decision.

Requests come from the tool's `permission:` block (templates over the arguments), from an analyzer
(`bash`, or `module:function`), and from path arguments that reach outside the project root
(lexically or through symlinks), which ask `external_directory` first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..beneath import is_within, steady_realpath
from ..build.compiled import CompiledTool, import_ref, project_root_of
from ..build.locked_tools import locked_denial
from ..build.snapshot import Snapshot
from ..build.templates import render
from ..errors import InvalidArgumentsError, PathChanged, PermissionBlocked
from ..permissions.model import CallSite, Decision, PermissionRequest, usable_exempt
from ..permissions.paths import PATH_PERMISSIONS, relative_form
from .process_denies import process_denies
from .titles import call_title, render_optional

if TYPE_CHECKING:  # `toolrt validate` asks for requests without a call: the call's machinery stays unimported
    from .active import ActiveCall
    from .state import SessionState

__all__ = [
    "INLINE_ARGUMENT_CHARS",
    "LOOP_WARNING",
    "REPEATED_CALL",
    "add_doom_loop",
    "authorize",
    "external_directories",
    "path_patterns",
    "pattern_requests",
    "permission_requests",
    "permission_requests_off_loop",
]

INLINE_ARGUMENT_CHARS = 4096
"""Calls whose string arguments hold up to this many characters are analysed on the event loop (a
few microseconds); larger ones in a worker thread, so an analysis that spends its whole time budget
(a hostile 100 KB command line) never stalls the other calls."""

LOOP_WARNING = (
    "toolrt development mode: this is the same call ({tool} with the same arguments) {times} times in a row; "
    "outside development mode it would be stopped as a loop."
)
REPEATED_CALL = (
    "You made this exact call ({tool} with the same arguments) {times} times in a row, and it was stopped "
    "as a loop: the result would not change. Use what the earlier results said, or try another approach."
)


def permission_requests(
    tool: CompiledTool, args: Mapping[str, Any], snapshot: Snapshot, agent: str | None = None
) -> list[PermissionRequest]:
    """The requests a call makes: external directories of path arguments first, then the tool's own,
    then `protected` for protected paths it writes, then the denies that bind its process (see
    `process_denies`) and the locked file's denial of the tool itself."""
    denial = locked_denial(tool, snapshot)
    binding = ([denial] if denial is not None else []) + process_denies(tool, args, snapshot, agent)
    if tool.static_requests is not None:
        return [*tool.static_requests, *binding]
    spec = tool.definition.permission
    site = snapshot.site
    requests = _external_requests(tool, args, site)
    if spec.analyzer is not None:
        requests.extend(_analyzer(spec.analyzer, project_root_of(tool.definition, snapshot.root))(args, site))
    else:
        names, root = tool.parameter_names, snapshot.root
        # A pattern rendered twice (a path and its real path, when no symlink is involved) is asked once.
        patterns = tuple(dict.fromkeys(render(t, args, names, root) for t in tool.patterns))
        always = tuple(dict.fromkeys(render(t, args, names, root) for t in tool.always))
        requests.append(PermissionRequest(spec.key, patterns, always))
    protected = _protected_request(tool, args, site, snapshot.root)
    if protected is not None:
        requests.append(protected)
    return requests + binding


async def permission_requests_off_loop(
    tool: CompiledTool, args: Mapping[str, Any], snapshot: Snapshot, agent: str | None = None
) -> list[PermissionRequest]:
    """`permission_requests`, run in a worker thread when the arguments are large.

    Raises:
        PathChanged: a path argument's real path could not be found because a name on the way was being
            swapped (a link replaced as it was read): a refusal, never a traceback.
    """
    size = sum(len(value) for value in args.values() if isinstance(value, str))
    try:
        if size <= INLINE_ARGUMENT_CHARS:
            return permission_requests(tool, args, snapshot, agent)
        import anyio.to_thread  # (`toolrt validate` asks for requests without a call, nor an event loop)

        return await anyio.to_thread.run_sync(permission_requests, tool, args, snapshot, agent)
    except OSError as error:
        raise PathChanged(
            f"{error.filename or 'A path of this call'} changed while its permissions were being checked "
            "(a name on the way was being replaced), so nothing was run. Call the tool again."
        ) from error


def _protected_request(
    tool: CompiledTool, args: Mapping[str, Any], site: CallSite, root: Path
) -> PermissionRequest | None:
    """`protected` for the tool's declared path arguments that name protected files.

    Every project tool's `permission.paths` count as written (toolrt cannot know what its code does
    with them); of the built-in tools only those not annotated `read_only` write. A tool that declares
    a `permission.preview` hook (`write`, `edit`) has the request carry the diff the call would apply
    (`metadata.diff`), which the ask shows.
    """
    definition = tool.definition
    if site.protected is None or not definition.permission.paths:
        return None
    if definition.layer == "builtin" and definition.annotations.get("read_only"):
        return None
    paths = [
        os.path.normpath(site.cwd / os.path.expanduser(value))
        for path_arg in definition.permission.paths
        if isinstance(value := args.get(path_arg.arg), str) and value and "\x00" not in value
    ]
    request = site.protected.request(paths)
    if request is None or definition.permission.preview is None:
        return request
    preview: Callable[[Mapping[str, Any], Path], str | None] = import_ref(
        definition.permission.preview, project_root_of(definition, root)
    )
    diff = preview(args, site.cwd)  # the person judges the change, not only the name
    if diff is None:
        return request
    return replace(request, metadata=MappingProxyType({**request.metadata, "diff": diff}))


def pattern_requests(snapshot: Snapshot) -> Callable[[str, str], Sequence[PermissionRequest] | None]:
    """For `toolrt check PERMISSION PATTERN` and `tests:` patterns, the requests a call would make: a
    `bash` pattern is a command, analysed as the bash tool's call would be (globs left as written); a
    path of a path permission is normalised as the tool that asks it does (see `path_patterns`);
    others stand as they are (None)."""

    def analyze(permission: str, pattern: str) -> Sequence[PermissionRequest] | None:
        if permission == "bash":
            from ..shell import analyze_command

            return analyze_command(pattern, snapshot.site, expand_globs=False)
        patterns = path_patterns(permission, pattern, snapshot.site)
        return None if patterns is None else [PermissionRequest(permission, patterns)]

    return analyze


def path_patterns(permission: str, path: str, site: CallSite) -> tuple[str, ...] | None:
    """`path` as the tools that ask `permission` give it: `read` and `list` the absolute path and its
    real path, `edit` and `lsp` both relative to the root, `external_directory` an absolute directory
    pattern, `protected` relative inside the root (absolute outside). None for other permissions."""
    if permission not in PATH_PERMISSIONS or not path or "\x00" in path:
        return None
    root = str(site.root)
    expanded = os.path.expanduser(path)
    stem, tail = (expanded[:-2], "/*") if expanded.endswith("/*") and len(expanded) > 2 else (expanded, "")
    lexical = os.path.normpath(os.path.join(str(site.cwd), stem or "."))
    real = steady_realpath(lexical)
    if permission in ("read", "list", "external_directory"):
        forms = (lexical, real) if permission != "external_directory" else (lexical,)
        return tuple(dict.fromkeys(form + tail for form in forms))
    if permission == "protected":  # as `ProtectedPaths.display`: relative inside the root, else absolute
        return tuple(dict.fromkeys(_inside_or_absolute(form, root) + tail for form in (lexical, real)))
    relative = (relative_form(lexical, root), relative_form(real, steady_realpath(root)))
    return tuple(dict.fromkeys(form + tail for form in relative))


def _inside_or_absolute(path: str, root: str) -> str:
    relative = relative_form(path, root)
    return path if relative == ".." or relative.startswith("../") else relative


def _analyzer(name: str, root: Path | None) -> Callable[[Mapping[str, Any], CallSite], Sequence[PermissionRequest]]:
    if name == "bash":
        from ..shell import analyze_call

        return analyze_call
    function: Callable[[Mapping[str, Any], CallSite], Sequence[PermissionRequest]] = import_ref(name, root)
    return function


def _external_requests(tool: CompiledTool, args: Mapping[str, Any], site: CallSite) -> list[PermissionRequest]:
    requests: list[PermissionRequest] = []
    for path_arg in tool.definition.permission.paths:
        value = args.get(path_arg.arg)
        if value is None or value == "":
            continue
        if isinstance(value, str):
            values = [value]
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            values = value  # an array of paths: each element asks on its own
        else:  # the schema lets something through that cannot be checked: refuse rather than skip it
            raise InvalidArgumentsError(
                f"The {tool.id} tool was called with '{path_arg.arg}' as {type(value).__name__}; "
                "it takes a path (a string) or a list of paths. Please rewrite the input."
            )
        for item in values:
            if not item:
                continue
            for directory in external_directories(item, site, directory=path_arg.kind == "directory"):
                pattern = f"{directory}/*".replace("//", "/")
                requests.append(
                    PermissionRequest(
                        "external_directory", (pattern,), (pattern,), {"filepath": item, "parentDir": directory}
                    )
                )
    return requests


def external_directories(value: str, site: CallSite, *, directory: bool) -> list[str]:
    """Directories outside the root that `value` reaches, lexically or through symlinks (both checked)."""
    lexical = Path(os.path.normpath(site.cwd / os.path.expanduser(value)))
    try:
        real = lexical.resolve(strict=False)
    except (OSError, RuntimeError, ValueError):  # ValueError: a NUL byte in the path
        real = lexical
    roots = (site.root, site.root.resolve())
    exempt = [Path(directory) for directory in usable_exempt(site.exempt)] if site.exempt else []
    found: list[str] = []
    for candidate in (lexical, real):
        if any(is_within(candidate, root) for root in roots) or any(is_within(candidate, e) for e in exempt):
            continue
        is_dir = directory or candidate.is_dir()
        found.append(str(candidate if is_dir else candidate.parent))
    return list(dict.fromkeys(found))


def add_doom_loop(requests: list[PermissionRequest], name: str, args: Mapping[str, Any], session: SessionState) -> bool:
    """Append a `doom_loop` request on the third identical consecutive call of the session."""
    key = (name, args)  # compared by value: the same tool with equal arguments
    if session.repeated(key):
        requests.append(PermissionRequest("doom_loop", (name,), (name,), {"tool": name, "input": dict(args)}))
        return True
    return False


async def authorize(
    call: ActiveCall, args: Mapping[str, Any], requests: list[PermissionRequest], doom_loop: bool
) -> Decision:
    """The permission step. An allow for argument-independent requests is reused while the agent's
    rules and the session's approvals stay the same objects (a reload or an approval replaces them)."""
    tool, snapshot, services, session = call.tool, call.snapshot, call.services, call.session
    ruleset = snapshot.permissions.ruleset(call.agent)
    approved = services.broker.approved(session, call.agent)
    # Reusable only when the call asked exactly the static requests (no doom loop, no process deny).
    cacheable = tool.static_requests is not None and not doom_loop and len(requests) == len(tool.static_requests)
    key = (call.name, call.agent, session)
    if cacheable:
        hit = services.allowed.get(key)
        if hit is not None and hit[0] is tool and hit[1] is ruleset and hit[2] is approved:
            return hit[3]
    try:
        decision = await services.broker.authorize(
            requests,
            ruleset=ruleset,
            locked=snapshot.permissions.locked,
            session=session,
            agent=call.agent,
            asker=call.request.ask,
            tool=call.name,
            call_id=call.call_id,
            # the confirm title, else the call's own title (bash: the model's description of the command)
            title=render_optional(tool.confirm_title, tool, args, snapshot.root)
            or call_title(tool, args, snapshot.root),
            message=render_optional(tool.confirm_message, tool, args, snapshot.root),
        )
    except PermissionBlocked as error:
        if doom_loop:  # the model reads why this call, of all calls, was stopped
            from .state import DOOM_LOOP_THRESHOLD

            error.args = (f"{REPEATED_CALL.format(tool=call.name, times=DOOM_LOOP_THRESHOLD)}\n{error}",)
        raise
    if cacheable and all(d.action == "allow" for d in decision.decisions):
        if len(services.allowed) > 4096:
            services.allowed.clear()
        services.allowed[key] = (tool, ruleset, approved, decision)
    return decision
