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
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
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
from .specs.nulls import strip_strict_nulls
from .templates import render, render_argv
from .truncate import cleanup_outputs, truncate_output

__all__ = ["CallEvent", "CallRequest", "Services", "dispatch", "permission_requests"]

DOOM_LOOP_THRESHOLD = 3
MAX_SESSIONS = 4096
"""Sessions whose state (read times, todos, doom-loop history) is kept in memory at once."""
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
    recent: deque[tuple[str, Mapping[str, Any]]] = field(default_factory=lambda: deque(maxlen=DOOM_LOOP_THRESHOLD))


@dataclass
class Services:
    """The mutable side of a Runtime that outlives snapshots: approvals, sessions, audit, listeners."""

    broker: PermissionBroker = field(default_factory=PermissionBroker)
    audit: AuditLog = field(default_factory=lambda: AuditLog(None))
    host_handlers: MutableMapping[str, Callable[..., Any]] = field(default_factory=dict)
    listeners: list[Callable[[CallEvent], None]] = field(default_factory=list)
    sessions: OrderedDict[str, SessionState] = field(default_factory=OrderedDict)
    cache: dict[tuple[str, str, str], tuple[float, ToolResult]] = field(default_factory=dict)
    allowed: dict[tuple[str, str, str], tuple[Any, Any, Any, Decision]] = field(default_factory=dict)
    """Reusable allow decisions of argument-independent requests (see `_authorize`)."""
    batch: Callable[[CallRequest, Sequence[tuple[str, Mapping[str, Any]]]], Awaitable[list[ToolResult]]] | None = None
    call_counter: int = 0

    def session(self, name: str) -> SessionState:
        """The state of session `name`; the least recently used sessions are forgotten past a cap."""
        sessions = self.sessions
        state = sessions.get(name)
        if state is None:
            state = sessions[name] = SessionState()
            if len(sessions) > MAX_SESSIONS:
                del sessions[next(iter(sessions))]
        else:
            sessions.move_to_end(name)
        return state

    def emit(self, event: CallEvent) -> None:
        for listener in tuple(self.listeners):
            listener(event)


