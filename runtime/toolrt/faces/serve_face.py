"""The handlers of `toolrt serve` over one Runtime (`McpFace`): who is calling, `tools/list`,
`tools/call` (sessions and replay, retries that never run twice, tasks, asking the person, progress),
and the skills extension's reads; what every client is told unasked is the `Notifier`'s
(`serve_notify`), the heap's settling the `HeapSettler`'s (`serve_heap`)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import mcp_types as types
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..api import Runtime
from ..build.changes import SnapshotChange
from ..build.selection import ToolSet, unavailable
from ..build.unaskable import only_asks, without_unaskable
from ..build.verdicts import ToolVerdicts
from ..call.pipeline import PROTOCOL_ERROR
from ..config.model import ToolDefinition
from ..permissions.principals import agent_for
from ..reload import ReloadEvent
from ..scope import CallScope
from ..store.model import session_id
from ..telemetry import enrich_request_span, tracer
from .serve_ask import asker, can_ask, questioner, review_held
from .serve_client import NONCE_FILE, McpChannel, NonceLedger, ReplayState, RequestContext, StoreNonces
from .serve_heap import SETTLE_IDLE_SECONDS, SETTLE_LATEST_SECONDS, HeapSettler
from .serve_idempotency import CallClaims
from .serve_limits import ServeLimits
from .serve_listing import Listing, listing_page, shaped_page
from .serve_notes import CallNotes, wants_progress_token
from .serve_notify import Notifier
from .serve_principal import current_caller, refusal
from .serve_sessions import SESSION_META_KEY, McpSessions
from .serve_skills import SkillsFace
from .serve_tasks import McpTasks, MemoryTaskStore, TaskRecord, TaskStart
from .serve_wire import task_result, to_mcp, token_meta, wire_form


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
        self._listed: dict[tuple[bool, bool, str | None], Listing] = {}
        """The listing in wire form by (whether tools that only ask are left out, whether references are
        inlined, the caller's agent), with the selection it was built from."""
        self._asking = ToolVerdicts(only_asks)
        """Which offered tools only ask (left out for clients that cannot be asked), kept for the tools a
        swap left unchanged."""
        self._heap = HeapSettler()
        """Settles the heap after each swap once requests pause (`serve_heap`)."""
        self._notifier = Notifier(rt, scope, self._heap.swapped)
        """List_changed and toolrt's log messages to every client (`serve_notify`)."""

        self._mcp_sessions = McpSessions(
            rt.sessions.held, rt.sessions.knows, shared=rt.store.persistent, begin=rt.sessions.begin
        )
        self._ids = itertools.count(1)
        store = rt.store
        self._nonces = StoreNonces(store) if store.persistent else NonceLedger(rt.snapshot.data_dir / NONCE_FILE)
        """The nonces of 2026-07-28 request states whose retry was accepted (a state is used once)."""
        self._claims = CallClaims(store)
        """Calls recorded as started before they run, so that a retry never runs one twice."""
        self._not_approved: set[tuple[str, str]] = set()
        """(file, digest) of held changes the person was shown and did not approve: not asked again."""
        self._tasks = McpTasks(
            MemoryTaskStore(), rt.sessions.held, lambda ctx, session: self._mcp_sessions.owns(ctx, session)
        )
        """The calls running as MCP tasks, and their records (`serve_tasks`)."""
        self.skills = SkillsFace(
            rt,
            self._request_scope,
            session_of=lambda ctx: self._mcp_sessions.identify(ctx)[0],
            can_ask=can_ask,
            load=self._load_skill,
            offer_unaskable=offer_unaskable,
        )
        """The skills extension (`serve_skills`)."""

    def close(self) -> None:
        """Close the queue of reload notices (`notify_changes` ends; later swaps are dropped) and cancel
        the tasks still running."""
        self._tasks.close()
        self._notifier.close()

    @property
    def bus(self) -> InMemorySubscriptionBus:
        return self._notifier.bus

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

    def _listing(self, ctx: RequestContext) -> Listing:
        """The served tools as MCP `Tool`s in wire form, built once per snapshot, selection and kind of
        client (a request copies none of it; a reload validates again only the tools it changed): a client
        that cannot be asked is not offered the tools whose every call asks (`build.unaskable`), and a
        client that drops `$defs` gets schemas with references inlined (`serve.inline_refs`)."""
        scope = self._request_scope()
        toolset = self._toolset(scope)
        hide = not self._offer_unaskable and not can_ask(ctx)
        inline = self._inlines(ctx)
        cached = self._listed.get((hide, inline, scope.agent))
        if cached is None or cached.toolset is not toolset:
            shown = toolset
            if hide:
                shown = without_unaskable(toolset, self._rt.snapshot, scope.agent, self._asking)
            specs = shown.specs("mcp-inline" if inline else "mcp")
            cached = self._listed[(hide, inline, scope.agent)] = Listing.build(toolset, specs, cached)
        return cached

    def _inlines(self, ctx: RequestContext) -> bool:
        """Whether this client gets every `$ref` inlined: `serve.inline_refs` is `always`, or `auto` and the
        client's `clientInfo.name` is one known to drop `$defs` (`specs.mcp.DROPS_DEFS`)."""
        setting = self._rt.settings.values.serve.inline_refs
        if setting != "auto":
            return setting == "always"
        from ..specs.mcp import drops_defs

        params = ctx.session.client_params
        return params is not None and drops_defs(params.client_info.name)

    async def list_tools(self, ctx: RequestContext, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        """`tools/list`: the cached listing (`_listing`), paged above `--page-size`."""
        self._heap.last_request = time.monotonic()
        tools = self._listing(ctx).tools
        return listing_page(tools, params.cursor if params is not None else None, self._limits.page_size)

    async def shaped_listing(
        self, ctx: RequestContext, params: types.PaginatedRequestParams, version: str
    ) -> dict[str, Any]:
        """`tools/list` in the shape the SDK's result surface of `version` gives it (`ShapedListing`)."""
        self._heap.last_request = time.monotonic()
        tools = self._listing(ctx).shaped(version)
        return shaped_page(listing_page(tools, params.cursor, self._limits.page_size), version)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The SDK's `get_tool_input_schema` hook: one tool's schema from the cached specs, no listing."""
        spec = self._toolset().spec(name, "mcp")
        return None if spec is None else spec["inputSchema"]

    # --- tools/call -------------------------------------------------------------------------------

    def _session_and_replay(self, ctx: RequestContext) -> tuple[str, str | None, ReplayState | None]:
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
        self, ctx: RequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        self._heap.last_request = time.monotonic()
        await review_held(self._rt, ctx, self._not_approved)
        scope = self._request_scope()
        if params.name not in self._toolset(scope):
            withheld = unavailable(self._rt.snapshot, params.name)
            if withheld is not None:  # a tool whose file is broken: say why, as a result the model can read
                return types.CallToolResult(content=[types.TextContent(type="text", text=withheld)], is_error=True)
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        session, token, replay = self._session_and_replay(ctx)
        if tracer() is not None:  # the SDK's server span of this request names the session (an id) and caller
            enrich_request_span(session_id(session), scope.principal, scope.agent)
        claim = CallClaims.key(ctx.meta or {})
        if claim is not None:
            retry = self._claims.claim(
                session, claim, CallClaims.fingerprint(params.name, params.arguments), token_meta(token)
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
            result = None if isinstance(wire, types.InputRequiredResult) else wire_form(wire)
            self._claims.finish(session, claim, result)
        return wire

    async def _run_call(
        self,
        ctx: RequestContext,
        params: types.CallToolRequestParams,
        scope: CallScope,
        session: str,
        token: str | None,
        replay: ReplayState | None,
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        await self._notifier.log_on_call(ctx, session)
        call_id = f"mcp_{ctx.request_id}_{next(self._ids)}"
        notes = CallNotes(ctx, wants_progress_token(ctx))
        channel = McpChannel(ctx, notes.post, replay, self._notifier.log_allowed(ctx), params.name)
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
            ask=asker(ctx, channel),
            questioner=questioner(ctx, channel),
            call_id=call_id,
            channel=channel,
        )
        unsubscribe = self._rt.subscribe(notes.metadata_listener(call_id)) if notes.wants_progress else None
        try:
            if task is None:
                result = await call
            else:
                outcome = await task.run(call, lambda done: task_result(done, token))
                if isinstance(outcome, TaskRecord):  # the call goes on as a task
                    return {"resultType": "task", **outcome.wire(detailed=False), **token_meta(token)}
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
        return to_mcp(result, token)

    def _task_start(self, ctx: RequestContext, session: str, name: str) -> TaskStart | None:
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

    async def _load_skill(self, ctx: RequestContext, name: str) -> types.InputRequiredResult | None:
        """A skill file read at ask (`serve_skills`): a call of the `skill` tool in the request's session,
        whose ask goes to the person as a tool call's does (`elicitation/create`; on 2026-07-28 an
        input-required result with the sealed state, the read's retry resuming it). Raises `MCPError`
        (-32602) when the call is refused."""
        session, token, replay = self._session_and_replay(ctx)
        channel = McpChannel(ctx, None, replay, self._notifier.log_allowed(ctx), "skill")
        result = await self._rt.call(
            "skill",
            {"name": name},
            self._request_scope(),
            session=session,
            ask=asker(ctx, channel),
            call_id=f"mcp_{ctx.request_id}_{next(self._ids)}",
            channel=channel,
        )
        if replay is not None and replay.needed:
            return replay.input_required({SESSION_META_KEY: token} if token is not None else None)
        if result.error is not None:
            raise MCPError(types.INVALID_PARAMS, result.error)
        return None

    # --- what every client is told (`serve_notify`) and the heap (`serve_heap`) -------------------

    async def remember_session(self, ctx: RequestContext, params: types.NotificationParams) -> None:
        """`notifications/initialized` (`Notifier.remember_session`)."""
        await self._notifier.remember_session(ctx, params)

    async def set_log_level(self, ctx: RequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """`logging/setLevel` (`Notifier.set_log_level`)."""
        return await self._notifier.set_log_level(ctx, params)

    async def listen(
        self, ctx: RequestContext, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """`subscriptions/listen` (`Notifier.listen`)."""
        return await self._notifier.listen(ctx, params)

    async def announce_skills_changed(self) -> None:
        """A skill was added, changed or removed (`Notifier.announce_skills_changed`)."""
        await self._notifier.announce_skills_changed()

    def unasked_notice(self) -> str | None:
        """Which of the offered tools run without asking, or None when every one asks."""
        return self._notifier.unasked_notice()

    def swap_listener(self) -> Callable[[SnapshotChange], None]:
        """A `Runtime.subscribe(..., to="swaps")` listener that queues the change for `notify_changes` (any thread)."""
        return self._notifier.swap_listener()

    def reload_listener(self) -> Callable[[ReloadEvent], None]:
        """A `Reloader.subscribe` listener: a reload's problems (and their fix) become log messages."""
        return self._notifier.reload_listener()

    async def notify_changes(self) -> None:
        """list_changed and log messages after every swap, until `close` (`Notifier.notify_changes`)."""
        await self._notifier.notify_changes()

    async def settle_when_idle(self, idle: float = SETTLE_IDLE_SECONDS, latest: float = SETTLE_LATEST_SECONDS) -> None:
        """Settle the heap after each swap once requests pause (`HeapSettler.settle_when_idle`)."""
        await self._heap.settle_when_idle(idle, latest)
