"""What `toolrt serve` tells its clients unasked: `notifications/tools/list_changed` (and
`resources/list_changed` for skills) after every swap, and toolrt's own log messages (a reload's problems
and their fix, the standing problems, the notice of which tools run without asking).

Handshake-era connections hear them on their standalone channel (after `notifications/initialized`, at
the level `logging/setLevel` set, `warning` until then); 2026-07-28 clients through
`subscriptions/listen`, and log messages only where a request's `_meta` names a level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourcesListChanged, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..api import Runtime
from ..build.changes import SnapshotChange
from ..build.selection import ToolSet
from ..build.snapshot import degraded_lines
from ..build.unasked import runs_unasked, runs_without_asking, unasked_notice
from ..build.verdicts import ToolVerdicts
from ..errors import UsageError
from ..reload import ReloadEvent
from ..scope import CallScope
from .serve_client import RequestContext
from .serve_notes import LoopBridge, offer
from .serve_sessions import OnExit, connection_of


class Notifier:
    """The connections and subscriptions that hear list_changed and toolrt's log messages, and what each
    was last told; one instance serves every connection."""

    def __init__(self, rt: Runtime, scope: CallScope, on_notified: Callable[[], None]) -> None:
        self._rt = rt
        self._scope = scope
        self._on_notified = on_notified
        """Called after each swap's notifications have gone out (the heap may settle)."""
        self._connections: dict[Connection, _Listener] = {}
        """Handshake-era connections (after `notifications/initialized`) and what they were told."""
        self._subscribers: set[_Subscriber] = set()
        """2026-07-28 subscriptions whose `_meta` named a log level."""
        self._start_problems: list[str] = []
        """Handler code that did not import when the reloader started, until a save fixes it."""
        self._told_sessions: dict[str, tuple[str | None, str | None]] = {}
        """2026-07-28 sessions: the problems and notice their calls were last told."""
        self._last_notice: str | None = None
        """The notice last told: one string held by every connection told it, not one each."""
        self._unasked = ToolVerdicts(runs_unasked)
        """Which offered tools run without asking, kept for the tools a swap left unchanged."""
        self._notice_of: tuple[ToolSet, str | None] | None = None
        """The served selection the notice was last worked out for, and the notice."""
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._changes_send, self._changes_receive = anyio.create_memory_object_stream[SnapshotChange | _LogEntry](64)

    def close(self) -> None:
        """Close the queue of reload notices (`notify_changes` ends; later swaps are dropped)."""
        self._changes_send.close()
        self._changes_receive.close()

    def log_allowed(self, ctx: RequestContext) -> Callable[[str], bool]:
        """Whether a handler's log message at a level reaches this client: at or above the level its
        request's `_meta` names (2026-07-28; none named, none sent), or the connection's
        `logging/setLevel` (`warning` until set)."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            requested = _requested_level(ctx)
            return lambda level: requested is not None and _at_least(level, requested)
        listener = self._listener(ctx)
        return lambda level: _at_least(level, listener.level)

    async def announce_skills_changed(self) -> None:
        """A skill was added, changed or removed: `notifications/resources/list_changed` to every
        handshake-era connection, and through `subscriptions/listen` to 2026-07-28 clients."""
        await self.bus.publish(ResourcesListChanged())
        for listener in tuple(self._connections.values()):
            try:
                await listener.connection.send_resource_list_changed()
            except Exception:  # the client went away; stop telling it
                self._connections.pop(listener.connection, None)

    async def remember_session(self, ctx: RequestContext, params: types.NotificationParams) -> None:
        """`notifications/initialized`: a handshake-era connection that wants list_changed and toolrt's log
        messages (until it closes), and the notice.

        Desktop clients do not show the server's stderr: which tools run without asking goes to the
        client's log as a warning, once per connection (and again only when it changes).
        """
        listener = self._listener(ctx)
        problems = self._standing_problems()
        if problems:
            await self._log_to(listener, _LogEntry("error", _problems_text(problems)))
        notice, unservable = self._served_notice()
        if unservable is not None:
            await self._log_to(listener, _LogEntry("error", unservable))
        await self._tell_notice(listener, notice)

    def _standing_problems(self) -> list[str]:
        """What is wrong now: the snapshot's withheld and blocking problems, and handler code that did not import."""
        return degraded_lines(self._rt.snapshot) + self._start_problems

    def _listener(self, ctx: RequestContext) -> _Listener:
        connection = connection_of(ctx)
        listener = self._connections.get(connection)
        if listener is None:
            listener = self._connections[connection] = _Listener(connection)
            connection.exit_stack.push(OnExit(self._forget_connection, connection))
        return listener

    def _forget_connection(self, connection: Connection) -> None:
        self._connections.pop(connection, None)

    async def set_log_level(self, ctx: RequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """`logging/setLevel`: toolrt's own log messages to this connection at `params.level` and above
        (`warning` until the client sets a level)."""
        self._listener(ctx).level = params.level
        return types.EmptyResult()

    def unasked_notice(self) -> str | None:
        """Which of the offered tools run without asking, or None when every one asks: worked out once per
        selection (a swap makes a new one), asking again only about the tools the swap changed."""
        toolset = self._rt.tools(self._scope)
        if self._notice_of is not None and self._notice_of[0] is toolset:
            return self._notice_of[1]
        names = runs_without_asking(self._rt.snapshot, toolset, self._scope.agent, self._unasked)
        notice = unasked_notice(names)
        self._notice_of = (toolset, notice)
        return notice

    def _served_notice(self) -> tuple[str | None, str | None]:
        """(`unasked_notice`, None), or (None, why nothing can be served): a valid save can drop the agent
        (`--agent`) or the tool set (`--toolset`) the server was started with."""
        try:
            return self.unasked_notice(), None
        except UsageError as error:
            return None, f"toolrt: {error}: no tool is listed or runs until a save brings it back"

    def swap_listener(self) -> Callable[[SnapshotChange], None]:
        """A `Runtime.subscribe(..., to="swaps")` listener that queues the change for `notify_changes` (any thread)."""
        bridge = LoopBridge()

        def on_swap(change: SnapshotChange) -> None:
            bridge.call(lambda: offer(self._changes_send, change))

        return on_swap

    def reload_listener(self) -> Callable[[ReloadEvent], None]:
        """A `Reloader.subscribe` listener: a reload's problems (and their fix) become log messages."""

        def on_reload(event: ReloadEvent) -> None:
            if event.error is not None and not event.repeated:
                lines = [str(problem) for problem in event.error.problems] or [str(event.error)]
                kept = "still serving the last good configuration" if event.change is None else "serving what is valid"
                if event.initial:
                    kept = "its tools fail until a save fixes it"
                    self._start_problems = lines
                text = f"toolrt: the configuration is invalid, {kept}:\n" + "\n".join(f"  {line}" for line in lines)
                offer(self._changes_send, _LogEntry("error", text))
            elif event.error is None and (event.fixed or (event.change is not None and event.change.old.problems)):
                self._start_problems = []
                offer(self._changes_send, _LogEntry("info", "toolrt: the configuration is valid again"))

        return on_reload

    async def notify_changes(self) -> None:
        """Send `notifications/tools/list_changed` to every connection after every swap, and reload
        problems (and a changed notice) as `notifications/message` log entries."""
        async with self._changes_receive:
            async for item in self._changes_receive:
                if isinstance(item, _LogEntry):
                    await self._log_everywhere(item)
                    continue
                await self.bus.publish(ToolsListChanged())
                told: list[_Listener] = []
                for listener in tuple(self._connections.values()):
                    try:
                        await listener.connection.send_tool_list_changed()
                    except Exception:  # the client went away; stop telling it
                        self._connections.pop(listener.connection, None)
                        continue
                    told.append(listener)
                # Every list_changed is on its way (its writer runs at this checkpoint) before the notice is
                # worked out for the new snapshot: the clients' tools/list does not wait for it.
                await anyio.lowlevel.checkpoint()
                notice, unservable = self._served_notice()
                if unservable is not None:
                    await self._log_everywhere(_LogEntry("error", unservable))
                for listener in told:
                    await self._tell_notice(listener, notice)
                self._tell_subscribers_notice(notice)
                self._on_notified()

    async def _tell_notice(self, listener: _Listener, notice: str | None) -> None:
        """The unasked-tools notice, when this listener has not been told this text yet."""
        if notice is None or notice == listener.notice:
            return
        if notice == self._last_notice:
            notice = self._last_notice
        listener.notice = self._last_notice = notice
        await self._log_to(listener, _LogEntry("warning", notice))

    def _tell_subscribers_notice(self, notice: str | None) -> None:
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

    async def listen(
        self, ctx: RequestContext, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
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

    async def log_on_call(self, ctx: RequestContext, session: str) -> None:
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


_LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)


def _at_least(level: str, threshold: str) -> bool:
    return _LEVELS.index(level) >= _LEVELS.index(threshold)


def _requested_level(ctx: RequestContext) -> str | None:
    """The log level a 2026-07-28 request's `_meta` names (None: it asked for no log messages)."""
    meta: Mapping[str, Any] = ctx.meta or {}
    level = meta.get(types.LOG_LEVEL_META_KEY)
    return level if isinstance(level, str) and level in _LEVELS else None


async def _log_on_request(ctx: RequestContext, entry: _LogEntry) -> None:
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
            offer(self._send, entry)

    def close(self) -> None:
        self._send.close()


@dataclass(frozen=True, slots=True)
class _LogEntry:
    """A log message for every connection (`notifications/message`)."""

    level: Literal["info", "warning", "error"]
    text: str


def _problems_text(lines: Sequence[str]) -> str:
    return "toolrt: the configuration is invalid, serving what is valid:\n" + "\n".join(f"  {line}" for line in lines)
