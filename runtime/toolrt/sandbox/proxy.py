"""toolrt's network proxy: HTTP (absolute-form requests and CONNECT) and SOCKS5 for sandboxed processes.

A process whose `network:` names hosts runs in a network namespace of its own with only a loopback
device, where a listener on 127.0.0.1 (see `loopback`) is the one thing it can reach; toolrt accepts
its connections from that listener here, in one event loop thread per toolrt process, started on first
use. Each connection is checked before anything leaves the machine:

- the name and port against the rules (`netrules`);
- the name resolved once, on the host; a loopback, private, link-local, CGNAT or multicast address (or
  one of this machine's own) is refused unless the host's list names the host exactly; the connection
  goes to the address that was checked (no second lookup a rebinding DNS server could answer);
- a tunnel (CONNECT, SOCKS5) carries TLS only: its first bytes must be a ClientHello whose server name
  is the name asked for, or nothing is connected (an HTTP request smuggled through an allowed tunnel,
  a ClientHello for another host behind an allowed name's address);
- an absolute-form request's `Host` header must name the URL's host; a request head over 64 KiB is
  refused (431).

Every refusal is kept on the process's `ProxySession`, which the call reports (see `execute.process`).
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.tls import TLSStream

from ..addresses import address_forms, ip_literal, private_address
from .credentials import Masked, authority
from .netrules import NetworkRules
from .starring import Starring

__all__ = ["ProxySession", "Refusal", "proxy_running", "serve", "stop_proxy", "trust_upstream", "use_resolver"]

MAX_CONNECTIONS = 128
"""The most connections one sandboxed process may have open through the proxy at once."""
MAX_REFUSALS = 1000
"""The most distinct refusals kept for one process (a flood of refused connections must not grow memory)."""
MAX_HEAD = 64 * 1024
"""The longest request head (request line and headers) the proxy reads."""
CONNECT_TIMEOUT = 10.0
_FIRST_BYTES_TIMEOUT = 30.0
_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Refusal:
    """One connection the proxy refused."""

    host: str
    port: int
    rule: str
    """What decided: the rule (`not in the allow list (host list)`, `deny: *.evil.test`) or the check."""
    listed: bool = True
    """Whether a change to the allow list would let it through (not so for a flood, a malformed request,
    or a reply the proxy could not redact): only then does the message say how to ask for it."""

    def describe(self) -> str:
        if not self.listed:
            where = "a connection" if self.host == "?" else f"{self.host}:{self.port}"
            return f"toolrt's network proxy refused {where}: {self.rule}"
        fix = (
            f"if the task needs it, ask the person to add '{self.host}' (or '{self.host}:{self.port}') to "
            "sandbox.network.allow in the host's settings (the user settings file, TOOLRT_SANDBOX__NETWORK)"
        )
        return f"toolrt's network proxy refused {self.host}:{self.port}: {self.rule}; {fix}"


@dataclass(slots=True)
class ProxySession:
    """The proxy's side of one sandboxed process: its listener, and what was refused to it."""

    rules: NetworkRules
    masked: tuple[Masked, ...] = ()
    """The process's masked credentials (see `credentials`): TLS to their hosts is intercepted."""
    refused: list[Refusal] = field(default_factory=list)
    """Each distinct refusal, the first MAX_REFUSALS of them."""
    connected: list[tuple[str, int]] = field(default_factory=list)
    """(host, port) of each connection let through."""
    open: int = 0
    """Connections from the process the proxy holds now."""
    _scope: anyio.CancelScope | None = None
    _closed: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        """Stop accepting (the listener is closed; connections already made go on until they end)."""
        self._closed.set()
        proxy = _proxy
        if proxy is not None and self._scope is not None:
            try:
                proxy.call(self._scope.cancel)
            except RuntimeError:
                pass  # the loop has stopped: the listener went with it


_resolver: Callable[[str], Sequence[str]] | None = None
_upstream_ca: str | None = None


def trust_upstream(cafile: str | None) -> None:
    """Test-only: verify intercepted upstream servers against `cafile` instead of the system's authorities.
    Only Python code in toolrt's own process can set it."""
    global _upstream_ca
    _upstream_ca = cafile


