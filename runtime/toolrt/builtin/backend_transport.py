"""An httpx2 transport whose connections are made by a network backend of our choosing.

httpcore2's connection pool takes a network backend (`network_backend=`, its public way to decide how a
connection is made); httpx2's own transport offers no such option. This transport is the small bridge:
httpx2's request to httpcore2's and the response back, httpcore2's errors as httpx2's of the same name.
Imported only when a fetch runs (httpx2 and httpcore2 are not loaded for a snapshot).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

import httpcore2
import httpx2

__all__ = ["BackendTransport"]


def _as_httpx(error: Exception) -> Exception:
    """httpcore2's `error` as the httpx2 error of the same name (its message kept); any other as itself."""
    if not type(error).__module__.startswith("httpcore2"):
        return error
    mapped = getattr(httpx2, type(error).__name__, None)
    if isinstance(mapped, type) and issubclass(mapped, httpx2.TransportError):
        return mapped(str(error))
    return httpx2.TransportError(str(error))


class _Body(httpx2.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except Exception as error:
            mapped = _as_httpx(error)
            if mapped is error:
                raise
            raise mapped from error

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class BackendTransport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 over TLS with the default certificate store, every connection made by `network_backend`."""

    def __init__(self, network_backend: httpcore2.AsyncNetworkBackend) -> None:
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(), network_backend=network_backend
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        assert isinstance(request.stream, httpx2.AsyncByteStream)
        url = request.url
        core = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core)
        except Exception as error:
            mapped = _as_httpx(error)
            if mapped is error:
                raise
            raise mapped from error
        assert isinstance(response.stream, AsyncIterable)  # the async pool's
        return httpx2.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
