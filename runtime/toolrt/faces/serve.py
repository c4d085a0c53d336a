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

The `mcp` SDK is imported by this module only, and this module only by `toolrt serve`. A Reloader
runs alongside, so edits to the YAML reach connected clients as they are saved.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args
from urllib.parse import quote

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourcesListChanged, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..api import Runtime, SnapshotChange
from ..build.selection import ToolSet
from ..build.snapshot import degraded_lines
from ..call.client import ClientRequest
from ..call.events import CallEvent
from ..call.pipeline import PROTOCOL_ERROR
from ..call.sessions import DEFAULT_IDLE_SECONDS, DEFAULT_MAX_SESSIONS
from ..config.collect import pause_collector_during_builds
from ..config.model import ToolDefinition
from ..config.settings import HOST_ONLY, AuthSettings
from ..errors import UsageError
from ..permissions.ask import AskRequest, Reply
from ..permissions.principals import agent_for
from ..permissions.shown import ask_lines, escape_controls
from ..reload import Reloader, ReloadEvent
from ..result import ToolResult
from ..scope import CallScope
from ..store.model import session_id
from ..telemetry import enrich_request_span, observe, tracer
from .serve_client import NONCE_FILE, ClientNote, McpChannel, NonceLedger, ReplayState, StoreNonces, state_security
from .serve_health import Health
from .serve_idempotency import CallClaims
from .serve_loopback import loopback_only
from .serve_principal import current_caller, refusal
from .serve_sessions import SESSION_META_KEY, McpSessions, OnExit, connection_of
from .serve_skills import EXTENSION, GetSkillParams, ReadDirectoryParams, SkillsFace, watch_skills
from .serve_tasks import McpTasks, MemoryTaskStore, TaskRecord, TaskStart
from .serve_tasks import register as serve_tasks

__all__ = ["McpFace", "ServeLimits", "build_server", "http_app", "run_serve", "settle_heap"]

TRANSPORTS = ("stdio", "http")
DEFAULT_PAGE_SIZE = 10_000
"""`tools/list` pages only above this many tools: several clients never follow `nextCursor`."""
SETTLE_IDLE_SECONDS = 0.5
"""After a swap, the heap is settled (`settle_heap`) once no request has started for this long: a full
collection takes tens of milliseconds, which would otherwise delay the `list_changed` notification and
the `tools/list` the client sends on it."""
SETTLE_LATEST_SECONDS = 10.0
"""A server that never goes quiet settles this long after a swap all the same (the swapped-out snapshot's
cycles are frozen until a settle)."""

_LIST_RESULT: dict[str, Any] = types.ListToolsResult(tools=[]).model_dump(by_alias=True, mode="json", exclude_none=True)
"""The fields of a `tools/list` result besides its tools (the SDK shapes them for each protocol version)."""

_DECISIONS = ("once", "always", "reject")
_TRUST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve this change and load it"}},
    "required": ["approve"],
}

_ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Allow this tool call?",
            "enum": list(_DECISIONS),
            "enumNames": ["Allow once", "Always allow (this session)", "Reject"],
        },
        "feedback": {"type": "string", "title": "Feedback for the model (when rejecting)"},
    },
    "required": ["decision"],
}

Ctx = ServerRequestContext[Any, Any]
_CallResult = types.CallToolResult | types.InputRequiredResult


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """How much one `toolrt serve` process holds and hands out at once."""

    page_size: int = DEFAULT_PAGE_SIZE
    """Tools per `tools/list` page; a listing this long or shorter is one page without a cursor."""
    session_idle: float | None = DEFAULT_IDLE_SECONDS
    """Seconds after which an unused session (MCP session or token) is released; None: never."""
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """Sessions held at once; past it the most idle one is released (over HTTP its MCP session too, whose
    requests then answer 404)."""

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise UsageError(f"--page-size must be at least 1, not {self.page_size}")
        if self.session_idle is not None and not self.session_idle > 0:
            raise UsageError(f"--session-idle must be a positive number of seconds, not {self.session_idle:g}")
        if self.max_sessions < 1:
            raise UsageError(f"--max-sessions must be at least 1, not {self.max_sessions}")


def _page_start(cursor: str | None, total: int) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or int(cursor) > total:
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r} (list the tools again from the start)")
    return int(cursor)


