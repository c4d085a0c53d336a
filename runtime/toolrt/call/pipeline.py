"""One audited pipeline for every call: repair → arguments → permission → run → truncate → record.

Read top-down: `dispatch()` is the whole story; each step lives in a module of its own in this package.
A call runs entirely against the snapshot it started with. Failures the model should read are
`CallError`s and come back as results with `error` set; anything else (a bug, project code that
raised where it should not) is logged and comes back as an error result too: a call never raises
for its own failure, and every call leaves one audit record.
"""

from __future__ import annotations

import difflib
import logging
import time
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import anyio

from ..build.selection import Offered, ToolSet, unavailable
from ..build.snapshot import Snapshot, blocked_message
from ..errors import CallError, InputRequired, PermissionBlocked, ProtocolError, RejectedError, StoreError
from ..permissions.model import Decision, PermissionRequest
from ..result import ToolResult
from ..telemetry import call_span, record_call, span, tracer
from .active import ActiveCall
from .arguments import parse_arguments
from .permissions import LOOP_WARNING, add_doom_loop, authorize, permission_requests_off_loop
from .record import CallRecord, SessionSave, status_of
from .request import CallRequest
from .run import run_tool
from .state import DOOM_LOOP_THRESHOLD, Services
from .titles import call_title
from .truncation import truncate_result

__all__ = ["CANCELLED", "INVALID_TOOL", "PROTOCOL_ERROR", "dispatch"]

INVALID_TOOL = "invalid"
PROTOCOL_ERROR = "protocol_error"
"""The metadata key of a result whose handler raised `ProtocolError`: `{"code", "message", "data"}`."""

logger = logging.getLogger("toolrt.call")
CANCELLED = "The call was cancelled before it finished."
STORE_AWAY = "The state store cannot be reached, so the call did not run (the server's log says why); try again."
"""The error of a cancelled call's record (the caller, who cancelled, never sees a result)."""


async def dispatch(request: CallRequest, snapshot: Snapshot, toolset: ToolSet, services: Services) -> ToolResult:
    """Run one call through the whole pipeline and record it; never raises for a failed call. With a tracer
    provider, inside the call's `execute_tool` span (`toolrt.telemetry`)."""
    if tracer() is None:
        return await _dispatch(request, snapshot, toolset, services)
    with call_span(request.tool):
        return await _dispatch(request, snapshot, toolset, services)


async def _dispatch(request: CallRequest, snapshot: Snapshot, toolset: ToolSet, services: Services) -> ToolResult:
    started = time.perf_counter()
    services.call_counter += 1
    call_id = request.call_id or f"{services.call_prefix}{services.call_counter}"
    agent = request.scope.agent or snapshot.permissions.default_agent
    offered, args, repair_note = _to_run(request, toolset, snapshot)
    if offered is None:
        assert repair_note is not None
        result = ToolResult(title="Invalid Tool", output="", error=repair_note)
        duration = time.perf_counter() - started
        entry = CallRecord(request.scope, agent, request.tool, call_id, args, None, "invalid", result, duration)
        return _recorded_unrun(services, entry)
    try:
        state = services.session(request.scope.session)
    except StoreError as error:  # the store is away: nothing runs without its session state and record
        logger.error("the %s call did not run: the store cannot be read: %s", offered.name, error)
        result = ToolResult(title=offered.name, output="", error=STORE_AWAY)
        entry = CallRecord(request.scope, agent, offered.name, call_id, args, None, "error", result, 0.0)
        return _recorded_unrun(services, entry)
    call = ActiveCall(request, snapshot, toolset, services, call_id, agent, offered.name, offered.tool, state, set())
    if services.listeners:
        call.emit("running", {"input": args})
    decision: Decision | None = None
    requests: list[PermissionRequest] | None = None
    loop = _NO_LOOP
    status = "ok"
    try:
        args = parse_arguments(call.tool, args, snapshot.root)
        if repair_note is None:
            requests = await permission_requests_off_loop(call.tool, args, snapshot, agent)
            loop = _doom_loop(call, args, requests)
            decision = await _authorized(call, args, requests, loop is _LOOP_ASKS)
            call.granted.update((d.permission, d.pattern) for d in decision.decisions)
        # else: the call went to `invalid`, which only tells the model why it could not run and which
        # tools it has; no agent's rules may hide that text (a deny-all agent would read "invalid denied").
        result = truncate_result(call, await run_tool(call, args))
        if loop is _LOOP_WARNS:
            result = _with_loop_warning(result, call.name)
        if repair_note is not None:
            result = ToolResult(result.title, result.output, result.metadata, result.attachments, result.output)
            status = "invalid"
    except CallError as error:
        status = status_of(error)
        decision, result = _failed(call, args, error, requests, decision)
    except Exception as error:  # a failure nobody turned into a CallError: still a result, recorded, logged
        logger.exception("the %s call failed unexpectedly", call.name)
        status = "error"
        text = f"The {call.name} tool failed unexpectedly: {type(error).__name__}: {error}"
        result = ToolResult(title=_title(call, args), output="", error=text)
    except anyio.get_cancelled_exc_class():
        # The caller cancelled (an MCP client's cancel, a host's cancel scope): the run step has
        # stopped the tool (a process tree is killed), the call is recorded, and the cancellation goes on.
        _finish(call, args, decision, "cancelled", ToolResult(_title(call, args), "", error=CANCELLED), started)
        raise
    return _finish(call, args, decision, status, result, started)


