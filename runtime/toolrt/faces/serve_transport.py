"""How `toolrt serve` reaches its clients: stdio, or streamable HTTP on a socket bound before anything
starts (the SDK's app with resumable streams and `--max-sessions`, behind OAuth bearer authentication or,
without it, for loopback clients only)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp.server.lowlevel import Server

from ..config.settings import HOST_ONLY, AuthSettings
from ..errors import UsageError
from .serve_health import Health
from .serve_heap import settle_heap
from .serve_limits import ServeLimits
from .serve_loopback import loopback_only

if TYPE_CHECKING:
    from .serve_face import McpFace

TRANSPORTS = ("stdio", "http")


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


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        options = server.create_initialization_options()
        settle_heap()
        await server.run(read_stream, write_stream, options)


def listen_on(host: str, port: int) -> socket.socket:
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
    print(f"toolrt: serving MCP over streamable HTTP at {endpoint(host, listener)}", file=sys.stderr, flush=True)
    return listener


def endpoint(host: str, listener: socket.socket) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{listener.getsockname()[1]}/mcp"


async def serve_http(
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