class _LoopBridge:
    """Runs a callback on the event loop thread, from it or from a worker thread.

    Swap listeners run in the Reloader's worker thread, and a blocking handler's live metadata
    arrives from its worker thread; MCP sends must happen on the loop.
    """

    def __init__(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()

    def call(self, function: Callable[[], None]) -> None:
        if threading.get_ident() == self._thread:
            function()
        else:
            anyio.from_thread.run_sync(function, token=self._token)


class McpFace:
    """The handlers of the MCP server over one Runtime; one instance serves every connection."""

    def __init__(
        self, rt: Runtime, scope: CallScope, limits: ServeLimits | None = None, *, offer_unaskable: bool = False
    ) -> None:
        self._rt = rt
        self._offer_unaskable = offer_unaskable
        """Offer clients that cannot be asked the tools whose every call asks (`--offer-unaskable`)."""
        self._scope = scope
        """Who the served tools are for (the `toolrt serve` selection options); each call adds its session."""
        self._limits = limits = limits or ServeLimits()
        rt.sessions.limit(idle_seconds=limits.session_idle, max_sessions=limits.max_sessions)
        self._listed: dict[tuple[bool, bool, str | None], _Listing] = {}
        """The listing in wire form by (whether tools that only ask are left out, whether references are
        inlined, the caller's agent), with the selection it was built from."""
        self._last_request = 0.0
        """When the last `tools/list` or `tools/call` started (`time.monotonic`): heap settling waits for quiet."""
        self._unsettled: anyio.Event | None = None
        """Set when a swap left a heap to settle (made by `settle_when_idle`, which waits on it)."""
        self._connections: dict[Connection, _Listener] = {}
        self._last_notice: str | None = None
        """Handshake-era connections (after `notifications/initialized`) and what they were told."""
        self._subscribers: set[_Subscriber] = set()
        """2026-07-28 subscriptions whose `_meta` named a log level."""
        self._start_problems: list[str] = []
        """Handler code that did not import when the reloader started, until a save fixes it."""
        self._told_sessions: dict[str, tuple[str | None, str | None]] = {}
        """2026-07-28 sessions: the problems and notice their calls were last told."""

        self._mcp_sessions = McpSessions(
            rt.sessions, rt.knows_session, shared=rt.store.persistent, begin=rt.begin_session
        )
        self._bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._bus)
        self._ids = itertools.count(1)
        store = rt.store
        self._nonces = StoreNonces(store) if store.persistent else NonceLedger(rt.snapshot.data_dir / NONCE_FILE)
        self._claims = CallClaims(store)
        """Calls recorded as started before they run, so that a retry never runs one twice."""
        """The nonces of 2026-07-28 request states whose retry was accepted (a state is used once)."""
        self._changes_send, self._changes_receive = anyio.create_memory_object_stream[SnapshotChange | _LogEntry](64)
        self._not_approved: set[tuple[str, str]] = set()
        """(file, digest) of held changes the person was shown and did not approve: not asked again."""
        self._tasks = McpTasks(
            MemoryTaskStore(), rt.sessions, lambda ctx, session: self._mcp_sessions.owns(ctx, session)
        )
        """The calls running as MCP tasks, and their records (`serve_tasks`)."""
        self.skills = SkillsFace(
            rt,
            self._request_scope,
            session_of=lambda ctx: self._mcp_sessions.identify(ctx)[0],
            can_ask=self._can_ask,
            load=self._load_skill,
            offer_unaskable=offer_unaskable,
        )
        """The skills extension (`serve_skills`)."""

    def close(self) -> None:
        """Close the queue of reload notices (`notify_changes` ends; later swaps are dropped) and cancel
        the tasks still running."""
        self._tasks.close()
        self._changes_send.close()
        self._changes_receive.close()

    @property
    def bus(self) -> InMemorySubscriptionBus:
        return self._bus

    @property
    def tasks(self) -> McpTasks:
        return self._tasks

    # --- who is calling ---------------------------------------------------------------------------

    def _request_scope(self) -> CallScope:
        """The scope of the request being handled: the served one, or over authenticated HTTP the caller's
        agent (the locked file's `principals:`) and principal (`serve_principal`).

        Raises `MCPError` for a caller no `principals:` entry matches (the HTTP layer refuses those
        first; a reload may have changed the entries since)."""
        caller = current_caller()
        if caller is None:
            return self._scope
        rules = self._rt.snapshot.permissions.principals
        agent = self._scope.agent
        if rules is not None:  # without `principals:` every caller acts as the served agent
            agent = agent_for(rules, caller.claims)
            if agent is None:
                raise MCPError(
                    types.INVALID_REQUEST, "No agent is mapped to this caller (the locked file's principals)"
                )
        return replace(self._scope, agent=agent, principal=caller.principal, token_scopes=caller.scopes)

    def served_tools(self) -> list[ToolDefinition]:
        """The current snapshot's tool definitions."""
        return [tool.definition for tool in self._rt.snapshot.tools.values()]

    def scopes_of(self, name: str) -> tuple[str, ...]:
        """The OAuth scopes a caller needs for tool `name` (its YAML `scopes:`); () for an unknown tool."""
        tool = self._rt.snapshot.tools.get(name)
        return () if tool is None else tool.definition.scopes

    def refusal(self, claims: Mapping[str, Any]) -> str | None:
        """Why a verified token may not call at all (no `principals:` entry matches), or None."""
        return refusal(self._rt.snapshot.permissions, claims)

    # --- tools/list -------------------------------------------------------------------------------

    def _toolset(self, scope: CallScope | None = None) -> ToolSet:
        """The served selection of the current snapshot (cached by the Runtime until the next swap)."""
        return self._rt.tools(scope or self._request_scope())

    def _listing(self, ctx: Ctx) -> tuple[dict[str, Any], ...]:
        """The served tools as MCP `Tool`s in wire form, built once per snapshot, selection and kind of
        client (a request copies none of it; a reload validates again only the tools it changed): a client
        that cannot be asked is not offered the tools whose every call asks (`build.unaskable`), and a
        client that drops `$defs` gets schemas with references inlined (`serve.inline_refs`)."""
        scope = self._request_scope()
        toolset = self._toolset(scope)
        hide = not self._offer_unaskable and not self._can_ask(ctx)
        inline = self._inlines(ctx)
        cached = self._listed.get((hide, inline, scope.agent))
        if cached is None or cached.toolset is not toolset:
            shown = toolset
            if hide:
                from ..build.unaskable import without_unaskable

                shown = without_unaskable(toolset, self._rt.snapshot, scope.agent)
            specs = shown.specs("mcp-inline" if inline else "mcp")
            cached = self._listed[(hide, inline, scope.agent)] = _Listing.build(toolset, specs, cached)
        return cached.tools

    def _inlines(self, ctx: Ctx) -> bool:
        """Whether this client gets every `$ref` inlined: `serve.inline_refs` is `always`, or `auto` and the
        client's `clientInfo.name` is one known to drop `$defs` (`specs.mcp.DROPS_DEFS`)."""
        setting = self._rt.settings.values.serve.inline_refs
        if setting != "auto":
            return setting == "always"
        from ..specs.mcp import drops_defs

        params = ctx.session.client_params
        return params is not None and drops_defs(params.client_info.name)

    async def list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        """`tools/list`: the cached listing (`_listing`), paged above `--page-size`."""
        self._last_request = time.monotonic()
        tools = self._listing(ctx)
        size = self._limits.page_size
        if len(tools) <= size and (params is None or params.cursor is None):
            return {**_LIST_RESULT, "tools": list(tools)}
        start = _page_start(params.cursor if params is not None else None, len(tools))
        end = start + size
        next_cursor = {"nextCursor": str(end)} if end < len(tools) else {}
        return {**_LIST_RESULT, **next_cursor, "tools": list(tools[start:end])}

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The SDK's `get_tool_input_schema` hook: one tool's schema from the cached specs, no listing."""
        spec = self._toolset().spec(name, "mcp")
        return None if spec is None else spec["inputSchema"]

    # --- tools/call -------------------------------------------------------------------------------

    def _session_and_replay(self, ctx: Ctx) -> tuple[str, str | None, ReplayState | None]:
        """The request's toolrt session (and its token), and on 2026-07-28 its replay state: a new one, or
        the one its `requestState` carries with the client's `inputResponses` (verified and opened by
        the RequestStateBoundary). Raises `MCPError` for a state that is not this session's or was used."""
        raw: Mapping[str, Any] = ctx.params or {}
        plaintext = raw.get("requestState")
        session, token = self._mcp_sessions.identify(ctx, ReplayState.owner(plaintext) if plaintext else None)
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return session, token, None
        if plaintext is None:
            return session, token, ReplayState(session)
        responses = raw.get("inputResponses")
        replay = ReplayState.resume(
            plaintext, session, responses if isinstance(responses, Mapping) else {}, self._nonces
        )
        return session, token, replay

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        self._last_request = time.monotonic()
        await self._review_held(ctx)
        scope = self._request_scope()
        if params.name not in self._toolset(scope):
            withheld = self._rt.snapshot.withheld.get(params.name)
            if withheld:  # a tool whose file is broken: say why, as a result the model can read
                listed = "; ".join(str(problem) for problem in withheld)
                text = f"The {params.name} tool is unavailable until its definition is fixed: {listed}"
                return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        session, token, replay = self._session_and_replay(ctx)
        if tracer() is not None:  # the SDK's server span of this request names the session (an id) and caller
            enrich_request_span(session_id(session), scope.principal, scope.agent)
        claim = CallClaims.key(ctx.meta or {})
        if claim is not None:
            retry = self._claims.claim(
                session, claim, CallClaims.fingerprint(params.name, params.arguments), _token_meta(token)
            )
            if retry is not None:
                if retry.error is not None:
                    raise MCPError(int(retry.error["code"]), str(retry.error["message"]), retry.error.get("data"))
                kept = retry.wire or {}
                return kept if kept.get("resultType") == "task" else types.CallToolResult.model_validate(kept)
        try:
            wire = await self._run_call(ctx, params, scope, session, token, replay)
        except MCPError as error:
            if claim is not None:
                fault = {"code": error.error.code, "message": error.error.message, "data": error.error.data}
                self._claims.finish(session, claim, {"protocolError": fault})
            raise
        # A cancelled call leaves its key started: it may have run part of the way, and is not run again.
        if claim is not None:
            # A call waiting for the client's input releases its key: its retry, with the answers, runs it.
            result = None if isinstance(wire, types.InputRequiredResult) else _wire(wire)
            self._claims.finish(session, claim, result)
        return wire

    async def _run_call(
        self,
        ctx: Ctx,
        params: types.CallToolRequestParams,
        scope: CallScope,
        session: str,
        token: str | None,
        replay: ReplayState | None,
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        await self._log_on_call(ctx, session)
        call_id = f"mcp_{ctx.request_id}_{next(self._ids)}"
        notes = _Notes(ctx, _wants_progress(ctx))
        channel = McpChannel(ctx, notes.post, replay, self._log_allowed(ctx), params.name)
        task = channel.task = self._task_start(ctx, session, params.name)
        # A client's cancel (notifications/cancelled, or a closed response stream on 2026-07-28) cancels
        # this handler: the cancellation runs into the call, whose run step kills a process tree (or sets
        # a worker thread's abort event) and whose record says "cancelled". No task group per call: the
        # notifications' sender starts with the first one.
        call = self._rt.call(
            params.name,
            dict(params.arguments or {}),
            scope,
            session=session,
            ask=self._asker(ctx, channel),
            questioner=self._questioner(ctx, channel),
            call_id=call_id,
            channel=channel,
        )
        unsubscribe = self._rt.subscribe(notes.metadata_listener(call_id)) if notes.wants_progress else None
        try:
            if task is None:
                result = await call
            else:
                outcome = await task.run(call, lambda done: _task_result(done, token))
                if isinstance(outcome, TaskRecord):  # the call goes on as a task
                    return {"resultType": "task", **outcome.wire(detailed=False), **_token_meta(token)}
                result = outcome
            await notes.finish()
        finally:
            notes.cancel()
            if unsubscribe is not None:
                unsubscribe()
        if replay is not None and replay.needed:
            return replay.input_required({SESSION_META_KEY: token} if token is not None else None)
        protocol = result.metadata.get(PROTOCOL_ERROR)
        if isinstance(protocol, Mapping):
            raise MCPError(int(protocol["code"]), str(protocol["message"]), protocol.get("data"))
        return _to_mcp(result, token)

    def _task_start(self, ctx: Ctx, session: str, name: str) -> TaskStart | None:
        """How this call may become an MCP task (`serve_tasks`): at once for a tool whose YAML says `task:`
        or that `serve.task_tools` names, else when its handler asks; None when the client cannot hold one."""
        tool = self._rt.snapshot.tools.get(name)
        if tool is None:
            return None
        definition = tool.definition
        mode = definition.task
        if mode == "never" and name in self._rt.settings.values.serve.task_tools:
            mode = "optional"
        timeout = definition.timeout or self._rt.snapshot.resolved.values.timeout
        return self._tasks.start(ctx, session, name, timeout, mode)

    def _log_allowed(self, ctx: Ctx) -> Callable[[str], bool]:
        """Whether a handler's log message at a level reaches this client: at or above the level its
        request's `_meta` names (2026-07-28; none named, none sent), or the connection's
        `logging/setLevel` (`warning` until set)."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            requested = _requested_level(ctx)
            return lambda level: requested is not None and _at_least(level, requested)
        listener = self._listener(ctx)
        return lambda level: _at_least(level, listener.level)

    def _can_ask(self, ctx: Ctx) -> bool:
        """Whether toolrt can ask this client's person: it declared elicitation, and the request can carry
        a request to it (a server request on handshake-era versions, an input-required result on 2026-07-28)."""
        capabilities = ctx.session.client_capabilities
        if capabilities is None or capabilities.elicitation is None:
            return False
        return ctx.session.can_send_request or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    def _asker(self, ctx: Ctx, channel: McpChannel) -> Callable[[AskRequest], Any] | None:
        """How to ask this client's person: an elicitation form (`elicitation/create` on handshake-era
        versions, an input-required result on 2026-07-28) showing what "always" would keep; None when
        toolrt cannot ask it (no elicitation declared). `tools/list` leaves out the tools that only ask
        for such a client."""
        if not self._can_ask(ctx):
            return None
        asked = itertools.count(1)

        async def ask(request: AskRequest) -> Reply:
            key = f"toolrt_approval_{next(asked)}"
            form = ClientRequest(
                "elicitation/create", {"mode": "form", "message": _ask_text(request), "requestedSchema": _ASK_SCHEMA}
            )
            answer = (await channel.request({key: form})).get(key) or {}
            content = answer.get("content") or {}
            decision = content.get("decision")
            if answer.get("action") != "accept" or decision not in _DECISIONS:
                return Reply("reject")
            feedback = content.get("feedback")
            if decision == "reject":
                return Reply("reject", feedback if isinstance(feedback, str) and feedback.strip() else None)
            return Reply("once" if decision == "once" else "always")

        return ask

    async def _load_skill(self, ctx: Ctx, name: str) -> types.InputRequiredResult | None:
        """A skill file read at ask (`serve_skills`): a call of the `skill` tool in the request's session,
        whose ask goes to the person as a tool call's does (`elicitation/create`; on 2026-07-28 an
        input-required result with the sealed state, the read's retry resuming it). Raises `MCPError`
        (-32602) when the call is refused."""
        session, token, replay = self._session_and_replay(ctx)
        channel = McpChannel(ctx, None, replay, self._log_allowed(ctx), "skill")
        result = await self._rt.call(
            "skill",
            {"name": name},
            self._request_scope(),
            session=session,
            ask=self._asker(ctx, channel),
            call_id=f"mcp_{ctx.request_id}_{next(self._ids)}",
            channel=channel,
        )
        if replay is not None and replay.needed:
            return replay.input_required({SESSION_META_KEY: token} if token is not None else None)
        if result.error is not None:
            raise MCPError(types.INVALID_PARAMS, result.error)
        return None

    async def announce_skills_changed(self) -> None:
        """A skill was added, changed or removed: `notifications/resources/list_changed` to every
        handshake-era connection, and through `subscriptions/listen` to 2026-07-28 clients."""
        await self._bus.publish(ResourcesListChanged())
        for listener in tuple(self._connections.values()):
            try:
                await listener.connection.send_resource_list_changed()
            except Exception:  # the client went away; stop telling it
                self._connections.pop(listener.connection, None)

    async def _review_held(self, ctx: Ctx) -> None:
        """Before a call, when the config holds changes the model made (`toolrt.attribution`) and the client
        can put a form to the person: each change, with its diff, once; an approved one loads now."""
        if not self._rt.snapshot.held or not self._can_ask(ctx) or not ctx.session.can_send_request:
            return  # 2026-07-28 (no server requests): `toolrt trust` approves them
        from .trust import change_text

        for hold in await anyio.to_thread.run_sync(self._rt.held):
            if (str(hold.path), hold.digest) in self._not_approved:
                continue
            text = escape_controls(
                "The model changed this config, which is not loaded until you approve it:\n"
                + change_text(self._rt, hold),
                keep_newlines=True,
            )
            result = await ctx.session.elicit_form(text, _TRUST_SCHEMA, related_request_id=ctx.request_id)
            if result.action == "accept" and (result.content or {}).get("approve") is True:
                try:
                    await anyio.to_thread.run_sync(self._rt.approve, hold)
                    continue
                except UsageError:
                    pass  # changed since it was shown: asked again with the new content next time
            self._not_approved.add((str(hold.path), hold.digest))

    def _questioner(self, ctx: Ctx, channel: McpChannel) -> Callable[[Sequence[Mapping[str, Any]]], Any] | None:
        """The `question` tool's questions as elicitation forms, one per question, in one round; None
        without elicitation."""
        if not self._can_ask(ctx):
            return None
        rounds = itertools.count(1)

        async def questioner(questions: Sequence[Mapping[str, Any]]) -> list[list[str]]:
            n = next(rounds)
            forms = {
                f"toolrt_question_{n}_{i}": ClientRequest(
                    "elicitation/create",
                    {
                        "mode": "form",
                        "message": escape_controls(str(item["question"]), keep_newlines=True),
                        "requestedSchema": _question_schema(item),
                    },
                )
                for i, item in enumerate(questions, 1)
            }
            answers = await channel.request(forms)
            found: list[list[str]] = []
            for key, item in zip(forms, questions, strict=True):
                answer = answers.get(key) or {}
                value = (answer.get("content") or {}).get("answer") if answer.get("action") == "accept" else None
                found.append(_answer_list(value, multiple=bool(item.get("multiple"))))
            return found

        return questioner

    # --- list_changed -----------------------------------------------------------------------------

    async def remember_session(self, ctx: Ctx, params: types.NotificationParams) -> None:
        """`notifications/initialized`: a handshake-era connection that wants list_changed and toolrt's log
        messages (until it closes), and the notice.

        Desktop clients do not show the server's stderr: which tools run without asking goes to the
        client's log as a warning, once per connection (and again only when it changes).
        """
        listener = self._listener(ctx)
        problems = self._standing_problems()
        if problems:
            await self._log_to(listener, _LogEntry("error", _problems_text(problems)))
        await self._tell_notice(listener)

    def _standing_problems(self) -> list[str]:
        """What is wrong now: the snapshot's withheld and blocking problems, and handler code that did not import."""
        return degraded_lines(self._rt.snapshot) + self._start_problems

    def _listener(self, ctx: Ctx) -> _Listener:
        connection = connection_of(ctx)
        listener = self._connections.get(connection)
        if listener is None:
            listener = self._connections[connection] = _Listener(connection)
            connection.exit_stack.push(OnExit(self._forget_connection, connection))
        return listener

    def _forget_connection(self, connection: Connection) -> None:
        self._connections.pop(connection, None)

    async def set_log_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """`logging/setLevel`: toolrt's own log messages to this connection at `params.level` and above
        (`warning` until the client sets a level)."""
        self._listener(ctx).level = params.level
        return types.EmptyResult()

    def unasked_notice(self) -> str | None:
        """Which of the offered tools run without asking, or None when every one asks."""
        from ..build.unasked import runs_without_asking, unasked_notice

        toolset = self._rt.tools(self._scope)
        return unasked_notice(runs_without_asking(self._rt.snapshot, toolset, self._scope.agent))

    def swap_listener(self) -> Callable[[SnapshotChange], None]:
        """A `Runtime.on_swap` listener that queues the change for `notify_changes` (any thread)."""
        bridge = _LoopBridge()

        def on_swap(change: SnapshotChange) -> None:
            bridge.call(lambda: _offer(self._changes_send, change))

        return on_swap

    def reload_listener(self) -> Callable[[ReloadEvent], None]:
        """A `Reloader.on_reload` listener: a reload's problems (and their fix) become log messages."""

        def on_reload(event: ReloadEvent) -> None:
            if event.error is not None and not event.repeated:
                lines = [str(problem) for problem in event.error.problems] or [str(event.error)]
                kept = "still serving the last good configuration" if event.change is None else "serving what is valid"
                if event.initial:
                    kept = "its tools fail until a save fixes it"
                    self._start_problems = lines
                text = f"toolrt: the configuration is invalid, {kept}:\n" + "\n".join(f"  {line}" for line in lines)
                _offer(self._changes_send, _LogEntry("error", text))
            elif event.error is None and (event.fixed or (event.change is not None and event.change.old.problems)):
                self._start_problems = []
                _offer(self._changes_send, _LogEntry("info", "toolrt: the configuration is valid again"))

        return on_reload

    async def notify_changes(self) -> None:
        """Send `notifications/tools/list_changed` to every connection after every swap, and reload
        problems (and a changed notice) as `notifications/message` log entries."""
        async with self._changes_receive:
            async for item in self._changes_receive:
                if isinstance(item, _LogEntry):
                    await self._log_everywhere(item)
                    continue
                await self._bus.publish(ToolsListChanged())
                for listener in tuple(self._connections.values()):
                    try:
                        await listener.connection.send_tool_list_changed()
                    except Exception:  # the client went away; stop telling it
                        self._connections.pop(listener.connection, None)
                        continue
                    await self._tell_notice(listener)
                await self._tell_subscribers_notice()
                if self._unsettled is not None:
                    self._unsettled.set()

    async def settle_when_idle(self, idle: float = SETTLE_IDLE_SECONDS, latest: float = SETTLE_LATEST_SECONDS) -> None:
        """Settle the heap (`settle_heap`) after each swap's notifications have gone out, once no
        `tools/list` or `tools/call` has started for `idle` seconds (or `latest` seconds after the swap on a
        server that never goes quiet): never on the path from a save to the notification and the new
        listing a client asks for on it. Several swaps in a row settle once."""
        while True:
            self._unsettled = unsettled = anyio.Event()
            await unsettled.wait()
            deadline = time.monotonic() + latest
            quiet = min(idle, latest)
            while quiet > 0:
                await anyio.sleep(quiet)
                now = time.monotonic()
                quiet = min(self._last_request + idle, deadline) - now
            settle_heap()

    async def _tell_notice(self, listener: _Listener) -> None:
        """The unasked-tools notice, when this listener has not been told this text yet."""
        notice = self.unasked_notice()
        if notice is None or notice == listener.notice:
            return
        if notice == self._last_notice:
            notice = self._last_notice  # one string held by every connection told it, not one each
        listener.notice = self._last_notice = notice
        await self._log_to(listener, _LogEntry("warning", notice))

    async def _tell_subscribers_notice(self) -> None:
        notice = self.unasked_notice()
        for subscriber in tuple(self._subscribers):
            if notice is not None and notice != subscriber.notice:
                subscriber.notice = notice
                subscriber.offer(_LogEntry("warning", notice))

    async def _log_everywhere(self, entry: _LogEntry) -> None:
        for listener in tuple(self._connections.values()):
            await self._log_to(listener, entry)
        for subscriber in tuple(self._subscribers):
            subscriber.offer(entry)

    async def _log_to(self, listener: _Listener, entry: _LogEntry) -> None:
        """One log message to a handshake-era connection, at or above the level it set."""
        if not _at_least(entry.level, listener.level):
            return
        import warnings

        try:
            with warnings.catch_warnings():
                # Deprecated for 2026-07-28 clients (they opt in per request); handshake-era ones show it.
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await listener.connection.log(entry.level, entry.text, logger="toolrt")
        except Exception:  # the client went away; stop telling it
            self._connections.pop(listener.connection, None)

    # --- 2026-07-28: log messages only where a request's `_meta` names a level -------------------

    async def listen(self, ctx: Ctx, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        """`subscriptions/listen`; a subscription whose `_meta` names a log level also carries toolrt's log
        messages at that level and above (the standing problems and the notice first, then each reload's)."""
        level = _requested_level(ctx)
        if level is None:
            return await self._listen(ctx, params)
        subscriber = _Subscriber(level)
        problems = self._standing_problems()
        if problems:
            subscriber.offer(_LogEntry("error", _problems_text(problems)))
        notice = self.unasked_notice()
        if notice is not None:
            subscriber.notice = notice
            subscriber.offer(_LogEntry("warning", notice))
        self._subscribers.add(subscriber)
        result: list[types.SubscriptionsListenResult] = []

        async def serve_stream() -> None:
            result.append(await self._listen(ctx, params))
            group.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(serve_stream)
                async with subscriber.receive:
                    async for entry in subscriber.receive:
                        await _log_on_request(ctx, entry)
        finally:
            self._subscribers.discard(subscriber)
            subscriber.close()
        return result[0]

    async def _log_on_call(self, ctx: Ctx, session: str) -> None:
        """On a 2026-07-28 call whose `_meta` names a log level: the standing problems and the notice, once
        per toolrt session (and again when they change)."""
        if _requested_level(ctx) is None:
            return
        problems = self._standing_problems()
        told = (_problems_text(problems) if problems else None, self.unasked_notice())
        before = self._told_sessions.pop(session, (None, None))
        self._told_sessions[session] = told
        while len(self._told_sessions) > 4096:
            del self._told_sessions[next(iter(self._told_sessions))]
        if told[0] is not None and told[0] != before[0]:
            await _log_on_request(ctx, _LogEntry("error", told[0]))
        if told[1] is not None and told[1] != before[1]:
            await _log_on_request(ctx, _LogEntry("warning", told[1]))


@dataclass(frozen=True, slots=True)
class _Listing:
    """`tools/list` in wire form for one selection, with the compiled spec each entry was made from."""

    toolset: ToolSet
    tools: tuple[dict[str, Any], ...]
    made_from: dict[int, tuple[Mapping[str, Any], dict[str, Any]]]
    """By the spec's `id`: the spec (kept alive, so that the id stays its own) and its wire form."""

    @classmethod
    def build(cls, toolset: ToolSet, specs: Sequence[Mapping[str, Any]], previous: _Listing | None) -> _Listing:
        """Each spec as the SDK's `Tool` in wire form; a spec object the previous listing was made from (a
        snapshot keeps the compiled spec of every tool a reload left unchanged) is not validated again."""
        made = previous.made_from if previous is not None else {}
        made_from: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}
        for spec in specs:
            found = made.get(id(spec))
            if found is None or found[0] is not spec:
                found = (
                    spec,
                    types.Tool.model_validate(spec).model_dump(by_alias=True, mode="json", exclude_none=True),
                )
            made_from[id(spec)] = found
        return cls(toolset, tuple(wire for _, wire in made_from.values()), made_from)


_LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)


def _at_least(level: str, threshold: str) -> bool:
    return _LEVELS.index(level) >= _LEVELS.index(threshold)


def _requested_level(ctx: Ctx) -> str | None:
    """The log level a 2026-07-28 request's `_meta` names (None: it asked for no log messages)."""
    meta: Mapping[str, Any] = ctx.meta or {}
    level = meta.get(types.LOG_LEVEL_META_KEY)
    return level if isinstance(level, str) and level in _LEVELS else None


async def _log_on_request(ctx: Ctx, entry: _LogEntry) -> None:
    """A log message on the request's own stream (the SDK drops levels below the one its `_meta` names)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await ctx.session.send_log_message(entry.level, entry.text, logger="toolrt", related_request_id=ctx.request_id)


@dataclass(eq=False)
class _Listener:
    """A handshake-era connection that hears list_changed and toolrt's log messages."""

    connection: Connection
    level: str = "warning"
    """The lowest level it is sent (`logging/setLevel`)."""
    notice: str | None = None
    """The unasked-tools notice it was last told."""


class _Subscriber:
    """A 2026-07-28 `subscriptions/listen` stream that asked for log messages: a queue its handler drains."""

    def __init__(self, level: str) -> None:
        self.level = level
        self.notice: str | None = None
        self._send, self.receive = anyio.create_memory_object_stream[_LogEntry](64)

    def offer(self, entry: _LogEntry) -> None:
        if _at_least(entry.level, self.level):
            _offer(self._send, entry)

    def close(self) -> None:
        self._send.close()