_NO_LOOP = "no loop"
_LOOP_ASKS = "the doom loop is asked"
_LOOP_WARNS = "the doom loop is a warning on the result"


def _doom_loop(call: ActiveCall, args: Any, requests: list[PermissionRequest]) -> str:
    """Whether this call repeats the session's last ones (`doom_loop`): then its ask is added to
    `requests`, or in development (`doom_loop_warns`) the result gets a warning instead."""
    if not add_doom_loop(requests, call.name, args, call.state):
        return _NO_LOOP
    if not call.services.doom_loop_warns:
        return _LOOP_ASKS
    requests.pop()
    logger.warning(LOOP_WARNING.format(tool=call.name, times=DOOM_LOOP_THRESHOLD))
    return _LOOP_WARNS


def _failed(
    call: ActiveCall, args: Any, error: CallError, requests: list[PermissionRequest] | None, decision: Decision | None
) -> tuple[Decision | None, ToolResult]:
    """The decision to record and the result of a call that ended in a `CallError`."""
    state = call.state
    if isinstance(error, InputRequired) and requests is not None and state.recent:
        state.recent = state.recent[:-1]  # a round that waits for the client is not a call of its own; its retry is
    if decision is None and requests is not None and isinstance(error, PermissionBlocked):
        # The record names the rules that blocked the call; authorize raised before returning them.
        decision = call.rules_decide(requests)
    result = ToolResult(title=_title(call, args), output="", error=str(error))
    if isinstance(error, ProtocolError):  # the MCP server answers it as a JSON-RPC error
        protocol = {"code": error.code, "message": error.message, "data": error.data}
        result = replace(result, metadata=MappingProxyType({PROTOCOL_ERROR: protocol}))
    return decision, result


def _title(call: ActiveCall, args: Any) -> str:
    return call_title(call.tool, args, call.snapshot.root) or call.name


def _recorded_unrun(services: Services, entry: CallRecord) -> ToolResult:
    """The result of a call that never started (no such tool, a blocked config, no store), recorded."""
    result = _recorded(services, entry)
    _measured(entry)
    return result


def _to_run(request: CallRequest, toolset: ToolSet, snapshot: Snapshot) -> tuple[Offered | None, Any, str | None]:
    """`_repair`'s tool, unless nothing may run: a blocked config, a call the caller refused, a token
    without the tool's scopes (then None, with the reason)."""
    repaired = _repair(request, toolset, snapshot)
    note = request.refused
    if note is None and snapshot.blocked is not None:  # broken permissions or settings: every call says why
        note = blocked_message(snapshot.blocked)
    if note is None and repaired[0] is not None and request.scope.token_scopes is not None:
        note = _lacks_scopes(repaired[0], request.scope.token_scopes)
    if note is None:
        return repaired
    return None, repaired[1], note