@dataclass(frozen=True, slots=True)
class _Call:
    """One call in flight: what every step after repair needs to know."""

    request: CallRequest
    snapshot: Snapshot
    toolset: ToolSet
    services: Services
    call_id: str
    agent: str
    tool: str
    granted: set[tuple[str, str]] = field(default_factory=set)
    """(permission, pattern) pairs the permission step allowed; a handler asking them again is not re-asked."""

    async def ask(self, requests: Sequence[PermissionRequest]) -> None:
        """`ToolContext.ask`: a handler's own requests, minus what this call was already allowed."""
        remaining = []
        for req in requests:
            patterns = tuple(p for p in req.patterns if (req.permission, p) not in self.granted)
            if patterns:
                remaining.append(replace(req, patterns=patterns))
        if not remaining:
            return
        decision = await self.services.broker.authorize(
            remaining,
            ruleset=self.snapshot.permissions.ruleset(self.agent),
            locked=self.snapshot.permissions.locked,
            session=self.request.session,
            asker=self.request.ask,
            tool=self.tool,
            call_id=self.call_id,
        )
        self.granted.update((d.permission, d.pattern) for d in decision.decisions)

    def on_metadata(self, title: str | None, metadata: Mapping[str, Any] | None) -> None:
        if self.services.listeners:
            data = {"title": title, "metadata": metadata}
            self.services.emit(CallEvent("metadata", self.call_id, self.tool, self.request.session, data, time.time()))

    async def batch(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
        if self.services.batch is None:
            raise ToolFailure("batch calls are not available in this runtime")
        return await self.services.batch(self.request, calls)


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
        doom_loop = repair_note is None and _doom_loop(requests, offered.name, args, services.session(request.session))
        decision = await _authorize(
            tool, offered.name, args, requests, request, snapshot, services, agent, call_id, doom_loop
        )
        call = _Call(request, snapshot, toolset, services, call_id, agent, tool.id)
        call.granted.update((d.permission, d.pattern) for d in decision.decisions)
        result = await _execute_cached(tool, args, call)
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
    stripped = strip_strict_nulls(args, tool.definition.parameters)
    if stripped != args and tool.validator.is_valid(stripped):
        return stripped  # OpenAI strict mode sends null for an optional argument it leaves out
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


def permission_requests(tool: CompiledTool, args: Mapping[str, Any], snapshot: Snapshot) -> list[PermissionRequest]:
    """The requests a call makes: external directories of path arguments first, then the tool's own."""
    if tool.static_requests is not None:
        return list(tool.static_requests)
    spec = tool.definition.permission
    site = snapshot.site
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


def _doom_loop(requests: list[PermissionRequest], name: str, args: Mapping[str, Any], session: SessionState) -> bool:
    """Append a `doom_loop` request on the third identical consecutive call of the session."""
    key = (name, args)  # compared by value: the same tool with equal arguments
    session.recent.append(key)
    if len(session.recent) == DOOM_LOOP_THRESHOLD and all(k == key for k in session.recent):
        requests.append(PermissionRequest("doom_loop", (name,), (name,), {"tool": name, "input": dict(args)}))
        return True
    return False


async def _authorize(
    tool: CompiledTool,
    name: str,
    args: Mapping[str, Any],
    requests: list[PermissionRequest],
    request: CallRequest,
    snapshot: Snapshot,
    services: Services,
    agent: str,
    call_id: str,
    doom_loop: bool,
) -> Decision:
    """The permission step. An allow for argument-independent requests is reused while the agent's
    rules and the session's approvals stay the same objects (a reload or an approval replaces them)."""
    ruleset = snapshot.permissions.ruleset(agent)
    approved = services.broker.approved(request.session)
    cacheable = tool.static_requests is not None and not doom_loop
    key = (name, agent, request.session)
    if cacheable:
        hit = services.allowed.get(key)
        if hit is not None and hit[0] is tool and hit[1] is ruleset and hit[2] is approved:
            return hit[3]
    decision = await services.broker.authorize(
        requests,
        ruleset=ruleset,
        locked=snapshot.permissions.locked,
        session=request.session,
        asker=request.ask,
        tool=name,
        call_id=call_id,
        title=_render_optional(tool.confirm_title, tool, args, snapshot.root),
        message=_render_optional(tool.confirm_message, tool, args, snapshot.root),
    )
    if cacheable and all(d.action == "allow" for d in decision.decisions):
        if len(services.allowed) > 4096:
            services.allowed.clear()
        services.allowed[key] = (tool, ruleset, approved, decision)
    return decision


# --- execute --------------------------------------------------------------------------------------

_HANDLERS: dict[str, Callable[..., Any]] = {}
"""Imported Python handlers by reference; a reload that changes a module restarts the process anyway."""


async def _execute_cached(tool: CompiledTool, args: dict[str, Any], call: _Call) -> ToolResult:
    ttl = tool.definition.cache_ttl
    if ttl is None:
        return await _execute(tool, args, call)
    key = (tool.id, json.dumps(args, sort_keys=True, default=str), call.snapshot.digest)
    cache = call.services.cache
    hit = cache.get(key)
    now = time.monotonic()
    if hit is not None and hit[0] > now:
        return hit[1]
    result = await _execute(tool, args, call)
    if result.error is None:
        cache[key] = (now + ttl, result)
    return result


async def _execute(tool: CompiledTool, args: dict[str, Any], call: _Call) -> ToolResult:
    handler = tool.definition.handler
    timeout = tool.definition.timeout or call.snapshot.settings.timeout
    if isinstance(handler, (ArgvHandler, ShellHandler)):
        return await _run_command(tool, args, call, timeout)
    function = _resolve_handler(tool, call.services)
    ctx = _context(tool, call)
    root = call.snapshot.root
    if call.request.abort is None and inspect.iscoroutinefunction(function):
        # Run the first step inline: a handler that finishes without suspending needs no timer.
        coroutine = function(args, ctx)
        try:
            first = coroutine.send(None)
        except StopIteration as finished:
            return _normalize(tool, args, finished.value, ctx, root)
        except CallError:
            raise
        except Exception as exc:  # the handler's bug must not take the runtime down
            raise ToolFailure(f"The {ctx.tool} tool failed: {type(exc).__name__}: {exc}") from exc
        awaitable: Awaitable[Any] = _Resumed(coroutine, first)
        with anyio.move_on_after(timeout) as scope:
            outcome = await _guarded(awaitable, ctx)
        if scope.cancelled_caught:
            raise ToolFailure(f"The {tool.id} tool did not finish within {timeout:g} seconds and was stopped.")
        return _normalize(tool, args, outcome, ctx, root)
    blocking = isinstance(handler, PythonHandler) and handler.blocking
    with anyio.move_on_after(timeout) as scope:
        outcome = await _invoke(function, args, ctx, blocking, call.request.abort)
    if scope.cancelled_caught:
        raise ToolFailure(f"The {tool.id} tool did not finish within {timeout:g} seconds and was stopped.")
    return _normalize(tool, args, outcome, ctx, call.snapshot.root)


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


class _Resumed:
    """Await a coroutine whose first step already ran and yielded `first` (the thing it waits on)."""

    __slots__ = ("_coroutine", "_first")

    def __init__(self, coroutine: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coroutine, self._first = coroutine, first

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, value = self._coroutine, self._first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:  # cancellation and friends go to the handler, as with `await`
                try:
                    value = coroutine.throw(exc)
                except StopIteration as finished:
                    return finished.value
            else:
                try:
                    value = coroutine.send(sent)
                except StopIteration as finished:
                    return finished.value


async def _guarded(awaitable: Awaitable[Any], ctx: ToolContext) -> Any:
    try:
        return await awaitable
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


def _context(tool: CompiledTool, call: _Call) -> ToolContext:
    request, snapshot = call.request, call.snapshot
    return ToolContext(
        tool=tool.id,
        root=snapshot.root,
        data_dir=snapshot.data_dir,
        session=request.session,
        agent=call.agent,
        message_id=request.message_id,
        call_id=call.call_id,
        model=request.model,
        provider=request.provider,
        client=request.client,
        abort_event=request.abort,
        session_state=call.services.session(request.session).tools,
        extra=request.extra,
        on_metadata=call.on_metadata,
        asker=call.ask,
        batch=call.batch,
        questioner=request.questioner,
        available_tools=call.toolset.names(),
    )


async def _run_command(tool: CompiledTool, args: dict[str, Any], call: _Call, timeout: float) -> ToolResult:
    request, snapshot, services, call_id = call.request, call.snapshot, call.services, call.call_id
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


_SECOND: list[Any] = [0, ""]


def _utc_timestamp() -> str:
    """ISO 8601 UTC with milliseconds; the part up to the second is formatted once per second."""
    now = time.time()
    second = int(now)
    if second != _SECOND[0]:
        _SECOND[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    return f"{_SECOND[1]}.{int((now - second) * 1000):03d}Z"


_REQUEST_RECORDS: dict[int, tuple[Decision, list[dict[str, Any]]]] = {}


def _requests_record(decision: Decision | None) -> list[dict[str, Any]]:
    """The `requests` field of a record; memoised for decisions reused across calls (cached allows)."""
    if decision is None:
        return []
    hit = _REQUEST_RECORDS.get(id(decision))
    if hit is not None and hit[0] is decision:
        return hit[1]
    entries = [
        {
            "permission": d.permission,
            "pattern": d.pattern,
            "action": d.action,
            "rule": d.rule.describe() if d.rule is not None else None,
        }
        for d in decision.decisions
    ]
    if len(_REQUEST_RECORDS) > 1024:
        _REQUEST_RECORDS.clear()
    _REQUEST_RECORDS[id(decision)] = (decision, entries)
    return entries


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
    audit.append(
        {
            "time": _utc_timestamp(),
            "session": request.session,
            "agent": agent,
            "model": request.model,
            "tool": tool,
            "call_id": call_id,
            "arguments": args,
            "requests": _requests_record(decision),
            "duration_ms": round(duration * 1000, 3),
            "status": status,
            "output_bytes": len(result.output),
            "error": result.error,
        }
    )