@dataclass(frozen=True, slots=True)
class _LogEntry:
    """A log message for every connection (`notifications/message`)."""

    level: Literal["info", "warning", "error"]
    text: str


def _problems_text(lines: Sequence[str]) -> str:
    return "toolrt: the configuration is invalid, serving what is valid:\n" + "\n".join(f"  {line}" for line in lines)


def _question_schema(item: Mapping[str, Any]) -> dict[str, Any]:
    """A one-field form: the option labels to pick from (or, for several answers, text to type)."""
    labels = [str(option.get("label", "")) for option in item.get("options", ()) if option.get("label")]
    title = escape_controls(str(item.get("header") or item["question"]))
    if labels and not item.get("multiple"):
        answer: dict[str, Any] = {"type": "string", "title": title, "enum": labels}
    else:
        hint = f" (one or more of: {escape_controls(', '.join(labels))}; comma-separated)" if labels else ""
        answer = {"type": "string", "title": title + hint}
    return {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}


def _answer_list(answer: Any, *, multiple: bool) -> list[str]:
    if not isinstance(answer, str) or not answer.strip():
        return []
    return [part.strip() for part in answer.split(",") if part.strip()] if multiple else [answer.strip()]


def _offer(send: MemoryObjectSendStream[Any], item: Any) -> None:
    # Progress and change notices may be dropped when a slow client lets them pile up; the next
    # one carries the news just as well.
    try:
        send.send_nowait(item)
    except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass


def _wants_progress(ctx: Ctx) -> bool:
    meta: Mapping[str, Any] | None = ctx.meta
    if not meta:
        return False
    return meta.get("progressToken", meta.get("progress_token")) is not None


class _Notes:
    """A call's notifications to its client (the handler's log and progress, and its live metadata as
    progress when the client sent a token), sent in order by a task started with the first one: a call
    that sends none costs no task. `post` may be called from a handler's worker thread."""

    def __init__(self, ctx: Ctx, wants_progress: bool) -> None:
        self._ctx = ctx
        self.wants_progress = wants_progress
        self._bridge = _LoopBridge()
        self._queue: deque[ClientNote] = deque()
        self._wake: anyio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def post(self, note: ClientNote) -> None:
        self._bridge.call(lambda: self._put(note))

    def metadata_listener(self, call_id: str) -> Callable[[CallEvent], None]:
        def listen(event: CallEvent) -> None:
            if event.call_id == call_id and event.kind == "metadata":
                self.post(("metadata", _progress_text(event)))

        return listen

    def _put(self, note: ClientNote) -> None:
        if self._closed or len(self._queue) >= 256:  # dropped when a slow client lets them pile up
            return
        self._queue.append(note)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())
        elif self._wake is not None:
            self._wake.set()

    async def _drain(self) -> None:
        count = 0.0
        while True:
            while self._queue:
                kind, note = self._queue.popleft()
                try:
                    count = await self._send(kind, note, count)
                except Exception:  # the client went away: the call's result is what matters
                    self._closed = True
                    self._queue.clear()
                    return
            if self._closed:
                return
            self._wake = anyio.Event()
            await self._wake.wait()

    async def _send(self, kind: str, note: Any, count: float) -> float:
        """Send one note; the progress count after it."""
        import warnings

        session, request_id = self._ctx.session, self._ctx.request_id
        if kind == "log":
            level, data, logger = note
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await session.send_log_message(level, data, logger=logger, related_request_id=request_id)
        elif not self.wants_progress:
            pass
        elif kind == "progress":
            progress, total, message = note
            count = max(count, float(progress))
            await session.report_progress(progress, total, message)
        else:
            count += 1
            await session.report_progress(count, None, note)
        return count

    async def finish(self) -> None:
        """Send what is queued; notes posted later are dropped."""
        self._closed = True
        if self._task is not None:
            if self._wake is not None:
                self._wake.set()
            await self._task

    def cancel(self) -> None:
        """Stop sending (the call was cancelled or failed)."""
        self._closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()


