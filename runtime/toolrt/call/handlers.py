"""Running Python handlers (`python:` in the YAML, or `host:` ones the embedding application supplies).

A handler returns text or OpenCode's result mapping; anything else, an exception, or a hang past the
timeout becomes a clean error result for the model, and the runtime keeps serving.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio

from ..build.compiled import CompiledTool, import_ref, project_root_of
from ..build.handler_code import IMPORT_LOCK
from ..config.model import HostHandler, PythonHandler
from ..errors import CallError, ToolFailure
from ..result import ToolResult
from .active import ActiveCall
from .context import ToolContext
from .deadline import stop_in_time
from .state import Runnable, Services
from .titles import call_title

__all__ = ["run_handler"]

_NO_METADATA: Mapping[str, Any] = MappingProxyType({})
"""The metadata of a result whose handler returned text (one read-only empty mapping for them all)."""


async def run_handler(call: ActiveCall, args: dict[str, Any], timeout: float) -> ToolResult:
    """Run a `python:` or `host:` handler under the timeout; its return value becomes a ToolResult.

    Sync `python:` handlers run in a worker thread unless the YAML says `blocking: false`; sync `host:`
    handlers run inline. The timeout (see `deadline`) covers whatever can suspend: every coroutine
    function (stopped too when the caller's `abort` is set), a worker thread's handler, and an
    awaitable an inline sync handler returns; the call of an inline sync handler itself no deadline
    could stop.
    """
    tool = call.tool
    handler = tool.definition.handler
    function, is_async = _resolve_handler(tool, call.services, call.snapshot.root)
    ctx = ToolContext(call)
    try:
        if is_async:
            outcome = await stop_in_time(function(args, ctx), timeout, tool.id, call.request.abort)
        elif not (isinstance(handler, PythonHandler) and handler.blocking):
            outcome = function(args, ctx)
            if inspect.isawaitable(outcome):
                outcome = await stop_in_time(outcome, timeout, tool.id, None)
        else:
            outcome = await stop_in_time(_in_thread(function, args, ctx), timeout, tool.id, None)
    except CallError:
        raise
    except Exception as exc:  # the handler's bug must not take the runtime down; the model gets the gist
        raise ToolFailure(f"The {tool.id} tool failed: {type(exc).__name__}: {exc}") from exc
    return _normalize(tool, args, outcome, ctx, call.snapshot.root)


def _runnable(function: Callable[..., Any]) -> Runnable:
    return Runnable(function, inspect.iscoroutinefunction(function))


def _resolve_handler(tool: CompiledTool, services: Services, root: Path) -> Runnable:
    """The tool's handler: the host's, or the Python function imported (and read) once per Runtime."""
    handler = tool.definition.handler
    handlers = services.handlers
    if isinstance(handler, HostHandler):
        function = services.host_handlers.get(handler.name)
        if function is None:
            raise ToolFailure(
                f"The {tool.id} tool is not available: the host application has not registered a handler for it."
            )
        found = services.host_runnables.get(handler.name)
        if found is None or found.function is not function:  # registered again since: read the new one
            found = services.host_runnables[handler.name] = _runnable(function)
        return found
    assert isinstance(handler, PythonHandler)
    found = handlers.get(handler.ref)
    if found is None:
        try:
            with IMPORT_LOCK:  # not halfway through a reload's import of the project's code
                function = import_ref(handler.ref, project_root_of(tool.definition, root))
        except ImportError as exc:
            raise ToolFailure(f"The {tool.id} tool is misconfigured: {exc}") from None
        found = handlers[handler.ref] = _runnable(function)
    return found


async def _in_thread(function: Callable[..., Any], args: dict[str, Any], ctx: ToolContext) -> Any:
    try:
        return await anyio.to_thread.run_sync(function, args, ctx, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        ctx.abort.set()  # the worker thread cannot be cancelled: its handler watches `ctx.abort`
        raise


def _normalize(tool: CompiledTool, args: Mapping[str, Any], outcome: Any, ctx: ToolContext, root: Path) -> ToolResult:
    """A handler's return value as a ToolResult; anything but text or OpenCode's mapping is an error
    (with an `output:` schema: the data itself, see `_structured`)."""
    title = call_title(tool, args, root)
    if tool.output_validator is not None:
        return _structured(tool, outcome, title or ctx.title or "")
    if isinstance(outcome, str):
        return ToolResult(title or ctx.title or "", _clean(outcome), _NO_METADATA)
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


def _structured(tool: CompiledTool, outcome: Any, title: str) -> ToolResult:
    """The data a handler with an `output:` schema returned: validated, kept as `structured`, and its JSON
    as the text every provider reads. A ToolResult passes through (a handler may set `structured` itself)."""
    if isinstance(outcome, ToolResult):
        data: Any = outcome.structured
        if data is None:
            return outcome
    else:
        data = outcome
    if not isinstance(data, Mapping):
        raise ToolFailure(
            f"The {tool.id} tool's handler returned {type(data).__name__}; a tool with an output schema returns "
            "its data as a mapping (a JSON object)."
        )
    try:
        plain = json.loads(json.dumps(data, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise ToolFailure(f"The {tool.id} tool's handler returned data that is not JSON: {error}") from None
    errors = list(tool.output_validator.iter_errors(plain))
    if errors:
        said = [
            f"{'/' + '/'.join(str(p) for p in error.instance_path) if error.instance_path else 'the root'}: "
            f"{error.message}"
            for error in errors[:3]
        ]
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise ToolFailure(
            f"The {tool.id} tool's handler returned data that does not match its output schema: "
            f"{'; '.join(said)}{more}."
        )
    text = json.dumps(plain, ensure_ascii=False, indent=2)
    if isinstance(outcome, ToolResult):
        return replace(outcome, output=text, structured=MappingProxyType(plain))
    return ToolResult(title=title, output=text, structured=MappingProxyType(plain))


def _clean(text: str) -> str:
    """Text safe to encode: lone surrogates (undecodable bytes) become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
