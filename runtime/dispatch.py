"""One audited pipeline for every call: repair → arguments → permission → execute → truncate → record.

Read top-down: `dispatch()` is the whole story; each step is a small function below it. A call runs
entirely against the snapshot it started with. Failures the model should read are `CallError`s and
come back as results with `error` set; anything else is a bug and propagates.
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio

from .audit import AuditLog
from .config.model import ArgvHandler, HostHandler, PythonHandler, ShellHandler
from .context import Questioner, ToolContext
from .errors import (
    CallError,
    CorrectedError,
    DeniedError,
    InvalidArgumentsError,
    PermissionBlocked,
    RejectedError,
    ToolFailure,
    UnknownToolError,
)
from .execute.environment import DEFAULT_ENV_ALLOW, build_env
from .execute.process import run_process
from .permissions.ask import Asker, PermissionBroker
from .permissions.evaluate import decide
from .permissions.model import CallSite, Decision, PermissionRequest
from .result import ToolResult
from .selection import Offered, ToolSet
from .snapshot import CompiledTool, Snapshot, import_ref
from .templates import render, render_argv
from .truncate import cleanup_outputs, truncate_output

__all__ = ["CallEvent", "CallRequest", "Services", "dispatch", "permission_requests"]

DOOM_LOOP_THRESHOLD = 3
INVALID_TOOL = "invalid"
_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CallRequest:
    """One call as the model (or a host) made it."""

    tool: str
    args: Any
    agent: str | None = None
    model: str | None = None
    provider: str | None = None
    client: str | None = None
    session: str = "default"
    call_id: str = ""
    message_id: str = ""
    ask: Asker | None = None
    abort: anyio.Event | None = None
    questioner: Questioner | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class CallEvent:
    """`running` (data: input), `metadata` (title, metadata), `completed` (the result) or `error`."""

    kind: str
    call_id: str
    tool: str
    session: str
    data: Mapping[str, Any]
    time: float


@dataclass
class SessionState:
    tools: dict[str, Any] = field(default_factory=dict)
    """`ToolContext.session_state`: shared by the tools of one session (read times, todos)."""
    recent: deque[tuple[str, str]] = field(default_factory=lambda: deque(maxlen=DOOM_LOOP_THRESHOLD))


@dataclass
class Services:
    """The mutable side of a Runtime that outlives snapshots: approvals, sessions, audit, listeners."""

    broker: PermissionBroker = field(default_factory=PermissionBroker)
    audit: AuditLog = field(default_factory=lambda: AuditLog(None))
    host_handlers: MutableMapping[str, Callable[..., Any]] = field(default_factory=dict)
    listeners: list[Callable[[CallEvent], None]] = field(default_factory=list)
    sessions: dict[str, SessionState] = field(default_factory=dict)
    cache: dict[tuple[str, str, str], tuple[float, ToolResult]] = field(default_factory=dict)
    batch: Callable[[CallRequest, Sequence[tuple[str, Mapping[str, Any]]]], Awaitable[list[ToolResult]]] | None = None
    call_counter: int = 0

    def session(self, name: str) -> SessionState:
        state = self.sessions.get(name)
        if state is None:
            state = self.sessions[name] = SessionState()
        return state

    def emit(self, event: CallEvent) -> None:
        for listener in tuple(self.listeners):
            listener(event)


async def dispatch(request: CallRequest, snapshot: Snapshot, toolset: ToolSet, services: Services) -> ToolResult:
    """Run one call through the whole pipeline and record it; never raises for a failed call."""
    started = time.perf_counter()
    services.call_counter += 1
    call_id = request.call_id or f"call_{services.call_counter}"
    agent = request.agent or snapshot.permissions.default_agent
    offered, args, repair_note = _repair(request, toolset, snapshot)
    if offered is None:
        assert repair_note is not None
        result = ToolResult(title="Invalid Tool", output="", error=repair_note)
        _record(
            services.audit,
            request,
            call_id,
            agent,
            request.tool,
            args,
            None,
            time.perf_counter() - started,
            "invalid",
            result,
        )
        return result
    tool = offered.tool
    if services.listeners:
        services.emit(CallEvent("running", call_id, offered.name, request.session, {"input": args}, time.time()))
    decision: Decision | None = None
    requests: list[PermissionRequest] | None = None
    status = "ok"
    try:
        args = _arguments(tool, args)
        requests = permission_requests(tool, args, snapshot)
        if repair_note is None:
            requests = _with_doom_loop(requests, offered.name, args, services.session(request.session))
        decision = await services.broker.authorize(
            requests,
            ruleset=snapshot.permissions.ruleset(agent),
            locked=snapshot.permissions.locked,
            session=request.session,
            asker=request.ask,
            tool=offered.name,
            call_id=call_id,
            title=_render_optional(tool.confirm_title, tool, args, snapshot.root),
            message=_render_optional(tool.confirm_message, tool, args, snapshot.root),
        )
        result = await _execute_cached(tool, args, request, snapshot, toolset, services, call_id, agent)
        result = _truncate(tool, result, snapshot, agent)
        if repair_note is not None:
            result = ToolResult(result.title, result.output, result.metadata, result.attachments, result.output)
            status = "invalid"
    except CallError as error:
        status = _status(error)
        if decision is None and requests is not None and isinstance(error, PermissionBlocked):
            # The record names the rules that blocked the call; authorize raised before returning them.
            decision = decide(
                requests,
                snapshot.permissions.ruleset(agent),
                locked=snapshot.permissions.locked,
                approved=services.broker.approved(request.session),
            )
        result = ToolResult(title=_title(tool, args, snapshot.root) or offered.name, output="", error=str(error))
    duration = time.perf_counter() - started
    _record(services.audit, request, call_id, agent, offered.name, args, decision, duration, status, result)
    if services.listeners:
        kind = "completed" if result.error is None else "error"
        services.emit(CallEvent(kind, call_id, offered.name, request.session, {"result": result}, time.time()))
    return result


# --- repair ---------------------------------------------------------------------------------------


def _repair(request: CallRequest, toolset: ToolSet, snapshot: Snapshot) -> tuple[Offered | None, Any, str | None]:
    """The tool to run: the named one, a case-insensitive match, or `invalid` with an explanation.

    Returns (tool, arguments, note); the note is set when the call went to `invalid`, and the tool is
    None when even `invalid` is absent (a project with `builtin_tools: false`).
    """
    offered = toolset.get(request.tool)
    if offered is not None:
        return offered, request.args, None
    lowered = request.tool.lower()
    if lowered != request.tool:
        offered = toolset.get(lowered)
        if offered is not None:
            return offered, request.args, None
    names = toolset.names()
    close = difflib.get_close_matches(request.tool, names, n=3, cutoff=0.5)
    ordered = close + [n for n in names if n not in close]
    note = (
        f"Model tried to call unavailable tool '{request.tool}'. "
        f"Available tools: {', '.join(ordered) if ordered else 'none'}."
    )
    invalid = snapshot.tools.get(INVALID_TOOL)
    return (Offered(INVALID_TOOL, invalid) if invalid else None), {"tool": request.tool, "error": note}, note


# --- arguments ------------------------------------------------------------------------------------


def _arguments(tool: CompiledTool, raw: Any) -> dict[str, Any]:
    """Parse (a JSON string), apply schema defaults, validate with the compiled validator."""
    if raw is None:
        args: Any = {}
    elif isinstance(raw, str):
        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise InvalidArgumentsError(
                _invalid_text(tool, f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})")
            ) from None
    else:
        args = raw
    if not isinstance(args, Mapping):
        raise InvalidArgumentsError(
            _invalid_text(tool, f"expected a JSON object of arguments, got {type(args).__name__}")
        )
    args = dict(args)
    for name, default in tool.defaults.items():
        args.setdefault(name, default)
    if tool.validator.is_valid(args):
        return args  # type: ignore[no-any-return]  # a dict of JSON values
    errors = list(tool.validator.iter_errors(args))
    hook = tool.definition.format_validation_error
    if hook:
        formatter: Callable[[str, list[Any]], str] = import_ref(hook)
        raise InvalidArgumentsError(formatter(tool.id, errors))
    lines = [f"- {_pointer(e.instance_path)}: {e.message}" for e in errors]
    raise InvalidArgumentsError(_invalid_text(tool, "\n" + "\n".join(lines)))


def _invalid_text(tool: CompiledTool, detail: str) -> str:
    return (
        f"The {tool.id} tool was called with invalid arguments: {detail}.\n"
        "Please rewrite the input so it satisfies the expected schema."
    )


def _pointer(path: Sequence[Any]) -> str:
    return "/" + "/".join(str(p) for p in path) if path else "(root)"


# --- permission -----------------------------------------------------------------------------------


def call_site(snapshot: Snapshot, cwd: Path | None = None) -> CallSite:
    return CallSite(root=snapshot.root, cwd=cwd or snapshot.root, home=Path.home(), exempt=(snapshot.truncation_dir,))


def permission_requests(tool: CompiledTool, args: Mapping[str, Any], snapshot: Snapshot) -> list[PermissionRequest]:
    """The requests a call makes: external directories of path arguments first, then the tool's own."""
    spec = tool.definition.permission
    site = call_site(snapshot)
    requests = _external_requests(tool, args, site)
    if spec.analyzer is not None:
        analyzer = _analyzer(spec.analyzer)
        requests.extend(analyzer(args, site))
        return requests
    names, root = tool.parameter_names, snapshot.root
    patterns = tuple(render(t, args, names, root) for t in tool.patterns)
    always = tuple(render(t, args, names, root) for t in tool.always)
    requests.append(PermissionRequest(spec.key, patterns, always))
    return requests


