"""One audited pipeline for every call: repair → arguments → permission → execute → truncate → record.

Read top-down: `dispatch()` is the whole story. Each step lives in a module of its own, in the order
the data flows: `arguments`, `call_permissions`, `handlers` / `commands`, `truncate`, `records`. A call
runs entirely against the snapshot it started with. Failures the model should read are `CallError`s
and come back as results with `error` set; anything else is a bug and propagates.
"""

from __future__ import annotations

import difflib
import json
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .arguments import parse_arguments
from .call_permissions import add_doom_loop, authorize, permission_requests
from .calls import ActiveCall, CallEvent, CallRequest, Services, call_title
from .commands import run_command
from .compiled import CompiledTool
from .config.model import ArgvHandler, ShellHandler
from .errors import CallError, PermissionBlocked
from .handlers import run_handler
from .permissions.evaluate import decide
from .permissions.model import Decision, PermissionRequest
from .records import record_call, status_of
from .result import ToolResult
from .selection import Offered, ToolSet
from .snapshot import Snapshot
from .truncate import cleanup_outputs, truncate_output

__all__ = ["dispatch"]

INVALID_TOOL = "invalid"
MAX_CACHED_RESULTS = 4096
"""Results kept by `cache: {ttl}` tools at once; past it expired entries go, then the oldest half."""


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
        record_call(
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
        args = parse_arguments(tool, args)
        requests = permission_requests(tool, args, snapshot)
        doom_loop = repair_note is None and add_doom_loop(
            requests, offered.name, args, services.session(request.session)
        )
        decision = await authorize(
            tool, offered.name, args, requests, request, snapshot, services, agent, call_id, doom_loop
        )
        call = ActiveCall(request, snapshot, toolset, services, call_id, agent, tool.id)
        call.granted.update((d.permission, d.pattern) for d in decision.decisions)
        result = await _execute_cached(tool, args, call)
        result = _truncate(tool, result, snapshot, agent)
        if repair_note is not None:
            result = ToolResult(result.title, result.output, result.metadata, result.attachments, result.output)
            status = "invalid"
    except CallError as error:
        status = status_of(error)
        if decision is None and requests is not None and isinstance(error, PermissionBlocked):
            # The record names the rules that blocked the call; authorize raised before returning them.
            decision = decide(
                requests,
                snapshot.permissions.ruleset(agent),
                locked=snapshot.permissions.locked,
                approved=services.broker.approved(request.session),
            )
        result = ToolResult(title=call_title(tool, args, snapshot.root) or offered.name, output="", error=str(error))
    duration = time.perf_counter() - started
    record_call(services.audit, request, call_id, agent, offered.name, args, decision, duration, status, result)
    if services.listeners:
        kind = "completed" if result.error is None else "error"
        ended = time.time()
        timing = {"result": result, "start": ended - duration, "end": ended}
        services.emit(CallEvent(kind, call_id, offered.name, request.session, timing, ended))
    return result


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


# --- execute -------------------------------------------------------------------------------------


async def _execute_cached(tool: CompiledTool, args: dict[str, Any], call: ActiveCall) -> ToolResult:
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
        if len(cache) >= MAX_CACHED_RESULTS:
            for stale in [k for k, (expires, _) in cache.items() if expires <= now] or list(cache)[: len(cache) // 2]:
                del cache[stale]
        cache[key] = (now + ttl, result)
    return result


async def _execute(tool: CompiledTool, args: dict[str, Any], call: ActiveCall) -> ToolResult:
    timeout = tool.definition.timeout or call.snapshot.settings.timeout
    if isinstance(tool.definition.handler, (ArgvHandler, ShellHandler)):
        return await run_command(tool, args, call, timeout)
    return await run_handler(tool, args, call, timeout)


# --- truncate ------------------------------------------------------------------------------------


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
