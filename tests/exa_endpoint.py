"""A local MCP endpoint on 127.0.0.1 that answers `tools/call` as Exa's does, for websearch and codesearch.

It answers by the query: server-sent events (as Exa's endpoint does) with a progress frame first,
plain JSON (`json`), a JSON-RPC error (`rpc error`), an HTTP error that echoes the URL it was called at,
API key included (`http error`), an empty result (`nothing`), or no answer until `release` is set (`hang`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

KEY = "exa-secret-key-1234"


class Endpoint:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.release = threading.Event()


def _handler(endpoint: Endpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            query = parse_qs(urlsplit(self.path).query)
            endpoint.calls.append({"body": body, "query": query, "accept": self.headers["Accept"]})
            arguments = body["params"]["arguments"]
            text = arguments["query"]
            result = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": f"Found: {text}"}]}}
            if text == "http error":
                self._send(502, "text/plain", f"upstream failed for {self.path}")
            elif text == "rpc error":
                error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": f"quota for {KEY} used up"}}
                self._send(200, "application/json", json.dumps(error))
            elif text == "nothing":
                self._send(200, "application/json", json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}))
            elif text == "json":
                self._send(200, "application/json", json.dumps(result))
            elif text == "hang":
                endpoint.release.wait(30)
                self._send(200, "application/json", json.dumps(result))
            else:
                progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
                events = (
                    f"event: message\ndata: {json.dumps(progress)}\n\nevent: message\ndata: {json.dumps(result)}\n\n"
                )
                self._send(200, "text/event-stream", events)

        def _send(self, status: int, kind: str, text: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def serve_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    """Run the endpoint and point `TOOLRT_EXA_URL` (and `EXA_API_KEY`) at it while the block runs."""
    state = Endpoint()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("TOOLRT_EXA_URL", f"http://127.0.0.1:{httpd.server_address[1]}/mcp")
    monkeypatch.setenv("EXA_API_KEY", KEY)
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)
