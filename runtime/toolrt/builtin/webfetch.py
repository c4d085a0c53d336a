"""The `webfetch` tool: GET one http(s) URL, at most 5 MB, returned as markdown, text or HTML (OpenCode §14).

httpx2, markdownify and bs4 are imported inside the call: loading this module for a snapshot
must not cost their import time.
"""

from __future__ import annotations

import base64
import posixpath
import re
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio

from ..addresses import private_address
from ..call.context import ToolContext
from ..errors import ToolFailure
from ..permissions.model import CallSite, PermissionRequest

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_RESPONSE_SIZE",
    "MAX_TIMEOUT",
    "html_to_markdown",
    "html_to_text",
    "permission_requests",
    "private_address",
    "webfetch",
]

MAX_RESPONSE_SIZE = 5 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 120.0
TOO_LARGE = "Response too large (exceeds 5MB limit)"

_ACCEPT = {
    "markdown": "text/markdown;q=1.0, text/x-markdown;q=0.9, text/plain;q=0.8, text/html;q=0.7, */*;q=0.1",
    "text": "text/plain;q=1.0, text/markdown;q=0.9, text/html;q=0.8, */*;q=0.1",
    "html": "text/html;q=1.0, application/xhtml+xml;q=0.9, text/plain;q=0.8, text/markdown;q=0.7, */*;q=0.1",
}
_USER_AGENT = "Mozilla/5.0 (compatible; toolrt-webfetch/0.1; +https://github.com/toolrt)"
# Never content for a reader: dropped before converting, with their text.
_INVISIBLE = ("script", "style", "noscript", "template", "iframe", "object", "embed", "meta", "link")
_BLOCKS = (
    "p", "div", "section", "article", "header", "footer", "nav", "aside", "main", "h1", "h2", "h3", "h4", "h5",
    "h6", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "pre", "blockquote", "figure", "figcaption", "form",
    "title", "hr",
)  # fmt: skip
# SVG is markup the model can read; OpenCode also keeps this odd image type as text.
_TEXT_IMAGES = frozenset({"image/svg+xml", "image/vnd.fastbidsheet"})


def permission_requests(args: Mapping[str, Any], site: CallSite) -> tuple[PermissionRequest, ...]:
    """`webfetch` on the URL (always `*`), plus `private_network` on the host when the URL names an
    address inside the network (the defaults ask: a model must not reach local services unseen)."""
    url = str(args.get("url", ""))
    requests = [PermissionRequest("webfetch", (url,), ("*",))]
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        # A host the URL parser refuses (`[127.0.0.1]`) cannot be proved public: ask for it as written.
        requests.append(PermissionRequest("private_network", (url,), (url,), {"url": url}))
        return tuple(requests)
    if host and private_address(host):
        requests.append(PermissionRequest("private_network", (host,), (host,), {"url": url}))
    return tuple(requests)