def _analyzer(name: str) -> Callable[[Mapping[str, Any], CallSite], Sequence[PermissionRequest]]:
    if name == "bash":
        from .shell import analyze_call

        return analyze_call
    function: Callable[[Mapping[str, Any], CallSite], Sequence[PermissionRequest]] = import_ref(name)
    return function


def _external_requests(tool: CompiledTool, args: Mapping[str, Any], site: CallSite) -> list[PermissionRequest]:
    requests: list[PermissionRequest] = []
    for path_arg in tool.definition.permission.paths:
        value = args.get(path_arg.arg)
        if not isinstance(value, str) or not value:
            continue
        for directory in external_directories(value, site, directory=path_arg.kind == "directory"):
            pattern = f"{directory}/*".replace("//", "/")
            requests.append(
                PermissionRequest(
                    "external_directory", (pattern,), (pattern,), {"filepath": value, "parentDir": directory}
                )
            )
    return requests


def external_directories(value: str, site: CallSite, *, directory: bool) -> list[str]:
    """Directories outside the root that `value` reaches, lexically or through symlinks (both checked)."""
    lexical = Path(os.path.normpath(site.cwd / Path(value).expanduser()))
    try:
        real = lexical.resolve(strict=False)
    except (OSError, RuntimeError):
        real = lexical
    roots = (site.root, site.root.resolve())
    found: list[str] = []
    for candidate in (lexical, real):
        if any(_inside(candidate, root) for root in roots) or any(_inside(candidate, e) for e in site.exempt):
            continue
        is_dir = directory or candidate.is_dir()
        found.append(str(candidate if is_dir else candidate.parent))
    return list(dict.fromkeys(found))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _with_doom_loop(
    requests: list[PermissionRequest], name: str, args: Mapping[str, Any], session: SessionState
) -> list[PermissionRequest]:
    key = (name, json.dumps(args, sort_keys=True, default=str))
    session.recent.append(key)
    if len(session.recent) == DOOM_LOOP_THRESHOLD and all(k == key for k in session.recent):
        requests.append(PermissionRequest("doom_loop", (name,), (name,), {"tool": name, "input": dict(args)}))
    return requests