def _progress_text(event: CallEvent) -> str | None:
    title = event.data.get("title")
    metadata = event.data.get("metadata") or {}
    output = event.data.get("output") or (metadata.get("output") if isinstance(metadata, Mapping) else None)
    if isinstance(output, str) and output.strip():
        return output.strip().splitlines()[-1][:200]
    return title if isinstance(title, str) else None


def _ask_text(request: AskRequest) -> str:
    return "\n".join(ask_lines(request))


def _task_result(result: ToolResult, token: str | None) -> dict[str, Any] | MCPError:
    """A task's call result as its `tools/call` result (wire form), or the protocol error it raised."""
    protocol = result.metadata.get(PROTOCOL_ERROR)
    if isinstance(protocol, Mapping):
        return MCPError(int(protocol["code"]), str(protocol["message"]), protocol.get("data"))
    wire: dict[str, Any] = _to_mcp(result, token).model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire


def _wire(result: types.CallToolResult | dict[str, Any]) -> dict[str, Any]:
    if isinstance(result, dict):
        return result
    wire: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire


def _token_meta(token: str | None) -> dict[str, Any]:
    return {"_meta": {SESSION_META_KEY: token}} if token is not None else {}


def _to_mcp(result: ToolResult, token: str | None = None) -> types.CallToolResult:
    """A result as MCP content: its text (left out when empty and something else is attached), then each
    attachment (`_attachment_content`)."""
    content: list[types.ContentBlock] = []
    text = result.error if result.error is not None else result.output
    attached = [block for block in map(_attachment_content, result.attachments) if block is not None]
    if text or not attached:
        content.append(types.TextContent(type="text", text=text))
    content.extend(attached)
    meta: dict[str, Any] = {"toolrt/title": result.title}
    if token is not None:
        meta[SESSION_META_KEY] = token
    structured = dict(result.structured) if result.structured is not None and result.error is None else None
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=result.error is not None, _meta=meta
    )