async def _check_resolved(url: str, ctx: ToolContext) -> tuple[tuple[str, ...], str]:
    """Resolve the URL's host once: ask `private_network` when a public-looking name resolves to an address
    inside the network, and give back the addresses checked (the connection is pinned to them) or, when the
    name does not resolve, the resolver's message."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not host:
        return (), ""  # httpx reports it
    try:
        infos = await anyio.getaddrinfo(
            host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except OSError as error:
        return (), f"{host} does not resolve: {error}"
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    inside = sorted(address for address in addresses if private_address(address))
    if inside and not private_address(host):  # a private host was already asked by `permission_requests`
        await ctx.ask("private_network", [host], always=[host], metadata={"url": url, "addresses": inside})
    return addresses, ""


def _invalid_url(url: str, error: Exception) -> ToolFailure:
    return ToolFailure(f"{url} is not a valid URL: {error}. Give an http(s) URL such as https://example.com/.")


async def webfetch(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Fetch `url` and return its body in `format` (markdown by default); images come back as an attachment.

    Raises ToolFailure for a non-http(s) URL, a non-2xx status, a body over 5 MB (checked while
    streaming, not only from Content-Length), a timeout, or a network error.
    """
    url = str(args["url"])
    if not url.startswith(("http://", "https://")):
        raise ToolFailure("URL must start with http:// or https://")
    try:
        urlsplit(url).port  # noqa: B018 (parses the host and port, raising for a malformed one)
    except ValueError as error:
        raise _invalid_url(url, error) from None
    output_format = str(args.get("format") or "markdown")
    if output_format not in _ACCEPT:
        raise ToolFailure(f"Unknown format {output_format!r}: use one of markdown, text, html.")
    timeout = min(float(args.get("timeout") or DEFAULT_TIMEOUT), MAX_TIMEOUT)
    if timeout <= 0:
        raise ToolFailure(f"timeout must be a positive number of seconds (at most 120), got {timeout:g}.")

    pinned = await _check_resolved(url, ctx)
    failure: ToolFailure | None = None
    download: tuple[str, bytes] | None = None
    # Failures are carried out of the task group by hand: raised inside it they would arrive wrapped.
    async with anyio.create_task_group() as group:
        group.start_soon(_cancel_on_abort, ctx.abort, group.cancel_scope)
        with anyio.move_on_after(timeout):
            try:
                download = await _download(url, _ACCEPT[output_format], *pinned)
            except ToolFailure as error:
                failure = error
        group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    if ctx.abort.is_set() and download is None:
        raise ToolFailure(f"Fetching {url} was aborted.")
    if download is None:
        raise ToolFailure(
            f"Request timed out after {timeout:g} seconds: {url}. Try again with a larger `timeout` (at most 120), "
            "or fetch another URL."
        )
    return _present(url, output_format, *download)


def _not_followed(url: str, target: str) -> ToolFailure:
    """The refusal of a redirect from `url` into the network (`target` says where it led)."""
    return ToolFailure(
        f"{url} redirected to {target} inside the network; it was not followed. "
        "Fetch that URL directly if it is really needed, so the person can approve it."
    )


def _refuse_private_redirect(url: str) -> Any:
    """A request hook: a redirect may not lead into the network unless the URL itself pointed there."""
    allowed = urlsplit(url).hostname or ""

    async def check(request: httpx2.Request) -> None:
        host = request.url.host
        if host == allowed:
            return
        if private_address(host):
            raise _not_followed(url, f"{request.url}, an address")
        # A public-looking name is checked by what it resolves to, like the URL the call started with.
        try:
            infos = await anyio.getaddrinfo(host, request.url.port or (443 if request.url.scheme == "https" else 80))
        except OSError:
            return  # unresolvable: the request itself fails with the resolver's message
        inside = sorted({str(info[4][0]) for info in infos if private_address(str(info[4][0]))})
        if inside:
            raise _not_followed(url, f"{request.url}, which resolves to {', '.join(inside)}")

    return check


def _pinned_transport(url: str, addresses: tuple[str, ...], unresolved: str) -> httpx2.AsyncBaseTransport:
    """A transport that connects to the addresses checked before the fetch, not to what the name resolves to
    by the time of connecting (DNS rebinding); the request keeps the name, so the Host header, TLS SNI and
    certificate check are for the name. A redirect to another host is resolved once, at connect time, and
    refused when any of its addresses is inside the network.

    Never through a proxy: the environment's `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` are ignored (the
    client does not trust the environment, and the transport, httpcore2's pool over the pinned network
    backend, has no proxy), since a proxy resolves and connects on its own
    and would carry the request past both the pinning and the private-address checks. The certificate
    store is the default one (`SSL_CERT_FILE` and `SSL_CERT_DIR` still add trust; they choose no route)."""
    import httpcore2
    import httpx2

    from .backend_transport import BackendTransport

    start_host = httpx2.URL(url).raw_host.decode("ascii")

    class PinnedBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self) -> None:
            self._network = httpcore2.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> httpcore2.AsyncNetworkStream:
            targets = addresses if host == start_host else await _resolve_outside(host, port, url)
            if not targets:
                raise httpcore2.ConnectError(unresolved or f"{host} resolved to no address")
            failure: httpcore2.ConnectError | None = None
            for address in targets:
                try:
                    return await self._network.connect_tcp(address, port, timeout, local_address, socket_options)
                except httpcore2.ConnectError as error:
                    failure = error
            assert failure is not None
            raise failure

        async def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Any = None
        ) -> httpcore2.AsyncNetworkStream:
            raise httpcore2.ConnectError("webfetch does not connect to unix sockets")

        async def sleep(self, seconds: float) -> None:
            await self._network.sleep(seconds)

    return BackendTransport(PinnedBackend())