# --- execute --------------------------------------------------------------------------------------

_HANDLERS: dict[str, Callable[..., Any]] = {}
"""Imported Python handlers by reference; a reload that changes a module restarts the process anyway."""


async def _execute_cached(
    tool: CompiledTool,
    args: dict[str, Any],
    request: CallRequest,
    snapshot: Snapshot,
    toolset: ToolSet,
    services: Services,
    call_id: str,
    agent: str,
) -> ToolResult:
    ttl = tool.definition.cache_ttl
    if ttl is None:
        return await _execute(tool, args, request, snapshot, toolset, services, call_id, agent)
    key = (tool.id, json.dumps(args, sort_keys=True, default=str), snapshot.digest)
    hit = services.cache.get(key)
    now = time.monotonic()
    if hit is not None and hit[0] > now:
        return hit[1]
    result = await _execute(tool, args, request, snapshot, toolset, services, call_id, agent)
    if result.error is None:
        services.cache[key] = (now + ttl, result)
    return result


async def _execute(
    tool: CompiledTool,
    args: dict[str, Any],
    request: CallRequest,
    snapshot: Snapshot,
    toolset: ToolSet,
    services: Services,
    call_id: str,
    agent: str,
) -> ToolResult:
    handler = tool.definition.handler
    timeout = tool.definition.timeout or snapshot.settings.timeout
    if isinstance(handler, (ArgvHandler, ShellHandler)):
        return await _run_command(tool, args, request, snapshot, timeout, services, call_id)
    function = _resolve_handler(tool, services)
    ctx = _context(tool, request, snapshot, toolset, services, call_id, agent)
    blocking = isinstance(handler, PythonHandler) and handler.blocking
    with anyio.move_on_after(timeout) as scope:
        outcome = await _invoke(function, args, ctx, blocking, request.abort)
    if scope.cancelled_caught:
        raise ToolFailure(f"The {tool.id} tool did not finish within {timeout:g} seconds and was stopped.")
    return _normalize(tool, args, outcome, ctx, snapshot.root)


