"""`toolrt serve`: the current snapshot's tools as an MCP server (official `mcp` SDK, low-level server).

- `tools/list`: the selection's MCP specs (name, title, description, inputSchema, annotations),
  compiled once per snapshot and answered from that cache; pages only above `--page-size`; the SDK
  reads a call's input schema from the same cache (`get_tool_input_schema`), never by listing;
- `tools/call`: `rt.call` (permissions, truncation and the audit log apply); a failed call is a result
  with `isError: true`; an unknown tool or malformed params are JSON-RPC errors;
- `notifications/tools/list_changed` after every swap (the `listChanged` capability is advertised):
  on the connection's standalone channel for handshake-era clients, through `subscriptions/listen`
  for 2026-07-28 clients;
- progress: a call's live metadata becomes `notifications/progress` when the client sent a token;
- cancellation: the SDK cancels the request's handler (`notifications/cancelled`, or on 2026-07-28 a
  closed response stream); the cancellation runs into the call, which stops the tool (process tree
  killed) and records it as cancelled;
- sessions: `serve_sessions` (one toolrt session per MCP session, tokens on the sessionless protocol);
- ask: an elicitation form when the client declared elicitation (`elicitation/create` on handshake-era
  versions, an input-required result with a sealed `requestState` on 2026-07-28, `serve_client`), else
  no asker (the runtime denies with a message saying approval was required); the `question` tool's
  questions go the same way;
- the handler's client (`ctx.client`, `ctx.log`, `ctx.progress`, `ctx.elicit`, `ctx.sample`, `ctx.roots`,
  `ctx.ask_client`): `serve_client.McpChannel`; a `ProtocolError` is a JSON-RPC error;
- input schemas as written, or inlined for clients that drop `$defs` (`serve.inline_refs`).

This module runs the server (`run_serve`) from the `serve_*` modules, one concern each: the server and its
handlers' registration (`serve_server`), the handlers (`serve_face`), the listing (`serve_listing`), asking
the person (`serve_ask`), a call's notifications (`serve_notes`) and result (`serve_wire`), what every
client is told unasked (`serve_notify`), the transports (`serve_transport`), the heap (`serve_heap`).
The `mcp` SDK is imported by those modules only, and they only by `toolrt serve`. A Reloader runs
alongside, so edits to the YAML reach connected clients as they are saved.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from ..api import Runtime
from ..config.collect import pause_collector_during_builds
from ..errors import UsageError
from ..reload import Reloader
from ..scope import CallScope
from ..telemetry import observe
from .serve_face import McpFace
from .serve_health import Health
from .serve_heap import settle_heap
from .serve_limits import ServeLimits
from .serve_server import build_server
from .serve_skills import watch_skills
from .serve_transport import (
    TRANSPORTS,
    endpoint,
    http_app,
    listen_on,
    refuse_unauthenticated,
    serve_http,
    serve_stdio,
)

__all__ = [
    "McpFace",
    "ServeLimits",
    "build_server",
    "http_app",
    "refuse_unauthenticated",
    "run_serve",
    "settle_heap",
]


def run_serve(
    rt: Runtime,
    *,
    transport: str,
    host: str,
    port: int,
    scope: CallScope,
    limits: ServeLimits | None = None,
    offer_unaskable: bool = False,
) -> int:
    """Serve `rt` over stdio or streamable HTTP until the client disconnects (stdio) or Ctrl-C.

    Raises:
        UsageError: unknown transport, or an agent the config does not define.
    """
    if transport not in TRANSPORTS:
        raise UsageError(f"unknown transport {transport!r}; expected one of: {', '.join(TRANSPORTS)}")
    if scope.agent is not None:
        rt.snapshot.permissions.ruleset(scope.agent)
    if scope.toolset is not None:
        rt.tools(scope)  # an unknown tool set is a usage error before the client connects
    auth = rt.settings.values.auth
    if transport == "http":
        refuse_unauthenticated(host, auth)
    listener = listen_on(host, port) if transport == "http" else None
    paused_before = pause_collector_during_builds()  # a server's reloads build with the collector paused

    async def main() -> None:
        server, face = build_server(rt, scope, limits, offer_unaskable=offer_unaskable)
        notice = face.unasked_notice()
        if notice is not None:
            print(notice, file=sys.stderr, flush=True)
        unsubscribe = rt.subscribe(face.swap_listener(), to="swaps")
        observe(lambda: len(rt.sessions), lambda: rt.status().generation)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(face.notify_changes)
                group.start_soon(face.settle_when_idle)
                reloader = Reloader(rt)
                reloader.subscribe(face.reload_listener())
                group.start_soon(reloader.run)
                group.start_soon(watch_skills, rt.root, Path.home(), face.announce_skills_changed)
                if transport == "stdio":
                    await serve_stdio(server)
                else:
                    assert listener is not None
                    health = Health(rt, endpoint(host, listener))
                    group.start_soon(health.report)
                    await serve_http(server, face, host, listener, limits or ServeLimits(), auth, health)
                group.cancel_scope.cancel()
        finally:
            unsubscribe()
            face.close()
            gc.unfreeze()

    detach = _log_language_servers()
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        return 0
    finally:
        rt.close()  # no language server outlives the server
        detach()
        pause_collector_during_builds(paused_before)
    return 0


def _log_language_servers() -> Callable[[], None]:
    """Language servers starting, crashing and restarting (the `toolrt.lsp` logger), and each reload's
    failure and fix (`toolrt.reload`, once per distinct failure), on stderr."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("toolrt serve: %(message)s"))
    detached = []
    for name in ("toolrt.lsp", "toolrt.reload"):
        named = logging.getLogger(name)
        named.addHandler(handler)
        propagate, named.propagate = named.propagate, False
        if named.level == logging.NOTSET or named.level > logging.INFO:
            named.setLevel(logging.INFO)
        detached.append((named, propagate))

    def detach() -> None:
        for named, propagate in detached:
            named.removeHandler(handler)
            named.propagate = propagate

    return detach