def _attachment_content(attachment: Mapping[str, Any]) -> types.ContentBlock | None:
    """One attachment as MCP content:

    - `{"link": uri, "name", "mime"}`: a resource link;
    - `{"uri", "mime", "text" | "url"}`: an embedded resource with that URI (a `data:` URL's bytes as a blob);
    - `{"mime", "url": "data:…;base64,…"}`: an image for `image/*`, audio for `audio/*`, else an embedded
      blob resource named after its `filename`;
    - another URL: a line of text naming it.
    """
    mime = str(attachment.get("mime") or "")
    link = attachment.get("link")
    if isinstance(link, str) and link:
        name = str(attachment.get("name") or attachment.get("filename") or link)
        return types.ResourceLink(type="resource_link", uri=link, name=name, mime_type=mime or None)
    url = str(attachment.get("url", ""))
    data = url.split(";base64,", 1)[1] if url.startswith("data:") and ";base64," in url else None
    uri = attachment.get("uri")
    if isinstance(uri, str) and uri:
        text = attachment.get("text")
        resource: types.TextResourceContents | types.BlobResourceContents
        if isinstance(text, str):
            resource = types.TextResourceContents(uri=uri, mime_type=mime or "text/plain", text=text)
        elif data is not None:
            resource = types.BlobResourceContents(uri=uri, mime_type=mime or "application/octet-stream", blob=data)
        else:
            return types.ResourceLink(type="resource_link", uri=uri, name=uri, mime_type=mime or None)
        return types.EmbeddedResource(type="resource", resource=resource)
    if data is not None:
        if mime.startswith("image/"):
            return types.ImageContent(type="image", data=data, mime_type=mime)
        if mime.startswith("audio/"):
            return types.AudioContent(type="audio", data=data, mime_type=mime)
        # A PDF or another binary file: an embedded resource, not megabytes of base64 text.
        name = quote(str(attachment.get("filename") or "attachment"))
        blob = types.BlobResourceContents(
            uri=f"toolrt://attachment/{name}", mime_type=mime or "application/octet-stream", blob=data
        )
        return types.EmbeddedResource(type="resource", resource=blob)
    if url:
        return types.TextContent(type="text", text=f"attachment: {url}")
    return None