def _resolve_handler(tool: CompiledTool, services: Services) -> Callable[..., Any]:
    handler = tool.definition.handler
    if isinstance(handler, HostHandler):
        function = services.host_handlers.get(handler.name)
        if function is None:
            raise ToolFailure(
                f"The {tool.id} tool is not available: the host application has not registered a handler for it."
            )
        return function
    assert isinstance(handler, PythonHandler)
    function = _HANDLERS.get(handler.ref)
    if function is None:
        try:
            function = _HANDLERS[handler.ref] = import_ref(handler.ref)
        except ImportError as exc:
            raise ToolFailure(f"The {tool.id} tool is misconfigured: {exc}") from None
    return function


async def _invoke(
    function: Callable[..., Any], args: dict[str, Any], ctx: ToolContext, blocking: bool, abort: anyio.Event | None
) -> Any:
    try:
        if inspect.iscoroutinefunction(function):
            if abort is None:
                return await function(args, ctx)
            return await _abortable(function(args, ctx), abort)
        if blocking:
            return await anyio.to_thread.run_sync(function, args, ctx, abandon_on_cancel=True)
        outcome = function(args, ctx)
        if inspect.isawaitable(outcome):
            return await outcome
        return outcome
    except CallError:
        raise
    except Exception as exc:  # the handler's bug must not take the runtime down; the model gets the gist
        raise ToolFailure(f"The {ctx.tool} tool failed: {type(exc).__name__}: {exc}") from exc


async def _abortable(coroutine: Awaitable[Any], abort: anyio.Event) -> Any:
    result: list[Any] = []

    async def run() -> None:
        result.append(await coroutine)
        group.cancel_scope.cancel()

    async def watch() -> None:
        await abort.wait()
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        group.start_soon(watch)
    if not result:
        raise ToolFailure("User aborted the command")
    return result[0]