async def _authorized(call: ActiveCall, args: Any, requests: list[PermissionRequest], doom_loop: bool) -> Decision:
    """`authorize`, inside a `permission` span naming the action and the deciding rule when traced."""
    if tracer() is None:
        return await authorize(call, args, requests, doom_loop)
    with span("permission", {"gen_ai.tool.name": call.name}) as traced:
        try:
            decision = await authorize(call, args, requests, doom_loop)
        except PermissionBlocked as error:
            _decided(traced, call.rules_decide(requests), "reject" if isinstance(error, RejectedError) else "deny")
            raise
        _decided(traced, decision, decision.action)
        return decision


def _decided(traced: Any, decision: Decision, action: str) -> None:
    traced.set_attribute("toolrt.permission.action", action)
    deciding = decision.action if action != "reject" else "ask"
    rule = next((d.rule for d in decision.decisions if d.action == deciding and d.rule is not None), None)
    if rule is not None:
        traced.set_attribute("toolrt.permission.rule", rule.describe())


def _with_loop_warning(result: ToolResult, name: str) -> ToolResult:
    note = f"\n\n<toolrt_metadata>\n{LOOP_WARNING.format(tool=name, times=DOOM_LOOP_THRESHOLD)}\n</toolrt_metadata>"
    if result.error is not None:
        return replace(result, error=result.error + note)
    return replace(result, output=result.output + note)


def _recorded(services: Services, entry: CallRecord, saving: SessionSave | None = None) -> ToolResult:
    """The call's result once its record is written (with `saving`, the session's state in the same
    write); an error result when a persistent store refused the record (fail closed: no result goes out
    without its audit record)."""
    try:
        if tracer() is None:
            services.recorder.record(entry, saving)
        else:
            with span("audit write"):
                services.recorder.record(entry, saving)
    except StoreError as error:
        logger.error("the %s call's audit record could not be stored: %s", entry.tool, error)
        return ToolResult(
            title=entry.result.title,
            output="",
            error="The call's audit record could not be stored, so its result is withheld (the server's log says why).",
        )
    return entry.result


def _finish(
    call: ActiveCall, args: Any, decision: Decision | None, status: str, result: ToolResult, started: float
) -> ToolResult:
    """Record the call and tell listeners how it ended; the result to return (see `_recorded`)."""
    services = call.services
    duration = time.perf_counter() - started
    keeper = services.keeper
    pending = keeper.pending(call.session, call.state) if keeper is not None else None
    entry = CallRecord(
        call.request.scope, call.agent, call.name, call.call_id, args, decision, status, result, duration
    )
    result = _recorded(services, entry, pending[:3] if pending is not None else None)
    if pending is not None and keeper is not None and result is entry.result:
        keeper.saved(call.session, pending[3], pending[2])
    _measured(entry)
    if services.listeners:
        ended = time.time()
        timing = {"result": result, "start": ended - duration, "end": ended}
        call.emit("completed" if result.error is None else "error", timing, ended)
    return result


def _measured(entry: CallRecord) -> None:
    """The call's duration metric, and its span's closing attributes (`toolrt.telemetry`)."""
    current = None
    if tracer() is not None:
        from opentelemetry.trace import get_current_span

        current = get_current_span()
    record_call(
        current,
        tool=entry.tool,
        call_id=entry.call_id,
        agent=entry.agent,
        principal=entry.scope.principal,
        status=entry.status,
        seconds=entry.duration,
    )


def _lacks_scopes(offered: Offered, held: frozenset[str]) -> str | None:
    """Why the caller's token may not call `offered` (it lacks one of the tool's `scopes:`), or None."""
    missing = [scope for scope in offered.tool.definition.scopes if scope not in held]
    if not missing:
        return None
    return f"The {offered.name} tool needs the OAuth scope {' '.join(missing)}, which the caller's token does not hold."


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
    withheld = unavailable(snapshot, request.tool)
    if withheld is not None:
        return None, request.args, withheld
    names = toolset.names()
    close = difflib.get_close_matches(request.tool, names, n=3, cutoff=0.5)
    ordered = close + [n for n in names if n not in close]
    available = ", ".join(ordered) if ordered else "none"
    if not request.tool.strip():
        note = f"Model called a tool without a name. Call one of the available tools by its name: {available}."
    else:
        note = f"Model tried to call unavailable tool '{request.tool}'. Available tools: {available}."
    invalid = snapshot.tools.get(INVALID_TOOL)
    return (Offered(INVALID_TOOL, invalid) if invalid else None), {"tool": request.tool, "error": note}, note