async def _resolve_outside(host: str, port: int, url: str) -> tuple[str, ...]:
    """The addresses of a redirect's host, resolved once; refused when any is inside the network."""
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return ()
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    inside = sorted(address for address in addresses if private_address(address))
    if inside or private_address(host):
        raise _not_followed(url, f"{host}, which resolves to {', '.join(inside) or host}")
    return addresses


async def _download(url: str, accept: str, addresses: tuple[str, ...], unresolved: str) -> tuple[str, bytes]:
    import httpx2

    headers = {"User-Agent": _USER_AGENT, "Accept": accept, "Accept-Language": "en-US,en;q=0.9"}
    try:
        async with (
            httpx2.AsyncClient(
                transport=_pinned_transport(url, addresses, unresolved),
                follow_redirects=True,
                timeout=None,
                trust_env=False,  # no HTTP(S)_PROXY / ALL_PROXY / NO_PROXY: a proxy would resolve the name itself
                event_hooks={"request": [_refuse_private_redirect(url)]},
            ) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            if not response.is_success:
                raise ToolFailure(f"Request failed with status code: {response.status_code}")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_RESPONSE_SIZE:
                raise ToolFailure(TOO_LARGE)
            body = await _read_capped(response)
            return response.headers.get("content-type", ""), body
    except httpx2.InvalidURL as error:  # what the standard library let through (Python 3.10 takes `[127.0.0.1]`)
        raise _invalid_url(url, error) from error
    except httpx2.HTTPError as error:
        raise ToolFailure(f"Could not fetch {url}: {type(error).__name__}: {error or 'no details'}") from error


async def _read_capped(response: httpx2.Response) -> bytes:
    """The decoded body, refused as soon as it passes the cap (a lying or absent Content-Length changes nothing)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_RESPONSE_SIZE:
            raise ToolFailure(TOO_LARGE)
    return bytes(body)


async def _cancel_on_abort(abort: anyio.Event, scope: anyio.CancelScope) -> None:
    await abort.wait()
    scope.cancel()


def _present(url: str, output_format: str, content_type: str, body: bytes) -> dict[str, Any]:
    mime = content_type.split(";")[0].strip().lower()
    title = f"{url} ({content_type})"
    if mime.startswith("image/") and mime not in _TEXT_IMAGES:
        attachment = {
            "type": "file",
            "mime": mime,
            "url": f"data:{mime};base64,{base64.b64encode(body).decode('ascii')}",
            "filename": posixpath.basename(urlsplit(url).path) or "image",
        }
        return {"title": title, "output": "Image fetched successfully", "metadata": {}, "attachments": [attachment]}
    text = body.decode(_charset(content_type), "replace")
    if "text/html" in content_type and output_format == "markdown":
        text = html_to_markdown(text)
    elif "text/html" in content_type and output_format == "text":
        text = html_to_text(text)
    return {"title": title, "output": text, "metadata": {}}


def _charset(content_type: str) -> str:
    import codecs

    found = re.search(r"charset=[\"']?([\w.:-]+)", content_type, re.IGNORECASE)
    if found:
        try:
            return codecs.lookup(found.group(1)).name
        except LookupError:
            pass
    return "utf-8"


def html_to_markdown(html: str) -> str:
    """HTML → markdown (ATX headings, `-` bullets, fenced code) without scripts, styles or embeds."""
    from markdownify import MarkdownConverter

    converter = MarkdownConverter(heading_style="ATX", bullets="-", code_language="", escape_underscores=False)
    return str(converter.convert_soup(_visible_soup(html))).strip()


def html_to_text(html: str) -> str:
    """HTML → its visible text, one block element per line, runs of blank lines collapsed."""
    soup = _visible_soup(html)
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for block in soup.find_all(_BLOCKS):
        block.insert_before("\n")
        block.append("\n")
    lines = (" ".join(line.split()) for line in soup.get_text().splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _visible_soup(html: str) -> Any:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(_INVISIBLE):
        tag.decompose()
    return soup