def use_resolver(resolve: Callable[[str], Sequence[str]] | None) -> None:
    """Test-only: resolve names with `resolve` (name → addresses) instead of DNS. Only Python code in
    toolrt's own process can set it (no setting, file or variable reaches it)."""
    global _resolver
    _resolver = resolve


class _Proxy:
    """The proxy's event loop, in a daemon thread (it must not keep the interpreter from exiting)."""

    def __init__(self) -> None:
        ready = threading.Event()
        self.portal: anyio.from_thread.BlockingPortal | None = None

        async def run() -> None:
            async with anyio.from_thread.BlockingPortal() as portal:
                self.portal = portal
                ready.set()
                await portal.sleep_until_stopped()

        self.thread = threading.Thread(target=anyio.run, args=(run,), name="toolrt-network-proxy", daemon=True)
        self.thread.start()
        ready.wait()

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        assert self.portal is not None
        return self.portal.call(function, *args)

    def start(self, function: Callable[..., Any], *args: Any) -> None:
        assert self.portal is not None
        self.portal.start_task_soon(function, *args)

    def stop(self) -> None:
        assert self.portal is not None
        self.portal.call(self.portal.stop, True)  # cancels every task: each listener and connection is closed
        self.thread.join()


_lock = threading.Lock()
_proxy: _Proxy | None = None


def _running_proxy() -> _Proxy:
    global _proxy
    with _lock:
        if _proxy is None:
            _proxy = _Proxy()
        return _proxy


def proxy_running() -> bool:
    return _proxy is not None


def stop_proxy() -> None:
    """End the proxy's thread: every listener and connection it holds is closed (a process using it then
    reaches nothing). The next `serve` starts a new one."""
    global _proxy
    with _lock:
        proxy, _proxy = _proxy, None
    if proxy is not None:
        proxy.stop()


def serve(
    listener: int, rules: NetworkRules, pidfd: int | None = None, masked: tuple[Masked, ...] = ()
) -> ProxySession:
    """Accept a sandboxed process's connections from `listener` (taken over) under `rules`, until the
    session is closed, the process behind `pidfd` (taken over) ends, or the proxy stops; with `masked`
    credentials put in their declared header toward their declared host."""
    session = ProxySession(rules, masked)
    proxy = _running_proxy()
    ready = threading.Event()
    proxy.start(_accept, listener, session, pidfd, ready)
    ready.wait()
    return session


async def _accept(fd: int, session: ProxySession, pidfd: int | None, ready: threading.Event) -> None:
    listener = await anyio.abc.SocketListener.from_socket(socket.socket(fileno=fd))
    try:
        with anyio.CancelScope() as scope:
            session._scope = scope
            ready.set()
            if session._closed.is_set():
                return
            async with anyio.create_task_group() as group:
                if pidfd is not None:
                    group.start_soon(_end_with, pidfd, scope)
                await listener.serve(lambda stream: _handle(stream, session), group)
    finally:
        ready.set()
        if pidfd is not None:
            socket.close(pidfd)
        await listener.aclose()


async def _end_with(pidfd: int, scope: anyio.CancelScope) -> None:
    await anyio.wait_readable(pidfd)
    scope.cancel()


class _Refused(Exception):
    def __init__(self, host: str, port: int, rule: str, listed: bool = True) -> None:
        super().__init__(rule)
        self.refusal = Refusal(host, port, rule, listed)


async def _handle(client: anyio.abc.SocketStream, session: ProxySession) -> None:
    async with client:
        if session.open >= MAX_CONNECTIONS:  # each one holds a descriptor of the whole toolrt process
            _refuse(session, Refusal("?", 0, f"more than {MAX_CONNECTIONS} connections open at once", listed=False))
            return
        session.open += 1
        reader = BufferedByteReceiveStream(client)
        try:
            with anyio.fail_after(_FIRST_BYTES_TIMEOUT):
                first = await reader.receive_exactly(1)
            if first == b"\x05":
                await _socks5(client, reader, session)
            else:
                await _http(client, reader, first, session)
        except _Refused as refused:
            _refuse(session, refused.refusal)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError, TimeoutError):
            pass
        except (ValueError, UnicodeError, OverflowError):  # a malformed request: that connection ends
            pass
        finally:
            session.open -= 1


