"""`toolrt serve --transport http` in the test's own event loop, on a free loopback port."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import uvicorn

from toolrt.api import Runtime
from toolrt.config.settings import AuthSettings
from toolrt.faces.serve import ServeLimits, build_server, http_app
from toolrt.scope import CallScope

__all__ = ["free_port", "serving"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def serving(
    rt: Runtime,
    limits: ServeLimits | None = None,
    *,
    whole_app: bool = False,
    auth: AuthSettings | None = None,
    port: int | None = None,
    scope: CallScope | None = None,
) -> AsyncIterator[str]:
    """Serve `rt` over streamable HTTP; yields the endpoint URL. The SDK's app, or with `whole_app` (or
    `auth`) the one `toolrt serve` runs (`http_app`: resumable streams and `--max-sessions` at the HTTP
    layer, and with `auth` bearer authentication); on `port`, else a free one."""
    server, face = build_server(rt, scope or CallScope(), limits)
    port = port or free_port()
    app = (
        http_app(server, "127.0.0.1", limits or ServeLimits(), face, auth)
        if whole_app or auth is not None
        else server.streamable_http_app(host="127.0.0.1")
    )
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    async with anyio.create_task_group() as group:
        group.start_soon(web.serve)
        with anyio.fail_after(20):  # a hang guard
            while not web.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            web.should_exit = True
            face.close()
