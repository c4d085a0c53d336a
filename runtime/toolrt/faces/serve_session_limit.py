"""`--max-sessions` at the HTTP layer of `toolrt serve`: past the limit the most idle MCP session is released.

The `mcp` SDK's session manager refuses a new session with 503 while its limit is reached; toolrt's own
session store releases the most idle session instead (`call.sessions`). This module makes the HTTP layer
do the same: the SDK's manager gets no limit of its own, and opening a session past `max_sessions` first
terminates the session that has gone longest without a request, preferring one with no request in
flight (a call being answered; a client's standing GET stream, which every handshake-era client keeps
open, does not count). A released session is forgotten at once, so its next
request answers HTTP 404, the specification's answer for a terminated session, on which the client
initializes a new one; its toolrt session is released with it (the connection's exit stack).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from .asgi import App, Receive, Scope, Send

__all__ = ["SessionLimit"]


_SESSION_HEADER = b"mcp-session-id"


class SessionLimit:
    """Holds `manager` to `max_sessions` open sessions by releasing the most idle one (`wrap` its app)."""

    def __init__(self, manager: StreamableHTTPSessionManager, max_sessions: int) -> None:
        self._manager = manager
        self.max_sessions = max_sessions
        self._used: OrderedDict[str, None] = OrderedDict()
        """Session ids by their last request's start, the least recently used first."""
        self._busy: dict[str, int] = {}
        """Requests other than GET streams in flight, by session id."""
        self.released = 0
        """Sessions released to make room (for the log and tests)."""
        manager.max_sessions = None  # never 503: room is made here
        admit = manager._admit_session

        def admit_session(requestor: Any) -> StreamableHTTPServerTransport | None:
            instances = manager._server_instances
            if len(instances) >= self.max_sessions:
                self._release_most_idle()
            elif len(self._used) > 2 * len(instances) + 64:  # sessions ended by DELETE or the idle timeout
                for ended in [session_id for session_id in self._used if session_id not in instances]:
                    del self._used[ended]
            transport = admit(requestor)
            if transport is not None and transport.mcp_session_id is not None:
                self._used[transport.mcp_session_id] = None
            return transport

        manager._admit_session = admit_session  # type: ignore[method-assign]

    def wrap(self, app: App) -> App:
        """`app` with each request's session marked as used (the most recently used is released last)."""
        used, busy = self._used, self._busy

        async def marked(scope: Scope, receive: Receive, send: Send) -> None:
            session_id = None
            if scope["type"] == "http":
                for name, value in scope["headers"]:
                    if name == _SESSION_HEADER:
                        session_id = value.decode("latin-1")
                        break
            if session_id is None or session_id not in used:
                await app(scope, receive, send)
                return
            used.move_to_end(session_id)
            if scope.get("method") == "GET":
                await app(scope, receive, send)
                return
            busy[session_id] = busy.get(session_id, 0) + 1
            try:
                await app(scope, receive, send)
            finally:
                left = busy.pop(session_id) - 1
                if left:
                    busy[session_id] = left

        return marked

    def _release_most_idle(self) -> None:
        """Forget the most idle open session now (its id answers 404 from here on) and terminate its
        transport in the manager's task group (which ends its server task and releases its toolrt session)."""
        instances = self._manager._server_instances
        chosen: str | None = None
        for session_id in tuple(self._used):
            transport = instances.get(session_id)
            if transport is None or transport.is_terminated:
                del self._used[session_id]  # already ended (DELETE, idle timeout): nothing to release
                continue
            if chosen is None:
                chosen = session_id  # the least recently used, should every session be busy
            if session_id not in self._busy:
                chosen = session_id
                break
        if chosen is None:
            return
        del self._used[chosen]
        transport = instances.pop(chosen)
        self._manager._session_owners.pop(chosen, None)
        self.released += 1
        group = self._manager._task_group
        if group is not None:
            group.start_soon(transport.terminate)