def _refuse(session: ProxySession, refusal: Refusal) -> None:
    if len(session.refused) < MAX_REFUSALS and refusal not in session.refused:
        session.refused.append(refusal)


async def _destination(host: str, port: int, rules: NetworkRules) -> str:
    """The checked address to connect to for `host:port`, resolved once on the host."""
    if not 0 < port < 65536:
        raise _Refused(host, port, "no such port")
    verdict = rules.decide(host, port)
    if not verdict.allowed:
        raise _Refused(host, port, verdict.rule)
    literal = ip_literal(host.strip("[]"))
    if literal is not None:
        addresses = [str(literal)]
    elif _resolver is not None:
        addresses = list(_resolver(host))
    else:
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            raise _Refused(host, port, f"the name does not resolve ({error})") from error
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise _Refused(host, port, "the name does not resolve")
    own = _own_addresses()
    inside = [a for a in addresses if private_address(a) or not address_forms(a).isdisjoint(own)]
    if inside and not verdict.named:
        raise _Refused(
            host,
            port,
            f"it resolves to {inside[0]}, inside this machine or its network (allowed only when the host's "
            "list names the host exactly)",
        )
    return addresses[0]


_own: tuple[float, frozenset[str]] | None = None
_OWN_SECONDS = 5.0
"""How long the machine's own addresses are kept before they are read again (an interface may change)."""


def _own_addresses() -> frozenset[str]:
    """This machine's own addresses: every interface's, as the kernel lists them (IPv4: the LOCAL routes of
    /proc/net/fib_trie; IPv6: /proc/net/if_inet6), and its name's. Read again after `_OWN_SECONDS`."""
    global _own
    now = time.monotonic()
    if _own is not None and now - _own[0] < _OWN_SECONDS:
        return _own[1]
    found: set[str] = set()
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
        found.update(str(info[4][0]) for info in infos)
    except OSError:
        pass
    found.update(_interface_addresses())
    _own = (now, frozenset(found))
    return _own[1]


def _interface_addresses() -> set[str]:
    found: set[str] = set()
    try:
        with open("/proc/net/fib_trie", encoding="ascii") as trie:
            last = ""
            for line in trie:
                text = line.strip()
                if text.startswith(("|--", "+--")):
                    last = text[3:].strip().split("/")[0]
                elif text == "/32 host LOCAL" and last:
                    found.add(last)
    except OSError:
        pass
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as table:
            for line in table:
                digits = line.split()[0] if line.strip() else ""
                if len(digits) == 32:
                    found.add(str(ipaddress.IPv6Address(bytes.fromhex(digits))))
    except (OSError, ValueError):
        pass
    return found