def _context(
    tool: CompiledTool,
    request: CallRequest,
    snapshot: Snapshot,
    toolset: ToolSet,
    services: Services,
    call_id: str,
    agent: str,
) -> ToolContext:
    session = services.session(request.session)

    async def ask(requests: Sequence[PermissionRequest]) -> None:
        await services.broker.authorize(
            requests,
            ruleset=snapshot.permissions.ruleset(agent),
            locked=snapshot.permissions.locked,
            session=request.session,
            asker=request.ask,
            tool=tool.id,
            call_id=call_id,
        )

    def on_metadata(title: str | None, metadata: Mapping[str, Any] | None) -> None:
        if services.listeners:
            services.emit(
                CallEvent(
                    "metadata", call_id, tool.id, request.session, {"title": title, "metadata": metadata}, time.time()
                )
            )

    async def batch(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
        if services.batch is None:
            raise ToolFailure("batch calls are not available in this runtime")
        return await services.batch(request, calls)

    return ToolContext(
        tool=tool.id,
        root=snapshot.root,
        data_dir=snapshot.data_dir,
        session=request.session,
        agent=agent,
        message_id=request.message_id,
        call_id=call_id,
        model=request.model,
        provider=request.provider,
        client=request.client,
        abort=request.abort or anyio.Event(),
        session_state=session.tools,
        extra=request.extra,
        on_metadata=on_metadata,
        asker=ask,
        batch=batch,
        questioner=request.questioner,
        available_tools=toolset.names(),
    )


async def _run_command(
    tool: CompiledTool,
    args: dict[str, Any],
    request: CallRequest,
    snapshot: Snapshot,
    timeout: float,
    services: Services,
    call_id: str,
) -> ToolResult:
    handler = tool.definition.handler
    assert isinstance(handler, (ArgvHandler, ShellHandler))
    names, root = tool.parameter_names, snapshot.root
    if isinstance(handler, ArgvHandler):
        assert tool.argv is not None
        argv = render_argv(tool.argv, args, names, root)
    else:
        argv = [handler.shell, "-c", render(tool.shell, args, names, root)]
    options = handler.options
    cwd = root / render(tool.cwd, args, names, root) if tool.cwd is not None else root
    allow = options.env_allow if options.env_allow is not None else (snapshot.settings.env_allow or DEFAULT_ENV_ALLOW)
    env = build_env(allow, set={k: render(t, args, names, root) for k, t in tool.env_set.items()})
    stdin = render(tool.stdin, args, names, root).encode() if tool.stdin is not None else None

    def on_output(text: str) -> None:
        if services.listeners:
            services.emit(CallEvent("metadata", call_id, tool.id, request.session, {"output": text}, time.time()))

    outcome = await run_process(
        argv,
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=stdin,
        abort=request.abort,
        on_output=on_output,
        spill_dir=snapshot.truncation_dir,
    )
    notes = []
    if outcome.timed_out:
        notes.append(f"{tool.id} tool terminated command after exceeding timeout {timeout * 1000:g} ms")
    if outcome.aborted:
        notes.append("User aborted the command")
    output = outcome.output
    if notes:
        output += "\n\n<toolrt_metadata>\n" + "\n".join(notes) + "\n</toolrt_metadata>"
    metadata: dict[str, Any] = {"exit": outcome.exit_code, "output_bytes": outcome.total_bytes}
    if outcome.spill_path is not None:
        metadata["outputPath"] = str(outcome.spill_path)
    title = _title(tool, args, root) or " ".join(argv)[:80]
    error = None
    if outcome.timed_out or outcome.aborted or outcome.exit_code != 0:
        status = (
            "timed out"
            if outcome.timed_out
            else "was aborted"
            if outcome.aborted
            else f"exited with code {outcome.exit_code}"
        )
        error = f"The command {status}.\n{output}".rstrip()
    return ToolResult(title=title, output=output, metadata=MappingProxyType(metadata), error=error)


def _title(tool: CompiledTool, args: Mapping[str, Any], root: Path) -> str | None:
    if tool.title is None:
        return None
    try:
        return render(tool.title, args, tool.parameter_names, root)
    except Exception:  # a title must never fail a call
        return None


def _render_optional(template: Any, tool: CompiledTool, args: Mapping[str, Any], root: Path) -> str | None:
    return None if template is None else render(template, args, tool.parameter_names, root)


def _normalize(tool: CompiledTool, args: Mapping[str, Any], outcome: Any, ctx: ToolContext, root: Path) -> ToolResult:
    """A handler's return value as a ToolResult; anything but text or OpenCode's mapping is an error."""
    title = _title(tool, args, root)
    if isinstance(outcome, str):
        return ToolResult(title=title or ctx.title or "", output=_clean(outcome))
    if isinstance(outcome, ToolResult):
        return outcome
    if isinstance(outcome, Mapping) and isinstance(outcome.get("output", ""), str):
        metadata = outcome.get("metadata") or {}
        attachments = outcome.get("attachments") or ()
        if isinstance(metadata, Mapping) and isinstance(attachments, (list, tuple)):
            return ToolResult(
                title=title or str(outcome.get("title") or ctx.title or ""),
                output=_clean(outcome.get("output", "")),
                metadata=MappingProxyType(dict(metadata)),
                attachments=tuple(attachments),
            )
    raise ToolFailure(
        f"The {tool.id} tool's handler returned {type(outcome).__name__}; a handler returns text or "
        "a mapping with 'output' (and optional 'title', 'metadata', 'attachments')."
    )


def _clean(text: str) -> str:
    """Text safe to encode: lone surrogates (undecodable bytes) become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


# --- truncate -------------------------------------------------------------------------------------


def _truncate(tool: CompiledTool, result: ToolResult, snapshot: Snapshot, agent: str) -> ToolResult:
    spec = tool.definition.truncate
    if spec is None or "truncated" in result.metadata or result.error is not None:
        return result
    defaults = snapshot.settings.truncate
    max_lines = spec.max_lines or defaults.max_lines or 2000
    max_bytes = spec.max_bytes or defaults.max_bytes or 51200
    output = result.output
    if len(output) <= max_bytes // 4 and output.count("\n") < max_lines:
        return result  # certainly within both limits: skip the exact walk
    delegate = snapshot.permissions.ruleset(agent).evaluate("task", "*")
    truncated = truncate_output(
        output,
        output_dir=snapshot.truncation_dir,
        max_lines=max_lines,
        max_bytes=max_bytes,
        direction=spec.direction or defaults.direction or "head",
        delegate_hint=delegate is not None and delegate.action != "deny" and "task" in snapshot.tools,
        saved_path=Path(result.metadata["outputPath"]) if "outputPath" in result.metadata else None,
    )
    _cleanup_once(snapshot.truncation_dir)
    if not truncated.truncated:
        return result
    metadata = dict(result.metadata)
    metadata["truncated"] = True
    metadata["outputPath"] = str(truncated.output_path)
    return ToolResult(result.title, truncated.content, MappingProxyType(metadata), result.attachments, result.error)


_CLEANED: set[Path] = set()


def _cleanup_once(directory: Path) -> None:
    """Delete saved outputs older than 7 days, once per directory per process (OpenCode's hourly job)."""
    if directory not in _CLEANED:
        _CLEANED.add(directory)
        cleanup_outputs(directory)


# --- record ---------------------------------------------------------------------------------------


def _status(error: CallError) -> str:
    if isinstance(error, (RejectedError, CorrectedError)):
        return "rejected"
    if isinstance(error, (DeniedError, PermissionBlocked)):
        return "denied"
    if isinstance(error, (InvalidArgumentsError, UnknownToolError)):
        return "invalid"
    return "error"


def _record(
    audit: AuditLog,
    request: CallRequest,
    call_id: str,
    agent: str,
    tool: str,
    args: Any,
    decision: Decision | None,
    duration: float,
    status: str,
    result: ToolResult,
) -> None:
    if audit.path is None:
        return
    requests = [
        {
            "permission": d.permission,
            "pattern": d.pattern,
            "action": d.action,
            "rule": d.rule.describe() if d.rule is not None else None,
        }
        for d in (decision.decisions if decision is not None else ())
    ]
    audit.append(
        {
            "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "session": request.session,
            "agent": agent,
            "model": request.model,
            "tool": tool,
            "call_id": call_id,
            "arguments": args,
            "requests": requests,
            "duration_ms": round(duration * 1000, 3),
            "status": status,
            "output_bytes": len(result.output),
            "error": result.error,
        }
    )
