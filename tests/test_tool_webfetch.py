"""webfetch against a stdlib HTTP server on 127.0.0.1 (port 0); never any other address."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt.builtin.webfetch import MAX_RESPONSE_SIZE, html_to_markdown, html_to_text, webfetch
from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall
from toolrt.errors import ToolFailure

PAGE = """<!doctype html>
<html><head><title>Docs</title><style>body { color: red }</style><script>var tracking = 1;</script></head>
<body><h1>Install</h1><p>Run <code>pip install toolrt</code> then <b>restart</b>.</p>
<ul><li>fast</li><li>safe</li></ul><noscript>enable js</noscript>
<iframe src="https://ads.example"></iframe></body></html>"""
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@dataclass
class Server:
    base: str
    stalled: threading.Event = field(default_factory=threading.Event)
    """Set when a request reaches the stalling route."""


_RELEASE = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    server_state: Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        routes: dict[str, Callable[[], None]] = {
            "/page.html": lambda: self._send(200, "text/html; charset=utf-8", PAGE.encode()),
            "/notes.txt": lambda: self._send(200, "text/plain", b"<b>not html</b> plain text"),
            "/latin1.txt": lambda: self._send(200, "text/plain; charset=iso-8859-1", "café".encode("latin-1")),
            "/data.json": lambda: self._send(200, "application/json", b'{"ok": true}'),
            "/logo.png": lambda: self._send(200, "image/png", PNG),
            "/icon.svg": lambda: self._send(200, "image/svg+xml", b"<svg><title>i</title></svg>"),
            "/missing": lambda: self._send(404, "text/plain", b"nope"),
            "/boom": lambda: self._send(500, "text/plain", b"boom"),
            "/moved": self._redirect,
            "/declared-huge": self._declared_huge,
            "/cut-short": self._cut_short,
            "/streamed-huge": self._streamed_huge,
            "/exactly-5mb": lambda: self._send(200, "text/plain", b"a" * MAX_RESPONSE_SIZE),
            "/stall": self._stall,
            "/accept": lambda: self._send(200, "text/plain", self.headers.get("Accept", "").encode()),
        }
        routes.get(self.path, lambda: self._send(404, "text/plain", b"no route"))()

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self) -> None:
        self.send_response(302)
        self.send_header("Location", "/notes.txt")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _declared_huge(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(MAX_RESPONSE_SIZE + 1))
        self.end_headers()
        self.wfile.write(b"only a little")

    def _cut_short(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.write(b"only ten b")
        self.close_connection = True

    def _streamed_huge(self) -> None:
        # No Content-Length (HTTP/1.0, body ends at close): only counting while reading catches this.
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        chunk = b"z" * 65536
        try:
            for _ in range(MAX_RESPONSE_SIZE // len(chunk) + 2):
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _stall(self) -> None:
        self.server_state.stalled.set()
        _RELEASE.wait(timeout=30)


@pytest.fixture
def server() -> Iterator[Server]:
    _RELEASE.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    state = Server(base=f"http://127.0.0.1:{httpd.server_address[1]}")
    _Handler.server_state = state
    # A short poll interval only makes shutdown() return sooner; nothing waits on it.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        _RELEASE.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def fetch(args: Mapping[str, Any], tmp_path: Path) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        with anyio.fail_after(30):
            return await webfetch(
                args, ToolContext(DetachedCall(tool_id="webfetch", root=tmp_path, data_dir=tmp_path / "data"))
            )

    return anyio.run(main)


def test_html_becomes_markdown_without_scripts_or_styles(server: Server, tmp_path: Path) -> None:
    result = fetch({"url": f"{server.base}/page.html"}, tmp_path)
    assert result["output"] == ("Docs\n\n\n# Install\n\nRun `pip install toolrt` then **restart**.\n\n- fast\n- safe")
    assert result["title"] == f"{server.base}/page.html (text/html; charset=utf-8)"


def test_html_as_text_keeps_only_visible_words(server: Server, tmp_path: Path) -> None:
    result = fetch({"url": f"{server.base}/page.html", "format": "text"}, tmp_path)
    assert result["output"] == "Docs\n\nInstall\n\nRun pip install toolrt then restart.\n\nfast\n\nsafe"


def test_html_format_returns_the_markup(server: Server, tmp_path: Path) -> None:
    assert fetch({"url": f"{server.base}/page.html", "format": "html"}, tmp_path)["output"] == PAGE


@pytest.mark.parametrize(
    ("path", "output_format", "expected"),
    [
        ("/notes.txt", "markdown", "<b>not html</b> plain text"),
        ("/notes.txt", "text", "<b>not html</b> plain text"),
        ("/data.json", "markdown", '{"ok": true}'),
        ("/latin1.txt", "text", "café"),
        ("/icon.svg", "markdown", "<svg><title>i</title></svg>"),
        ("/moved", "markdown", "<b>not html</b> plain text"),
    ],
)
def test_non_html_bodies_pass_through(
    server: Server, tmp_path: Path, path: str, output_format: str, expected: str
) -> None:
    assert fetch({"url": server.base + path, "format": output_format}, tmp_path)["output"] == expected


@pytest.mark.parametrize(
    ("output_format", "preferred"),
    [("markdown", "text/markdown;q=1.0"), ("text", "text/plain;q=1.0"), ("html", "text/html;q=1.0")],
)
def test_accept_header_prefers_the_requested_format(
    server: Server, tmp_path: Path, output_format: str, preferred: str
) -> None:
    output = fetch({"url": f"{server.base}/accept", "format": output_format}, tmp_path)["output"]
    assert output.startswith(preferred)


def test_image_comes_back_as_an_attachment(server: Server, tmp_path: Path) -> None:
    result = fetch({"url": f"{server.base}/logo.png"}, tmp_path)
    assert result["output"] == "Image fetched successfully"
    assert result["attachments"] == [
        {
            "type": "file",
            "mime": "image/png",
            "url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
            "filename": "logo.png",
        }
    ]


def test_a_body_of_exactly_5mb_is_accepted(server: Server, tmp_path: Path) -> None:
    assert len(fetch({"url": f"{server.base}/exactly-5mb"}, tmp_path)["output"]) == MAX_RESPONSE_SIZE


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/declared-huge", r"^Response too large \(exceeds 5MB limit\)$"),
        ("/streamed-huge", r"^Response too large \(exceeds 5MB limit\)$"),
        ("/missing", r"^Request failed with status code: 404$"),
        ("/boom", r"^Request failed with status code: 500$"),
        # httpcore2's error while the body streams, as httpx2's of the same name
        ("/cut-short", r"^Could not fetch http://127\.0\.0\.1:\d+/cut-short: RemoteProtocolError: peer closed"),
    ],
)
def test_server_side_failures(server: Server, tmp_path: Path, path: str, message: str) -> None:
    with pytest.raises(ToolFailure, match=message):
        fetch({"url": server.base + path}, tmp_path)


@pytest.mark.parametrize(
    "url",
    ["ftp://127.0.0.1/x", "file:///etc/passwd", "javascript:alert(1)", "127.0.0.1/page", " http://127.0.0.1/", ""],
)
def test_only_http_and_https_urls(tmp_path: Path, url: str) -> None:
    with pytest.raises(ToolFailure, match=r"^URL must start with http:// or https://$"):
        fetch({"url": url}, tmp_path)


def test_unreachable_host_is_a_readable_failure(tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match=r"^Could not fetch http://127\.0\.0\.1:1/: ConnectError"):
        fetch({"url": "http://127.0.0.1:1/"}, tmp_path)


def test_timeout_on_a_stalled_server(server: Server, tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match=r"^Request timed out after 0\.3 seconds: .*/stall\. Try again with"):
        fetch({"url": f"{server.base}/stall", "timeout": 0.3}, tmp_path)


def test_abort_stops_a_stalled_fetch(server: Server, tmp_path: Path) -> None:
    ctx = ToolContext(DetachedCall(tool_id="webfetch", root=tmp_path, data_dir=tmp_path / "data"))
    failures: list[str] = []

    async def run() -> None:
        try:
            await webfetch({"url": f"{server.base}/stall"}, ctx)
        except ToolFailure as error:
            failures.append(str(error))

    async def main() -> None:
        with anyio.fail_after(15):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await anyio.to_thread.run_sync(server.stalled.wait, 10)
                ctx.abort.set()

    anyio.run(main)
    assert failures == [f"Fetching {server.base}/stall was aborted."]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"url": "http://127.0.0.1/", "format": "pdf"}, r"Unknown format 'pdf': use one of markdown, text, html\."),
        ({"url": "http://127.0.0.1/", "timeout": -1}, r"timeout must be a positive number of seconds"),
    ],
)
def test_bad_arguments_reaching_the_handler(tmp_path: Path, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolFailure, match=message):
        fetch(args, tmp_path)


@pytest.mark.parametrize(
    ("html", "markdown", "text"),
    [
        ("<p>a<br>b</p>", "a  \nb", "a\nb"),
        ("<h2>T</h2><pre><code>x = 1\n</code></pre>", "## T\n\n```\nx = 1\n```", "T\n\nx = 1"),
        ('<a href="/x">link</a> and <em>more</em>', "[link](/x) and *more*", "link and more"),
        ("<template><p>hidden</p></template><p>shown</p>", "shown", "shown"),
    ],
)
def test_converters(html: str, markdown: str, text: str) -> None:
    assert html_to_markdown(html) == markdown
    assert html_to_text(html) == text


# --- private_network: local services are not reachable unseen ---------------------------------------


@pytest.mark.parametrize(
    ("url", "private"),
    [
        ("http://127.0.0.1:8080/", True),
        ("http://localhost/admin", True),
        ("http://printer.local/", True),
        ("http://169.254.169.254/latest/meta-data/", True),  # cloud metadata
        ("http://10.1.2.3/", True),
        ("http://[::1]/", True),
        ("http://[::ffff:127.0.0.1]/", True),
        ("https://docs.python.org/3/", False),
        ("https://93.184.215.14/", False),
    ],
)
def test_urls_inside_the_network_ask_private_network(url: str, private: bool) -> None:
    from toolrt.builtin.webfetch import permission_requests
    from toolrt.permissions.model import CallSite

    site = CallSite(root=Path("/project"), cwd=Path("/project"), home=Path("/home/user"))
    requests = permission_requests({"url": url}, site)
    assert requests[0].permission == "webfetch" and requests[0].patterns == (url,)
    assert [r.permission for r in requests[1:]] == (["private_network"] if private else [])


def _project(tmp_path: Path, permissions: str = "") -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "toolrt.yaml").write_text("builtin_tools: [webfetch, invalid]\n")
    if permissions:
        (root / "permissions.yaml").write_text(permissions)
    return root


def test_the_defaults_ask_before_fetching_from_localhost(server: Server, tmp_path: Path) -> None:
    from toolrt.api import Runtime

    rt = Runtime.load(_project(tmp_path))
    result = rt.call_sync("webfetch", {"url": f"{server.base}/notes.txt", "format": "text"})
    assert result.error is not None
    assert "needs approval (private_network `127.0.0.1`)" in result.error


def test_a_rule_can_allow_a_local_host(server: Server, tmp_path: Path) -> None:
    from toolrt.api import Runtime

    rt = Runtime.load(_project(tmp_path, 'permission:\n  private_network: {"127.0.0.1": allow}\n'))
    result = rt.call_sync("webfetch", {"url": f"{server.base}/notes.txt", "format": "text"})
    assert result.error is None, result.error
    assert "plain text" in result.output


def test_a_public_name_resolving_inside_the_network_asks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from toolrt.errors import DeniedError
    from toolrt.permissions.model import PermissionRequest

    async def resolve(host: str, port: int, **_: Any) -> list[Any]:
        return [(2, 1, 6, "", ("10.0.0.7", port))]

    monkeypatch.setattr(anyio, "getaddrinfo", resolve)
    asked: list[PermissionRequest] = []

    async def asker(requests: Any) -> None:
        asked.extend(requests)
        raise DeniedError("private_network denied")

    ctx = ToolContext(DetachedCall(tool_id="webfetch", root=tmp_path, data_dir=tmp_path / "data", ask=asker))
    with pytest.raises(DeniedError, match="private_network denied"):
        anyio.run(lambda: webfetch({"url": "http://intranet.example.com/"}, ctx))
    assert [(r.permission, r.patterns) for r in asked] == [("private_network", ("intranet.example.com",))]


def test_a_redirect_into_the_network_is_not_followed() -> None:
    import httpx2

    from toolrt.builtin.webfetch import _refuse_private_redirect

    check = _refuse_private_redirect("https://public.example.com/start")
    with pytest.raises(ToolFailure, match=r"redirected to http://169\.254\.169\.254/latest, an address inside"):
        anyio.run(check, httpx2.Request("GET", "http://169.254.169.254/latest"))
    anyio.run(check, httpx2.Request("GET", "https://cdn.example.com/next"))  # public: followed
