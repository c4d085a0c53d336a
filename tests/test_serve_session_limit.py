"""`--max-sessions` over streamable HTTP: past the limit the most idle MCP session is released, and its
next request answers 404 (never 503), on which the client initializes a new session."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from processes import holding
from serve_http import serving
from test_serve_mcp import SLEEPER

from toolrt.api import Runtime
from toolrt.faces.serve import ServeLimits

ECHO = """\
id: echo
description: "Echoes its text, for the session limit tests of toolrt serve."
parameters: {type: object, properties: {text: {type: string}}, required: [text]}
handler: {argv: ["echo", "{{ text }}"]}
"""
VERSION = "2025-11-25"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "echo.yaml").write_text(ECHO, encoding="utf-8")
    (root / "tools.d" / "sleeper.yaml").write_text(SLEEPER, encoding="utf-8")  # argument `seconds`
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    return root


def run(tmp_path: Path, max_sessions: int, body: Callable[[Runtime, str], Awaitable[None]]) -> Runtime:
    rt = Runtime.load(project(tmp_path), settings={"data_dir": tmp_path / "data"})

    async def main() -> None:
        with anyio.fail_after(60):
            async with serving(rt, ServeLimits(max_sessions=max_sessions), whole_app=True) as url:
                await body(rt, url)

    anyio.run(main)
    return rt


async def open_raw(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """A session opened by hand (`initialize`, `notifications/initialized`); the headers of its requests."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    opened = await http.post(url, json=init, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    initialized = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert initialized.status_code == 202, initialized.text
    return headers


async def call_raw(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], text: str, tool: str = "echo"
) -> httpx.Response:
    arguments = {"seconds": text} if tool == "sleeper" else {"text": text}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return await http.post(url, json=call, headers=headers)


def _text(result: Any) -> str:
    return str(result.content[0].text)


@pytest.mark.slow
def test_past_the_limit_the_most_idle_session_is_released_and_answers_404(tmp_path: Path) -> None:
    async def body(rt: Runtime, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            idle = await open_raw(http, url)
            answered = await call_raw(http, url, idle, "first")
            assert answered.status_code == 200 and "first" in answered.text, answered.text
            busy = await open_raw(http, url)
            assert (await call_raw(http, url, busy, "second")).status_code == 200
            assert len(rt.sessions) == 2
            # A third session at --max-sessions 2: admitted, and the most idle one (`idle`) is released.
            third = await open_raw(http, url)
            gone = await call_raw(http, url, idle, "again")
            assert gone.status_code == 404, (gone.status_code, gone.text)
            assert "Session" in gone.json()["error"]["message"]
            for kept in (busy, third):
                answered = await call_raw(http, url, kept, "kept")
                assert answered.status_code == 200 and "kept" in answered.text, answered.text
            # Its toolrt session went with it: two are held, the busy one's and the third's.
            with anyio.fail_after(10):
                while len(rt.sessions) != 2:
                    await anyio.sleep(0.01)
            assert f"mcp:{idle['mcp-session-id']}" not in rt.sessions
            assert f"mcp:{busy['mcp-session-id']}" in rt.sessions
            # The released client initializes again, and is served (releasing the next most idle).
            again = await open_raw(http, url)
            answered = await call_raw(http, url, again, "back")
            assert answered.status_code == 200 and "back" in answered.text, answered.text
            assert (await call_raw(http, url, busy, "busy")).status_code == 404

    run(tmp_path, 2, body)


@pytest.mark.slow
def test_an_sdk_client_whose_session_was_released_is_told_it_ended_and_can_reinitialize(tmp_path: Path) -> None:
    async def body(rt: Runtime, url: str) -> None:
        async with Client(url, mode="legacy") as first:
            assert _text(await first.call_tool("echo", {"text": "one"})) == "one\n"
            async with Client(url, mode="legacy") as second:  # --max-sessions 1: `first` is released
                assert _text(await second.call_tool("echo", {"text": "two"})) == "two\n"
                with pytest.raises(MCPError, match="Session not found"):
                    await first.call_tool("echo", {"text": "one again"})
            async with Client(url, mode="legacy") as renewed:
                assert _text(await renewed.call_tool("echo", {"text": "three"})) == "three\n"

    run(tmp_path, 1, body)


@pytest.mark.slow
def test_a_session_with_a_call_in_flight_is_not_the_one_released(tmp_path: Path) -> None:
    async def body(rt: Runtime, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http, anyio.create_task_group() as group:
            working = await open_raw(http, url)
            # A unique length marks the sleeper: in the sandbox's PID namespace `$$` is no host pid.
            seconds = f"5{uuid.uuid4().int % 10**6:06d}"
            group.start_soon(call_raw, http, url, working, seconds, "sleeper")
            with anyio.fail_after(15):  # the call is running
                while not holding(seconds):
                    await anyio.sleep(0.02)
            idle = await open_raw(http, url)  # used after `working`'s call started
            await open_raw(http, url)  # --max-sessions 2: `working` is the least recently used, but busy
            assert (await call_raw(http, url, idle, "late")).status_code == 404
            assert f"mcp:{working['mcp-session-id']}" in rt.sessions
            group.cancel_scope.cancel()

    run(tmp_path, 2, body)
