"""The run step: a `cache: {ttl}` hit, else the handler of the tool's kind under its timeout."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable
from typing import Any

from ..config.model import ArgvHandler, ShellHandler
from ..result import ToolResult
from .active import ActiveCall
from .commands import run_command
from .handlers import run_handler

__all__ = ["MAX_CACHED_RESULTS", "run_tool"]

MAX_CACHED_RESULTS = 4096
"""Results kept by `cache: {ttl}` tools at once; past it expired entries go, then the oldest half."""


def run_tool(call: ActiveCall, args: dict[str, Any]) -> Awaitable[ToolResult]:
    """Run the call's handler, or return the cached result of an equal call still within its `ttl`."""
    tool = call.tool
    ttl = tool.definition.cache_ttl
    if ttl is None:
        return _run(call, args)
    return _cached(call, args, ttl)


async def _cached(call: ActiveCall, args: dict[str, Any], ttl: float) -> ToolResult:
    tool = call.tool
    key = (tool.id, json.dumps(args, sort_keys=True, default=str), call.snapshot.digest)
    cache = call.services.results
    hit = cache.get(key)
    now = time.monotonic()
    if hit is not None and hit[0] > now:
        return hit[1]
    result = await _run(call, args)
    if result.error is None:
        if len(cache) >= MAX_CACHED_RESULTS:
            for stale in [k for k, (expires, _) in cache.items() if expires <= now] or list(cache)[: len(cache) // 2]:
                del cache[stale]
        cache[key] = (now + ttl, result)
    return result


def _run(call: ActiveCall, args: dict[str, Any]) -> Awaitable[ToolResult]:
    """The handler's coroutine under its timeout (returned, not awaited here: one coroutine less per call)."""
    tool = call.tool
    timeout = tool.definition.timeout or call.snapshot.resolved.values.timeout
    if isinstance(tool.definition.handler, (ArgvHandler, ShellHandler)):
        return run_command(call, args, timeout)
    return run_handler(call, args, timeout)