class _ToolrtServer(Server[Any]):
    """Advertises `tools.listChanged` on every transport (HTTP builds its own initialization options)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True, resources_changed=True),
            experimental_capabilities,
            extensions,
        )


def build_server(
    rt: Runtime, scope: CallScope, limits: ServeLimits | None = None, *, offer_unaskable: bool = False
) -> tuple[Server[Any], McpFace]:
    """The low-level MCP server over `rt` and its handlers (for in-process use and tests)."""
    face = McpFace(rt, scope, limits, offer_unaskable=offer_unaskable)
    notice = face.unasked_notice()
    server = _ToolrtServer(
        "toolrt",
        version=_version(),
        instructions=f"Tools of the toolrt project at {rt.root}." + (f"\n\n{notice}" if notice else ""),
        get_tool_input_schema=face.input_schema,
        # The listing is cached in wire form: a mapping, which the SDK shapes for the protocol version.
        on_list_tools=cast(
            "Callable[[Ctx, types.PaginatedRequestParams | None], Awaitable[types.ListToolsResult]]", face.list_tools
        ),
        # A task handle (`serve_tasks`) is a mapping: the SDK passes a result of an extension's resultType as is.
        on_call_tool=cast("Callable[[Ctx, types.CallToolRequestParams], Awaitable[_CallResult]]", face.call_tool),
        on_subscriptions_listen=face.listen,
        on_list_resources=face.skills.list_resources,
        on_read_resource=face.skills.read_resource,
        on_list_resource_templates=face.skills.list_resource_templates,
    )
    server.extensions[EXTENSION] = {"directoryRead": True}
    server.add_request_handler("skills/list", types.PaginatedRequestParams, face.skills.list_skills)
    server.add_request_handler("skills/get", GetSkillParams, face.skills.get_skill)
    server.add_request_handler("resources/directory/read", ReadDirectoryParams, face.skills.read_directory)
    server.middleware.append(
        RequestStateBoundary(state_security(rt.snapshot.data_dir, rt.store), default_audience="toolrt")
    )
    serve_tasks(server, face.tasks)
    server.add_notification_handler("notifications/initialized", types.NotificationParams, face.remember_session)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, face.set_log_level)
    return server, face


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolrt")
    except PackageNotFoundError:
        return "0"


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
    listener = _listen(host, port) if transport == "http" else None
    paused_before = pause_collector_during_builds()  # a server's reloads build with the collector paused

    async def main() -> None:
        server, face = build_server(rt, scope, limits, offer_unaskable=offer_unaskable)
        notice = face.unasked_notice()
        if notice is not None:
            print(notice, file=sys.stderr, flush=True)
        unsubscribe = rt.on_swap(face.swap_listener())
        observe(lambda: len(rt.sessions), lambda: rt.status().generation)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(face.notify_changes)
                group.start_soon(face.settle_when_idle)
                reloader = Reloader(rt)
                reloader.on_reload(face.reload_listener())
                group.start_soon(reloader.run)
                group.start_soon(watch_skills, rt.root, Path.home(), face.announce_skills_changed)
                if transport == "stdio":
                    await _serve_stdio(server)
                else:
                    assert listener is not None
                    health = Health(rt, _endpoint(host, listener))
                    group.start_soon(health.report)
                    await _serve_http(server, face, host, listener, limits or ServeLimits(), auth, health)
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


def refuse_unauthenticated(host: str, auth: AuthSettings) -> None:
    """Check the authentication settings, and that a server authenticating nobody listens on loopback only.

    Raises:
        UsageError: `host` is not loopback and `auth.*` is not set (anyone who reaches the port could call
            every tool), or the `auth.*` settings are incomplete.
    """
    if auth.enabled:
        from .serve_auth import check_settings

        check_settings(auth)
        return
    if HOST_ONLY["serve.host"](host):  # true for anything but loopback
        raise UsageError(
            f"--host {host} is not loopback, and a server reachable from other machines needs authentication: "
            "set auth.issuer, auth.audience and auth.jwks_url (TOOLRT_AUTH__ISSUER, TOOLRT_AUTH__AUDIENCE, "
            "TOOLRT_AUTH__JWKS_URL or the user settings file), see docs/mcp.md"
        )


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


async def _serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        options = server.create_initialization_options()
        settle_heap()
        await server.run(read_stream, write_stream, options)


def settle_heap() -> None:
    """Take what is alive now out of the cyclic garbage collector's rounds (`gc.freeze`), after a
    collection; called once the server is built, and again after snapshot swaps once the server is
    idle (`McpFace.settle_when_idle`).

    A server's heap is mostly what start-up built and keeps for good (the SDK, pydantic's schemas,
    toolrt's modules and snapshot), yet every full collection walks all of it again: on the echo
    benchmark that made toolrt's server spend about a third more CPU per call than the SDK's, whose
    heap is smaller. Frozen objects are still freed by reference counting; only cycles among them
    wait for the next settle, whose `gc.unfreeze` and collection first release the swapped-out
    snapshot. `run_serve` unfreezes when it returns, so an embedding process gets its heap back.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _listen(host: str, port: int) -> socket.socket:
    """The bound listening socket for `--host`/`--port`, and its URL on stderr.

    Bound here, before anything starts, so that a port in use is one line and exit 2 (a usage error)
    rather than a server that logs and exits from inside its task group.

    Raises:
        UsageError: the host does not resolve, or the port is in use or not ours to take.
    """
    import errno

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        raise UsageError(f"--host {host}: {error.strerror}") from None
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
    except OSError as error:
        listener.close()
        if error.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is already in use; choose another with --port") from None
        raise UsageError(f"cannot listen on {host} port {port}: {error.strerror or error}") from None
    listener.listen(2048)  # connections queue from now on: the URL below is true as soon as it is printed
    print(f"toolrt: serving MCP over streamable HTTP at {_endpoint(host, listener)}", file=sys.stderr, flush=True)
    return listener


def _endpoint(host: str, listener: socket.socket) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{listener.getsockname()[1]}/mcp"


async def _serve_http(
    server: Server[Any],
    face: McpFace,
    host: str,
    listener: socket.socket,
    limits: ServeLimits,
    auth: AuthSettings,
    health: Health,
) -> None:
    import uvicorn

    app = health.wrap(http_app(server, host, limits, face, auth))
    # Without authentication only local clients are served.
    config = uvicorn.Config(app if auth.enabled else loopback_only(app), log_level="warning")
    served = uvicorn.Server(config)
    settle_heap()
    await served.serve(sockets=[listener])


def http_app(
    server: Server[Any], host: str, limits: ServeLimits, face: McpFace | None = None, auth: AuthSettings | None = None
) -> Callable[..., Awaitable[None]]:
    """The ASGI app of `toolrt serve --transport http`: the SDK's streamable HTTP app with resumable streams
    (`serve_events`) and `--max-sessions` releasing the most idle session (`serve_session_limit`); with
    `auth` (and the `face` whose tools it serves), behind OAuth bearer authentication (`serve_auth`)."""
    from .serve_events import EventBuffer, resumable
    from .serve_session_limit import SessionLimit

    app = resumable(server, EventBuffer(), host=host, session_idle_timeout=limits.session_idle)
    limited = SessionLimit(server.session_manager, limits.max_sessions).wrap(app)
    if auth is None or not auth.enabled:
        return limited
    if face is None:
        raise UsageError("authentication needs the served tools (pass the McpFace)")
    from .serve_auth import protect

    scopes = sorted({scope for tool in face.served_tools() for scope in tool.scopes})
    return protect(limited, auth, face.scopes_of, face.refusal, scopes)