async def _http(
    client: anyio.abc.SocketStream, reader: BufferedByteReceiveStream, first: bytes, session: ProxySession
) -> None:
    try:
        with anyio.fail_after(_FIRST_BYTES_TIMEOUT):  # a head that never ends (slowloris) is not waited for
            head = first + await _receive_head(reader)
    except anyio.DelimiterNotFound:
        await client.send(b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n")
        raise _Refused("?", 0, f"a request head over {MAX_HEAD} bytes", listed=False) from None
    line, *header_lines = head.split(b"\r\n")
    parts = line.split(b" ")
    if len(parts) != 3:
        await client.send(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
        return
    method, target, version = parts
    headers = [h.partition(b":") for h in header_lines]
    if method == b"CONNECT":
        host, port = _authority(target.decode("latin-1"), 443)
        try:
            address = await _destination(host, port, session.rules)
        except _Refused:
            await client.send(_refused_response(host, port))
            raise
        await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await _tunnel(client, reader, host, port, address, session)
        return
    url = urlsplit(target.decode("latin-1"))
    if url.scheme != "http" or not url.hostname:
        await client.send(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
        return
    host, port = url.hostname, url.port or 80
    named = [v.strip().decode("latin-1").lower() for k, _, v in headers if k.strip().lower() == b"host"]
    if len(named) > 1 or (named and _authority(named[0], 80) != (host.lower(), port)):
        await client.send(_refused_response(host, port))
        raise _Refused(host, port, f"the Host header ({', '.join(named)}) names another host than the URL")
    try:
        address = await _destination(host, port, session.rules)
    except _Refused:
        await client.send(_refused_response(host, port))
        raise
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = [
        k + b":" + v
        for k, _, v in headers
        if k.strip().lower() not in (b"connection", b"proxy-connection", b"proxy-authorization", b"keep-alive", b"")
    ]
    request = b"\r\n".join([method + b" " + path.encode("latin-1") + b" " + version, *kept, b"Connection: close"])
    upstream = await _connect(address, port)
    session.connected.append((host, port))
    async with upstream:
        await upstream.send(request + b"\r\n\r\n" + reader.buffer)
        await _relay(client, upstream)


async def _socks5(client: anyio.abc.SocketStream, reader: BufferedByteReceiveStream, session: ProxySession) -> None:
    with anyio.fail_after(_FIRST_BYTES_TIMEOUT):
        found = await _socks5_request(client, reader)
    if found is None:
        return
    host, port, command = found
    if command != 1:  # CONNECT only: no BIND, no UDP
        await client.send(b"\x05\x07\x00\x01" + bytes(6))
        raise _Refused(host, port, "SOCKS5 BIND and UDP are not offered")
    try:
        address = await _destination(host, port, session.rules)
    except _Refused:
        await client.send(b"\x05\x02\x00\x01" + bytes(6))  # connection not allowed by ruleset
        raise
    await client.send(b"\x05\x00\x00\x01" + bytes(6))
    await _tunnel(client, reader, host, port, address, session)


async def _socks5_request(
    client: anyio.abc.SocketStream, reader: BufferedByteReceiveStream
) -> tuple[str, int, int] | None:
    """(host, port, command) of a SOCKS5 request; None when it was answered already (no usable method
    or address type)."""
    (count,) = await reader.receive_exactly(1)
    methods = await reader.receive_exactly(count)
    if 0 not in methods:
        await client.send(b"\x05\xff")
        return None
    await client.send(b"\x05\x00")
    version, command, _, kind = await reader.receive_exactly(4)
    if kind == 1:
        host = socket.inet_ntop(socket.AF_INET, await reader.receive_exactly(4))
    elif kind == 4:
        host = socket.inet_ntop(socket.AF_INET6, await reader.receive_exactly(16))
    elif kind == 3:
        (length,) = await reader.receive_exactly(1)
        host = (await reader.receive_exactly(length)).decode("latin-1")
    else:
        await client.send(b"\x05\x08\x00\x01" + bytes(6))
        return None
    port = int.from_bytes(await reader.receive_exactly(2), "big")
    return host, port, command if version == 5 else 0


async def _tunnel(
    client: anyio.abc.SocketStream,
    reader: BufferedByteReceiveStream,
    host: str,
    port: int,
    address: str,
    session: ProxySession,
) -> None:
    """Connect `address` once the client's first TLS record names `host`, then relay."""
    with anyio.fail_after(_FIRST_BYTES_TIMEOUT):
        record = await reader.receive_exactly(5)
        if record[0] != 0x16:
            raise _Refused(host, port, "the tunnel's first bytes are not a TLS handshake (a tunnel carries TLS only)")
        record += await reader.receive_exactly(int.from_bytes(record[3:5], "big"))
    sni = server_name(record)
    wanted = host.strip("[]").rstrip(".").lower()
    if sni is None and ip_literal(wanted) is None or sni is not None and sni.rstrip(".").lower() != wanted:
        raise _Refused(host, port, f"the TLS ClientHello names '{sni or 'no server'}', not {host}")
    masked = tuple(m for m in session.masked if m.host == wanted)
    if masked:
        await _intercept(client, record + reader.buffer, host, port, address, masked, session)
        return
    upstream = await _connect(address, port)
    session.connected.append((host, port))
    async with upstream:
        await upstream.send(record + reader.buffer)
        await _relay(client, upstream)


async def _connect(address: str, port: int) -> anyio.abc.SocketStream:
    with anyio.fail_after(CONNECT_TIMEOUT):
        return await anyio.connect_tcp(address, port)


async def _relay(
    client: anyio.abc.ByteStream,
    upstream: anyio.abc.ByteStream,
    redact: tuple[Masked, ...] = (),
    refuse: Callable[[str], None] | None = None,
) -> None:
    """Copy both ways until either side ends (what `reader` had buffered was sent already); each real
    value of `redact` that comes back from upstream is starred out (same length: the framing holds),
    and a response with a compressed body (where it could not be found) is not let in at all."""
    secrets = [m.value.encode() for m in redact]
    async with anyio.create_task_group() as group:
        group.start_soon(_copy, client, upstream, group.cancel_scope)
        if secrets:
            group.start_soon(_redacted, upstream, client, group.cancel_scope, Starring(secrets), refuse)
        else:
            group.start_soon(_copy, upstream, client, group.cancel_scope)


async def _copy(
    source: anyio.abc.ByteReceiveStream, target: anyio.abc.ByteSendStream, relay: anyio.CancelScope
) -> None:
    """Copy until `source` ends or `target` breaks, then end the `relay` (both ways)."""
    try:
        async for chunk in source:
            await target.send(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    finally:
        relay.cancel()


async def _redacted(
    source: anyio.abc.ByteReceiveStream,
    target: anyio.abc.ByteSendStream,
    relay: anyio.CancelScope,
    starring: Starring,
    refuse: Callable[[str], None] | None,
) -> None:
    """Copy an upstream's response with the real values starred out, or none of it when its body is compressed."""
    answer = BufferedByteReceiveStream(source)
    try:
        head = await _receive_head(answer)
    except (anyio.DelimiterNotFound, anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError):
        relay.cancel()
        return
    unredactable = _unredactable(head)
    if unredactable:  # a compressed echo of the real value could not be starred out: nothing of it goes in
        if refuse is not None:
            refuse(f"{unredactable}: toolrt could not redact it")
        relay.cancel()
        return
    try:
        try:
            if ready := starring.feed(head + b"\r\n\r\n" + answer.buffer):
                await target.send(ready)
            async for chunk in source:
                if ready := starring.feed(chunk):
                    await target.send(ready)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # an upstream that ends without TLS's close_notify: what it sent still goes on
        if starring.pending:  # shorter than any secret, and checked with the bytes before it
            await target.send(starring.pending)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    finally:
        relay.cancel()


class _Replay(anyio.abc.ByteStream):
    """`stream`, whose first bytes (already read from it) are `first`."""

    def __init__(self, stream: anyio.abc.SocketStream, first: bytes) -> None:
        self.stream, self.first = stream, first

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        if self.first:
            data, self.first = self.first[:max_bytes], self.first[max_bytes:]
            return data
        return await self.stream.receive(max_bytes)

    async def send(self, item: bytes) -> None:
        await self.stream.send(item)

    async def send_eof(self) -> None:
        await self.stream.send_eof()

    async def aclose(self) -> None:
        await self.stream.aclose()


async def _intercept(
    client: anyio.abc.SocketStream,
    first: bytes,
    host: str,
    port: int,
    address: str,
    masked: tuple[Masked, ...],
    session: ProxySession,
) -> None:
    """TLS to a masked credential's host: ended here with the per-run authority's certificate, the
    request's declared header given the real value, the response's real value starred out."""
    with anyio.fail_after(_FIRST_BYTES_TIMEOUT):
        inner = await TLSStream.wrap(
            _Replay(client, first), server_side=True, ssl_context=authority().server_context(host.lower())
        )
        reader = BufferedByteReceiveStream(inner)
        try:
            head = await _receive_head(reader)
        except anyio.DelimiterNotFound:
            raise _Refused(host, port, f"a request head over {MAX_HEAD} bytes", listed=False) from None
    try:
        request = with_credentials(head, masked)
    except ValueError as error:
        _refuse(session, Refusal(host, port, str(error), listed=False))  # said before the process can see the answer
        async with inner:
            await inner.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return
    context = ssl.create_default_context(cafile=_upstream_ca)
    with anyio.fail_after(CONNECT_TIMEOUT):
        upstream = await anyio.connect_tcp(address, port, tls=True, ssl_context=context, tls_hostname=host)
    session.connected.append((host, port))
    async with upstream, inner:
        await upstream.send(request + b"\r\n\r\n" + reader.buffer)

        def refuse(rule: str) -> None:
            _refuse(session, Refusal(host, port, rule, listed=False))

        await _relay(inner, upstream, redact=masked, refuse=refuse)


def _unredactable(head: bytes) -> str:
    """Why the body after a response head could hide a real value from the starring: content or transfer
    codings other than `identity` and `chunked`, or an interim response (`100 Continue`, `101 Switching
    Protocols`) whose final response's head would not be looked at; empty when it could not."""
    line, *headers = head.split(b"\r\n")
    status = line.split(b" ")[1:2]
    if status and status[0].startswith(b"1"):
        return f"an interim response ({line.decode('latin-1')})"
    found = []
    for header in headers:
        name, _, value = header.partition(b":")
        if name.strip().lower() in (b"content-encoding", b"transfer-encoding"):
            found += [c.strip() for c in value.decode("latin-1").lower().split(",")]
    encodings = ", ".join(c for c in found if c not in ("", "identity", "chunked"))
    return f"the response is encoded ({encodings})" if encodings else ""


_NOT_SENT = (
    *(b"connection", b"keep-alive", b"proxy-connection", b"accept-encoding", b"te", b"expect", b"upgrade"),
    *(b"range", b"if-range"),  # an echo cut in pieces shorter than the value would pass the starring
)


def with_credentials(head: bytes, masked: tuple[Masked, ...]) -> bytes:
    """A request head with each mask's placeholder replaced by the real value in its declared header only
    (never the request line or another header), asking the server for a whole, uncompressed reply (one
    the proxy can redact: no `Range`, `Accept-Encoding: identity`) and to close the connection after it
    (each next request comes on a new connection, whose head is rewritten again). A head with a line a
    server could join to another header (a folded line, a space in a name) is refused (ValueError)."""
    line, *headers = head.split(b"\r\n")
    kept = [line]
    for header in headers:
        if not header:
            continue
        name, colon, value = header.partition(b":")
        if not colon or name != name.strip() or not name or b" " in name or b"\t" in name:
            raise ValueError("a header line toolrt will not rewrite (folded, or a space in its name)")
        key = name.lower()
        if key in _NOT_SENT:
            continue
        for mask in masked:
            if key == mask.header.lower().encode():
                value = value.replace(mask.placeholder.encode(), mask.value.encode())
        kept.append(name + colon + value)
    return b"\r\n".join([*kept, b"Accept-Encoding: identity", b"Connection: close"])


def _authority(text: str, default_port: int) -> tuple[str, int]:
    """(host, port) of `host`, `host:port`, `[v6]:port`; the host lower case."""
    host, port = text.strip(), default_port
    if host.startswith("["):
        inner, _, rest = host[1:].partition("]")
        host = inner
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
    elif host.count(":") == 1:
        host, _, tail = host.partition(":")
        port = int(tail) if tail.isdigit() else -1
    return host.lower(), port


async def _receive_head(reader: BufferedByteReceiveStream) -> bytes:
    """A head up to its blank line, at most `MAX_HEAD` bytes however it arrived (`receive_until` returns a
    longer one whose end came in the same read); raises `anyio.DelimiterNotFound` past that."""
    head = await reader.receive_until(b"\r\n\r\n", MAX_HEAD)
    if len(head) > MAX_HEAD:
        raise anyio.DelimiterNotFound(MAX_HEAD)
    return head


def _refused_response(host: str, port: int) -> bytes:
    body = f"toolrt's network proxy refused {host}:{port}; the call's result says why\n".encode()
    return (
        b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def server_name(record: bytes) -> str | None:
    """The SNI host name of a TLS record holding a whole ClientHello; None when it has none (or is
    malformed, or not a ClientHello)."""
    try:
        if record[0] != 0x16 or record[5] != 0x01:
            return None
        at = 5 + 4 + 2 + 32  # record header, handshake header, version, random
        at += 1 + record[at]  # session id
        at += 2 + int.from_bytes(record[at : at + 2], "big")  # cipher suites
        at += 1 + record[at]  # compression methods
        end = at + 2 + int.from_bytes(record[at : at + 2], "big")
        at += 2
        while at + 4 <= end:
            kind = int.from_bytes(record[at : at + 2], "big")
            size = int.from_bytes(record[at + 2 : at + 4], "big")
            body = record[at + 4 : at + 4 + size]
            if kind == 0 and len(body) >= 5 and body[2] == 0:
                length = int.from_bytes(body[3:5], "big")
                return body[5 : 5 + length].decode("ascii")
            at += 4 + size
    except (IndexError, UnicodeDecodeError):
        return None
    return None
