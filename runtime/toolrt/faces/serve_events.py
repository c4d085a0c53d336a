"""Resumable streams for `toolrt serve --transport http` (streamable HTTP of 2025-11-25; the 2026-07-28
protocol has no resumable streams): a bounded in-memory event store for the `mcp` SDK.

With an event store the SDK opens each request's SSE stream with a priming event (an event id, empty
data and `retry`), stores every message it sends on a stream, and answers a GET carrying
`Last-Event-ID` by replaying what followed that event. This module is the store:

- one per MCP session: the SDK names a stream by its JSON-RPC request id, which every client numbers
  from the start, so the streams of two sessions are kept apart (and a session never replays
  another's events: an event id also carries a random key per session);
- bounded: at most `STREAM_EVENTS` events per stream and `TOTAL_BYTES` of serialized messages over all
  sessions; past either bound the oldest events go first;
- a replay sends what followed the client's last event and then follows the stream live until the
  request's response has been sent, so an event arriving while the client reconnects is neither lost
  nor sent twice;
- a `Last-Event-ID` whose following events are no longer all held (evicted, another session's, made
  up) is answered `400` before the SDK sees it: the client's reconnect fails and its request ends with
  an error, rather than going on with a gap.
"""

from __future__ import annotations

import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import (
    LAST_EVENT_ID_HEADER,
    MCP_SESSION_ID_HEADER,
    EventCallback,
    EventMessage,
    EventStore,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter

from .asgi import App, Receive, Scope, Send

__all__ = ["RETRY_MS", "STREAM_EVENTS", "TOTAL_BYTES", "EventBuffer", "SessionEvents", "resumable", "size_of"]

STREAM_EVENTS = 1_000
"""Events held per stream (one request's, or a session's standalone GET stream); the oldest go first."""
TOTAL_BYTES = 32 * 1024 * 1024
"""Serialized messages (and their bookkeeping, `size_of`) held over every session of a server; the
oldest go first."""
RETRY_MS = 500
"""The `retry` of each priming event: how long a client waits before reconnecting."""
_EVENT_OVERHEAD = 128
"""What an event's bookkeeping counts against `TOTAL_BYTES`, besides its message."""
_PRIMING_BYTES = 512
"""What a priming event (no message) counts: it opens a stream, whose bookkeeping it stands for."""
SHARED_TEXTS = 64
"""Distinct messages the buffer holds one string of, for every stream storing an equal one."""
SHARED_TEXT_BYTES = 16 * 1024
"""Longer messages are not shared (what `SHARED_TEXTS` holds beyond the events stays small)."""


@dataclass(eq=False, slots=True)
class _Stream:
    """One SSE stream's held events: serialized messages (None for a priming event), the first numbered
    `first_seq` and each next one more.

    Kept small: a server holds one per request of every open session (a list of the messages only, an
    `arrived` event only while a replay follows the stream)."""

    owner: SessionEvents
    """The session holding it: lets go of it once every event of the stream has been evicted."""
    stream_id: str
    """The SDK's name of the stream (a request id, or the standalone GET stream's key)."""
    number: int
    """Its number within the session, which event ids carry (never reused by the session)."""
    events: list[str | None] = field(default_factory=list)
    first_seq: int = 1
    """The sequence number of `events[0]` (of the next event while none is held)."""
    stale: int = 0
    """Entries of the buffer's order for events of this stream its own bound dropped: its earliest ones."""
    arrived: anyio.Event | None = None
    """Set (and dropped) when an event is stored: a replay following the stream waits on it."""

    def arrival(self) -> anyio.Event:
        """The event the next stored event sets."""
        if self.arrived is None:
            self.arrived = anyio.Event()
        return self.arrived

    @property
    def next_seq(self) -> int:
        return self.first_seq + len(self.events)


class EventBuffer:
    """The events of every session of one server, within the bounds."""

    def __init__(self, stream_events: int = STREAM_EVENTS, total_bytes: int = TOTAL_BYTES) -> None:
        self.stream_events = stream_events
        self.total_bytes = total_bytes
        self.held_bytes = 0
        self._order: deque[_Stream] = deque()
        """The stream of every event in the order stored: whose oldest event goes first past `total_bytes`."""
        self._stale = 0
        """Entries of `_order` whose event its stream's own bound dropped (compacted past half of it)."""
        self._texts: dict[str, str] = {}
        """The messages stored last (most recent last), each held once: every session's stream holds the same
        `initialize` result, and messages like it, rather than a copy of its own."""

    def session(self) -> SessionEvents:
        """A new event store of one MCP session (held for as long as its transport holds it)."""
        return SessionEvents(self)

    def shared(self, data: str) -> str:
        """`data`, or the equal message stored recently (one string for many sessions' equal events)."""
        if len(data) > SHARED_TEXT_BYTES:
            return data
        texts = self._texts
        held = texts.pop(data, None)
        if held is None:
            held = data
            if len(texts) >= SHARED_TEXTS:
                del texts[next(iter(texts))]
        texts[held] = held
        return held

    def add(self, stream: _Stream, data: str | None) -> int:
        seq = stream.next_seq
        stream.events.append(data)
        self._order.append(stream)
        self.held_bytes += size_of(data)
        while len(stream.events) > self.stream_events:
            self._drop_over_stream_bound(stream)
        while self.held_bytes > self.total_bytes and self._order:
            oldest = self._order.popleft()
            if oldest.stale:  # its event was already dropped by its stream's own bound
                oldest.stale -= 1
                self._stale -= 1
            else:
                self._drop_oldest(oldest)
        if self._stale > len(self._order) // 2:
            self._compact()
        arrived, stream.arrived = stream.arrived, None
        if arrived is not None:
            arrived.set()
        return seq

    def _drop_over_stream_bound(self, stream: _Stream) -> None:
        if self._order and self._order[0] is stream and not stream.stale:
            self._order.popleft()  # the entry of this very event (its stream has no stale one before it)
        else:
            stream.stale += 1
            self._stale += 1
        self._drop_oldest(stream)

    def _drop_oldest(self, stream: _Stream) -> None:
        """Drop the oldest event of `stream` (its entry in `_order` is taken care of by the caller)."""
        data = stream.events.pop(0)  # at most STREAM_EVENTS held
        stream.first_seq += 1
        self.held_bytes -= size_of(data)
        if not stream.events:
            stream.owner.forget(stream)

    def _compact(self) -> None:
        """Drop the entries of evicted events from `_order` (amortized: each entry is dropped once), so its
        length, and the streams its entries keep alive, follow the events held, not the events ever sent.
        A stream's stale entries are its earliest: its own bound drops its events oldest first."""
        kept: deque[_Stream] = deque()
        for stream in self._order:
            if stream.stale:
                stream.stale -= 1
            else:
                kept.append(stream)
        self._order = kept
        self._stale = 0


def size_of(data: str | None) -> int:
    """What one event counts against `TOTAL_BYTES`: its serialized message and its bookkeeping."""
    return _PRIMING_BYTES if data is None else len(data) + _EVENT_OVERHEAD


class SessionEvents(EventStore):
    """One MCP session's streams: the `EventStore` its transport stores to and replays from.

    An event id is `<session key>.<stream number>.<sequence number>`: the key is random per session, so
    an event id of another session (or a made-up one) names nothing here."""

    def __init__(self, buffer: EventBuffer) -> None:
        self._buffer = buffer
        self._key = secrets.token_urlsafe(9)
        self._streams: dict[str | int, _Stream] = {}
        """Each stream twice: by the SDK's stream id (a string) and by its number (an int)."""
        self._numbered = 0

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        stream = self._streams.get(stream_id)
        if stream is None:
            self._numbered += 1
            stream = _Stream(self, stream_id, self._numbered)
            self._streams[stream_id] = self._streams[stream.number] = stream
        data = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        seq = self._buffer.add(stream, None if data is None else self._buffer.shared(data))
        return f"{self._key}.{stream.number}.{seq}"

    def forget(self, stream: _Stream) -> None:
        """Let go of `stream`, every event of which has been evicted."""
        if self._streams.get(stream.stream_id) is stream:
            del self._streams[stream.stream_id]
        self._streams.pop(stream.number, None)

    @property
    def streams(self) -> int:
        """Streams this session holds events of."""
        return len(self._streams) // 2

    def holds_after(self, last_event_id: str) -> bool:
        """Whether every event of this session after `last_event_id` is still held."""
        found = self._find(last_event_id)
        return found is not None and found[0].first_seq <= found[1] + 1

    def _find(self, event_id: str) -> tuple[_Stream, int] | None:
        key, _, rest = event_id.partition(".")
        number, _, seq = rest.partition(".")
        if not (_is_count(number) and _is_count(seq) and secrets.compare_digest(key, self._key)):
            return None
        stream = self._streams.get(int(number))
        if stream is None or int(seq) >= stream.next_seq:
            return None
        return stream, int(seq)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        """Send the events after `last_event_id`, then follow the stream until its response has been sent.

        Returns None, so the SDK opens no second live route for the stream (it would race this one);
        the connection ends after the response, or when events it still had to send were evicted.
        """
        found = self._find(last_event_id)
        if found is None:
            return None
        stream, position = found
        while True:
            if stream.first_seq > position + 1:
                return None  # evicted before this client read them: it reconnects and is refused
            arrived = stream.arrival()
            first, events = stream.first_seq, tuple(stream.events)
            for seq, data in enumerate(events[position + 1 - first :], start=position + 1):
                position = seq
                if data is None:
                    continue
                message = jsonrpc_message_adapter.validate_json(data)
                await send_callback(EventMessage(message, f"{self._key}.{stream.number}.{seq}"))
                if isinstance(message, JSONRPCResponse | JSONRPCError):
                    return None
            await arrived.wait()


def _is_count(text: str) -> bool:
    """Whether `text` (from a client's `Last-Event-ID`) is a plain decimal number of a sane length."""
    return 0 < len(text) <= 18 and text.isascii() and text.isdigit()


def resumable(server: Server[Any], buffer: EventBuffer, **options: Any) -> App:
    """The streamable HTTP app of `server` with one event store per MCP session from `buffer`.

    The SDK's session manager hands its one `event_store` to every session's transport; each new
    transport gets its own `SessionEvents` instead. A GET whose `Last-Event-ID` this session does not
    hold every later event of is refused with 400.
    """
    app = server.streamable_http_app(event_store=SessionEvents(buffer), retry_interval=RETRY_MS, **options)
    manager: StreamableHTTPSessionManager = server.session_manager
    admit = manager._admit_session

    def admit_session(requestor: Any) -> Any:
        transport = admit(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            transport._event_store = buffer.session()
        return transport

    manager._admit_session = admit_session  # type: ignore[method-assign]

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "GET":
            headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
            last = headers.get(LAST_EVENT_ID_HEADER)
            if last is not None:
                events = _events_of(manager, headers.get(MCP_SESSION_ID_HEADER, ""))
                if events is None or not events.holds_after(last):
                    await _refuse(send, f"No events after Last-Event-ID {last[:80]!r} are held for this session")
                    return
        await app(scope, receive, send)

    return guarded


def _events_of(manager: StreamableHTTPSessionManager, session_id: str) -> SessionEvents | None:
    """The event store of the open session `session_id` (its transport holds it: no map of its own here)."""
    store = getattr(manager._server_instances.get(session_id), "_event_store", None)
    return store if isinstance(store, SessionEvents) else None


async def _refuse(send: Send, message: str) -> None:
    import json

    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})
