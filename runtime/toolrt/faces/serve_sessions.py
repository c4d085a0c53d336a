"""Which toolrt session an MCP request belongs to: the session model of `toolrt serve`.

A toolrt session holds "always" approvals, read-before-edit stamps, the doom-loop history and todos
(`sessions.SessionStore`). Over MCP:

- protocol versions with MCP sessions (2025-11-25 and earlier) over streamable HTTP: one toolrt
  session per MCP session (`mcp:<Mcp-Session-Id>`), released when the MCP session ends (the client's
  DELETE, the idle timeout, shutdown);
- a connection without a session id on those versions (stdio, whose process serves one client): the
  server's default session;
- the sessionless version (2026-07-28): a request whose `_meta["toolrt/session"]` is a token this
  server issued and still holds runs in that token's session; any other value (e.g. `"new"`) opens a
  new session, and the result's `_meta["toolrt/session"]` carries its token for the client to echo
  on later requests; a request without the key runs in the default session (with a state store shared by
  several processes, in a new session, as for `"new"`).

The default session is one per server process: HTTP serves on loopback, for one local user. Two
clients holding different sessions never share state; tokens are random and only ever issued by the
server, so a client cannot pick another's session by name.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.connection import Connection
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..call.sessions import SessionStore
from ..errors import StoreError
from .serve_client import RequestContext
from .serve_principal import principal_suffix

__all__ = ["DEFAULT_SESSION", "SESSION_META_KEY", "McpSessions", "OnExit", "connection_of"]

SESSION_META_KEY = "toolrt/session"
"""The `_meta` key of the session token on the sessionless protocol (request and result)."""
DEFAULT_SESSION = "mcp"
"""The session of requests that name none: one per server process."""
_TOKEN_PREFIX = "mcp-token:"
_MCP_SESSION_PREFIX = "mcp:"
_RELEASE_REGISTERED = "toolrt/session-release"


def _store_away(error: StoreError) -> MCPError:
    return MCPError(INTERNAL_ERROR, f"the state store cannot be reached; try again ({error})")


def connection_of(ctx: RequestContext) -> Connection:
    """The request's connection (its `exit_stack` runs when the client's connection or MCP session ends).

    The low-level context does not expose it yet (the SDK's own `Context` does); `ServerSession` holds it.
    """
    connection: Connection = ctx.session._connection
    return connection


@dataclass(frozen=True, slots=True)
class OnExit:
    """`callback(argument)` when a connection's exit stack unwinds (`exit_stack.push(OnExit(...))`): one small
    object per open session, where `ExitStack.callback` keeps a closure with its cells, an argument tuple, a
    keyword dict and a `__wrapped__` attribute dict. Never suppresses an exception (returns None)."""

    callback: Callable[[Any], object]
    argument: Any

    def __call__(self, *_exc_info: object) -> None:
        self.callback(self.argument)


class McpSessions:
    """Maps MCP requests to toolrt sessions in `store`, and releases them when their MCP session ends."""

    def __init__(
        self,
        store: SessionStore[Any],
        known: Callable[[str], bool] | None = None,
        *,
        shared: bool = False,
        begin: Callable[[str], object] | None = None,
    ) -> None:
        self._store = store
        self._known = known or store.__contains__
        self._begin = begin or store.get
        """Hold a session for a token just issued (`Sessions.begin`: the store is not asked about it)."""
        """Whether a session is held: here, or (a persistent state store) by another process or an earlier run."""
        self._shared = shared
        """The state store is shared with other processes: a 2026-07-28 request naming no session opens a
        new one (a per-process default session would split one client's state between replicas)."""
        self._default = DEFAULT_SESSION if not shared else f"{DEFAULT_SESSION}:{secrets.token_urlsafe(18)}"
        """The default session (stdio): with a shared store, one of this process's own, so that another
        server process (another client's stdio server) never starts from its approvals."""

    def _knows(self, name: str) -> bool:
        """Whether session `name` is held; a store that cannot be read answers the request with an error
        (a token is never taken as unknown, and its client moved to a new session, for an outage)."""
        try:
            return self._known(name)
        except StoreError as error:
            raise _store_away(error) from None

    def identify(self, ctx: RequestContext, carried: str | None = None) -> tuple[str, str | None]:
        """(the toolrt session of this request, the token its result must carry, or None).

        `carried`: the session a verified `requestState` names; a token the server issued before a
        restart (so no longer holds) is held again when the request's token is that session's.

        Over authenticated HTTP every name ends with the caller's `principal_suffix`: another caller
        naming the same MCP session or token reaches another session (`serve_principal`)."""
        connection = connection_of(ctx)
        mine = principal_suffix()
        if connection.session_id is not None:
            name = _MCP_SESSION_PREFIX + connection.session_id + mine
            if not connection.state.get(_RELEASE_REGISTERED):
                connection.state[_RELEASE_REGISTERED] = True
                connection.exit_stack.push(OnExit(self._store.release, name))
            return name, None
        if connection.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return self._default + mine, None
        meta: Mapping[str, Any] = ctx.meta or {}
        if SESSION_META_KEY not in meta and not self._shared:
            return self._default + mine, None
        token = meta.get(SESSION_META_KEY)
        if isinstance(token, str):
            name = _TOKEN_PREFIX + token + mine
            if carried == name or self._knows(name):
                self._store.get(name)
                return name, token
        elif self._carried_here(carried, mine):  # a sessionless retry with the requestState its call was given
            assert carried is not None
            self._store.get(carried)
            return carried, carried[len(_TOKEN_PREFIX) : len(carried) - len(mine)]
        token = secrets.token_urlsafe(18)
        name = _TOKEN_PREFIX + token + mine
        self._begin(name)  # held from now on, even if the call never reaches the pipeline
        return name, token

    def _carried_here(self, carried: str | None, mine: str) -> bool:
        return (
            carried is not None
            and carried.startswith(_TOKEN_PREFIX)
            and carried.endswith(mine)
            and len(carried) > len(_TOKEN_PREFIX) + len(mine)
            and self._knows(carried)
        )

    def owns(self, ctx: RequestContext, session: str) -> bool:
        """Whether this request reaches what `session` holds (its MCP tasks), without opening a session:
        the request's own session; or, for a sessionless 2026-07-28 request on a shared store (where each
        such request is a session of its own), any token session of the same caller, since the task id it
        names is the capability, returned only to the client that created the task."""
        connection = connection_of(ctx)
        mine = principal_suffix()
        if connection.session_id is not None:
            return session == _MCP_SESSION_PREFIX + connection.session_id + mine
        token = (ctx.meta or {}).get(SESSION_META_KEY)
        if connection.protocol_version not in MODERN_PROTOCOL_VERSIONS or (token is None and not self._shared):
            return session == self._default + mine
        if isinstance(token, str):
            return session == _TOKEN_PREFIX + token + mine
        return token is None and session.startswith(_TOKEN_PREFIX) and session.endswith(mine)
