"""`toolrt serve --transport http` without authentication serves the local user only.

Without `auth.issuer` the server knows nobody: anyone who reaches it may run the tools. So a request that
carries a `Forwarded` or `X-Forwarded-For` header (it came through a proxy, maybe from anywhere), or a
`Host` other than a loopback name or address (a DNS-rebinding page in the local browser, or a proxy that
passed the public name on), is refused with 403 before the MCP layer sees it, whatever address the
server listens on. With authentication configured every request must carry a valid token instead, and
these headers are allowed (a reverse proxy in front of replicas sets them).
"""

from __future__ import annotations

import ipaddress
import json

from .asgi import App, Receive, Scope, Send

__all__ = ["is_loopback_host", "loopback_only"]


_PROXY_HEADERS = {b"forwarded": "Forwarded", b"x-forwarded-for": "X-Forwarded-For"}


def is_loopback_host(value: str) -> bool:
    """Whether a `Host` header names this machine's loopback (`localhost`, `127.0.0.1:8765`, `[::1]:80`)."""
    host = value.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refusal(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        lowered = name.lower()
        if lowered in _PROXY_HEADERS:
            return f"it came through a proxy ({_PROXY_HEADERS[lowered]} header)"
        if lowered == b"host" and not is_loopback_host(value.decode("latin-1")):
            return f"its Host ({value.decode('latin-1')[:100]}) is not a loopback name"
    return None


def loopback_only(app: App) -> App:
    """`app` refusing (403) the requests that did not come from a local client directly (see the module)."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            why = _refusal(list(scope.get("headers") or ()))
            if why is not None:
                text = (
                    f"toolrt serve without authentication (auth.issuer) serves local clients only, and this request "
                    f"is not one: {why}. Configure auth.issuer to serve through a proxy."
                )
                payload = json.dumps({"error": text}).encode()
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
                await send({"type": "http.response.start", "status": 403, "headers": headers})
                await send({"type": "http.response.body", "body": payload})
                return
        await app(scope, receive, send)

    return guarded
