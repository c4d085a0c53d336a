"""webfetch attacks: every IPv4 spelling `inet_aton` accepts, IPv6 forms that embed an IPv4 address,
a redirect to a host *name* that resolves inside the network, and DNS rebinding (a name public when checked,
127.0.0.1 when connected) against a real service on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpcore2
import httpx2
import pytest

from toolrt.builtin.webfetch import _refuse_private_redirect, private_address, webfetch
from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall
from toolrt.errors import DeniedError, ToolFailure
from toolrt.permissions.model import PermissionRequest


@pytest.mark.parametrize(
    "host",
    [
        "127.1",  # inet_aton's short forms
        "0x7f.1",
        "2130706433",  # one 32-bit number
        "0177.0.0.1",  # octal
        "0x7f000001",
        "10.1",
        "0xa9.0xfe.0xa9.0xfe",  # 169.254.169.254, the cloud metadata service
        "[::ffff:127.0.0.1]",  # IPv4-mapped
        "[::ffff:7f00:1]",
        "[64:ff9b::7f00:1]",  # NAT64 well-known prefix around 127.0.0.1
        "[64:ff9b:1::a00:1]",  # NAT64 local-use prefix
        "[2002:7f00:1::]",  # 6to4 around 127.0.0.1
        "[2002:a9fe:a9fe::1]",  # 6to4 around the metadata service
    ],
)
def test_every_spelling_of_an_inside_address_is_private(host: str) -> None:
    assert private_address(host)


@pytest.mark.parametrize("host", ["example.com", "8.8.8.8", "134744072", "[2606:4700::1111]", "[2002:808:808::]"])
def test_public_addresses_stay_public(host: str) -> None:
    assert not private_address(host)


def test_a_redirect_to_a_name_resolving_inside_the_network_is_not_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def fake(host: str | bytes, *args: object, **kwargs: object) -> object:
        if host in ("innocent.example.com", b"innocent.example.com"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80))]
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    check = _refuse_private_redirect("https://public.example.com/start")
    with pytest.raises(
        ToolFailure, match=r"redirected to http://innocent\.example\.com/admin, which resolves to 127\.0\.0\.1"
    ):
        anyio.run(check, httpx2.Request("GET", "http://innocent.example.com/admin"))


class _LocalService(BaseHTTPRequestHandler):
    """A service on 127.0.0.1 that a rebinding name must not reach unasked; it counts who reached it."""

    reached: ClassVar[list[str]] = []
    rebinding_port: ClassVar[int] = 0

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        if self.path == "/hop":  # a redirect to the rebinding name, on this same service
            self.send_response(302)
            self.send_header("Location", f"http://rebind.example.com:{self.rebinding_port}/secret")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.reached.append(self.path)
        body = b"local secret"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def local_service() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _LocalService)
    httpd.daemon_threads = True
    _LocalService.reached = []
    _LocalService.rebinding_port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


PUBLIC = "93.184.216.34"


@pytest.fixture
def rebinding_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`rebind.example.com` resolves to a public address the first time and to 127.0.0.1 afterwards; the
    network stays on this machine: a connection to the public address fails as if the internet were away.
    Gives the addresses connected to."""
    real_resolve = socket.getaddrinfo
    lookups: list[str] = []

    def resolve(host: str | bytes | None, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in ("rebind.example.com", b"rebind.example.com"):
            address = PUBLIC if not lookups else "127.0.0.1"
            lookups.append(address)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 80)))]
        return real_resolve(host, port, *args, **kwargs)

    real_connect = httpcore2.AnyIOBackend.connect_tcp
    connected: list[str] = []

    async def connect(self: Any, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        connected.append(host)
        if host == PUBLIC:
            raise httpcore2.ConnectError("no route to the internet in tests")
        return await real_connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(httpcore2.AnyIOBackend, "connect_tcp", connect)
    return connected


def _context(tmp_path: Path, asked: list[PermissionRequest], *, approve: bool) -> ToolContext:
    async def asker(requests: Any) -> None:
        asked.extend(requests)
        if not approve:
            raise DeniedError("private_network denied")

    return ToolContext(DetachedCall(tool_id="webfetch", root=tmp_path, data_dir=tmp_path / "data", ask=asker))


def test_a_rebinding_name_connects_to_the_address_it_was_checked_at(
    local_service: int, rebinding_dns: list[str], tmp_path: Path
) -> None:
    asked: list[PermissionRequest] = []
    ctx = _context(tmp_path, asked, approve=False)
    with pytest.raises(ToolFailure, match=r"Could not fetch .*ConnectError: no route to the internet"):
        anyio.run(webfetch, {"url": f"http://rebind.example.com:{local_service}/secret"}, ctx)
    assert rebinding_dns == [PUBLIC]  # the checked address, never the later 127.0.0.1
    assert _LocalService.reached == []
    assert asked == []  # public when checked: nothing to ask


def test_a_redirect_to_a_rebinding_name_is_refused_at_connect_time(
    local_service: int, rebinding_dns: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked: list[PermissionRequest] = []
    ctx = _context(tmp_path, asked, approve=True)
    with pytest.raises(ToolFailure, match=r"redirected to rebind\.example\.com, which resolves to 127\.0\.0\.1"):
        anyio.run(webfetch, {"url": f"http://127.0.0.1:{local_service}/hop"}, ctx)
    assert _LocalService.reached == []
    assert rebinding_dns == ["127.0.0.1"]  # the approved start; the redirect's name was never connected


def test_an_approved_local_address_is_still_fetched(local_service: int, tmp_path: Path) -> None:
    asked: list[PermissionRequest] = []
    ctx = _context(tmp_path, asked, approve=True)
    result = anyio.run(webfetch, {"url": f"http://127.0.0.1:{local_service}/notes", "format": "text"}, ctx)
    assert result["output"] == "local secret"
    assert _LocalService.reached == ["/notes"]
    assert asked == []  # a literal address is asked by the pipeline (`permission_requests`), not again here


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"])
def test_a_proxy_in_the_environment_carries_no_request_past_the_pinning(
    local_service: int, rebinding_dns: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str
) -> None:
    # A proxy resolves the name on its own (here to the local service): the checked address would not count.
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, f"http://127.0.0.1:{local_service}")
    asked: list[PermissionRequest] = []
    ctx = _context(tmp_path, asked, approve=False)
    url = f"{'https' if 'HTTPS' in variable else 'http'}://rebind.example.com:{local_service}/secret"
    with pytest.raises(ToolFailure, match=r"Could not fetch .*ConnectError: no route to the internet"):
        anyio.run(webfetch, {"url": url}, ctx)
    assert _LocalService.reached == []
    assert rebinding_dns == [PUBLIC]


def test_a_proxy_in_the_environment_does_not_reach_a_name_that_does_not_resolve(
    local_service: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{local_service}")
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{local_service}")
    ctx = _context(tmp_path, [], approve=False)
    with pytest.raises(ToolFailure, match=r"nowhere\.invalid does not resolve"):
        anyio.run(webfetch, {"url": "http://nowhere.invalid/secret"}, ctx)
    assert _LocalService.reached == []
