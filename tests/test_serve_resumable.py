"""Resumable streams of `toolrt serve --transport http` (2025-11-25 streamable HTTP): the event store.

A real `toolrt serve` on 127.0.0.1 behind a loopback TCP proxy that cuts the connection of a call in
the middle of its progress; the official client reconnects with `Last-Event-ID` and gets every event
it missed, once, then the ones that follow live, then the result. The store's bounds (per stream, in
total) and its separation of sessions are shown on the store itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.streamable_http import EventMessage

from toolrt.faces.serve_events import STREAM_EVENTS, EventBuffer, SessionEvents, size_of

REPO = Path(__file__).resolve().parent.parent

TICKER = """\
id: ticker
description: "Reports progress 1 to 10 of 10, waiting on two gate files between: for the resumable stream test."
parameters:
  type: object
  properties: {gate: {type: string}}
  required: [gate]
handler: {python: "ticker_code:ticker"}
timeout: 60
"""

TICKER_CODE = """\
import pathlib

import anyio


async def _wait_for(path):
    while not path.exists():  # the test creates it once the connection is cut / the client is back
        await anyio.sleep(0.02)


async def ticker(args, ctx):
    gate = pathlib.Path(args["gate"])
    for step in (1, 2, 3):
        ctx.progress(step, 10)
    await _wait_for(gate.with_suffix(".cut"))
    for step in (4, 5, 6):
        ctx.progress(step, 10)
    await _wait_for(gate.with_suffix(".resumed"))
    for step in (7, 8, 9, 10):
        ctx.progress(step, 10)
    return "ticked"
"""


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "ticker.yaml").write_text(TICKER, encoding="utf-8")
    (root / "ticker_code.py").write_text(TICKER_CODE, encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    (root / "permissions.yaml").write_text('permission:\n  "*": allow\n', encoding="utf-8")
    return root


@asynccontextmanager
async def toolrt_serve(tmp_path: Path) -> AsyncIterator[tuple[str, int]]:
    """A real `toolrt serve --transport http --port 0`; yields (its URL, its port)."""
    env = {**os.environ, "TOOLRT_DATA_DIR": str(tmp_path / "data"), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "toolrt", "serve", "--root", str(_project(tmp_path))]
    server = subprocess.Popen(
        [*command, "--transport", "http", "--port", "0"], stderr=subprocess.PIPE, text=True, env=env
    )
    said: list[str] = []
    listening = threading.Event()

    def drain() -> None:
        assert server.stderr is not None
        with server.stderr:
            for line in server.stderr:
                said.append(line)
                if " at http" in line:
                    listening.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert await anyio.to_thread.run_sync(listening.wait, 60), "".join(said)
        url = next(line for line in said if " at http" in line).split(" at ", 1)[1].strip()
        yield url, int(url.rsplit(":", 1)[1].split("/", 1)[0])
    finally:
        server.terminate()
        server.wait(timeout=30)
        reader.join(10)


class CuttingProxy:
    """A loopback TCP proxy that closes the first connection once the server has sent `cut_after` progress
    notifications on it (both directions, as a dropped network would), and notes a client's
    reconnection with `Last-Event-ID`."""

    def __init__(self, target: int, cut_after: int) -> None:
        self._target = target
        self._cut_after = cut_after
        self.cut = anyio.Event()
        self.resumed = anyio.Event()

    async def serve(self, listener: anyio.abc.Listener[anyio.abc.SocketStream]) -> None:
        await listener.serve(self._handle)

    async def _handle(self, client: anyio.abc.SocketStream) -> None:
        async with client, await anyio.connect_tcp("127.0.0.1", self._target) as server:
            async with anyio.create_task_group() as group:

                async def upstream() -> None:
                    async for chunk in client:
                        if b"last-event-id:" in chunk.lower():
                            self.resumed.set()
                        await server.send(chunk)
                    await server.send_eof()

                async def downstream() -> None:
                    seen = b""
                    async for chunk in server:
                        seen = (seen + chunk)[-100_000:]
                        await client.send(chunk)
                        if not self.cut.is_set() and seen.count(b'"notifications/progress"') >= self._cut_after:
                            self.cut.set()  # all that follows on this connection is lost
                            group.cancel_scope.cancel()
                            return

                async def relay(direction: Callable[[], Awaitable[None]]) -> None:
                    try:
                        await direction()
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
                        group.cancel_scope.cancel()  # one side reset the connection: both directions end

                group.start_soon(relay, upstream)
                group.start_soon(relay, downstream)


@pytest.mark.slow  # spawns `toolrt serve`; importing the mcp SDK takes seconds
def test_a_client_cut_off_mid_call_reconnects_and_misses_no_event(tmp_path: Path) -> None:
    gate = tmp_path / "gate"

    async def main() -> None:
        async with toolrt_serve(tmp_path) as (_, port), AsyncExitStack() as stack:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
            proxy = CuttingProxy(port, cut_after=3)
            stack.push_async_callback(listener.aclose)
            proxy_port = listener.extra(anyio.abc.SocketAttribute.local_port)
            seen: list[tuple[float, float | None]] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                seen.append((progress, total))

            async def gates() -> None:
                await proxy.cut.wait()
                gate.with_suffix(".cut").touch()
                await proxy.resumed.wait()
                gate.with_suffix(".resumed").touch()

            async with anyio.create_task_group() as group:
                group.start_soon(proxy.serve, listener)
                group.start_soon(gates)
                with anyio.fail_after(60):
                    async with Client(f"http://127.0.0.1:{proxy_port}/mcp", mode="legacy") as client:
                        result = await client.call_tool("ticker", {"gate": str(gate)}, progress_callback=on_progress)
                group.cancel_scope.cancel()
            assert proxy.cut.is_set() and proxy.resumed.is_set()
            assert isinstance(result.content[0], types.TextContent)
            assert (result.is_error, result.content[0].text) == (False, "ticked")
            assert seen == [(float(step), 10.0) for step in range(1, 11)]  # each once, in order

            # A Last-Event-ID the session does not hold is refused: no silent gap, no other session's events.
            async with httpx2.AsyncClient() as http:
                opened = await http.post(
                    f"http://127.0.0.1:{port}/mcp",
                    headers={"accept": "application/json, text/event-stream", "content-type": "application/json"},
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "clientInfo": {"name": "probe", "version": "1"},
                        },
                    },
                )
                session = opened.headers["mcp-session-id"]
                refused = await http.get(
                    f"http://127.0.0.1:{port}/mcp",
                    headers={
                        "accept": "text/event-stream",
                        "mcp-session-id": session,
                        "mcp-protocol-version": "2025-11-25",
                        "last-event-id": "made-up.1",
                    },
                )
            assert refused.status_code == 400
            assert "No events after Last-Event-ID 'made-up.1' are held" in refused.json()["error"]["message"]

    anyio.run(main)


def _progress(n: int) -> types.JSONRPCNotification:
    params = {"progressToken": 1, "progress": n}
    return types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params=params)


async def _replayed(events: SessionEvents, last: str) -> list[object]:
    sent: list[object] = []

    async def send(event: EventMessage) -> None:
        message = event.message
        sent.append(
            message.params["progress"]
            if isinstance(message, types.JSONRPCNotification) and message.params
            else "response"
        )

    with anyio.fail_after(20):  # a hang guard
        await events.replay_events_after(last, send)
    return sent


def test_a_stream_holds_its_newest_events_up_to_its_bound_and_refuses_a_replay_past_them() -> None:
    async def main() -> None:
        buffer = EventBuffer()
        events = buffer.session()
        ids = [await events.store_event("7", _progress(n)) for n in range(STREAM_EVENTS + 5)]
        assert not events.holds_after(ids[3])  # the events after it were evicted: a gap, refused
        assert events.holds_after(ids[4])
        response = types.JSONRPCResponse(jsonrpc="2.0", id=7, result={})
        await events.store_event("7", response)
        sent = await _replayed(events, ids[-3])
        assert sent == [STREAM_EVENTS + 3, STREAM_EVENTS + 4, "response"]  # and the response ends the replay

    anyio.run(main)


def test_the_total_bound_evicts_the_oldest_events_of_any_session_and_sessions_stay_apart() -> None:
    async def main() -> None:
        one_size = size_of(_progress(1).model_dump_json(by_alias=True, exclude_unset=True))
        buffer = EventBuffer(total_bytes=one_size * 10)
        first, second = buffer.session(), buffer.session()
        early = [await first.store_event("1", _progress(n)) for n in range(5)]
        late = [await second.store_event("1", _progress(n)) for n in range(8)]  # the same request id
        assert buffer.held_bytes <= one_size * 10
        assert not first.holds_after(early[0])  # the oldest (first's) went first
        assert first.holds_after(early[2]) and second.holds_after(late[0])
        assert not second.holds_after(early[3])  # another session's event id is not this session's
        assert not first.holds_after(late[0])
        for n in range(20):
            await second.store_event("1", _progress(n))
        assert first.streams == 0  # every event of first's stream was evicted: the stream is let go

    anyio.run(main)


def _result(request_id: int, text: str) -> types.JSONRPCResponse:
    return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={"content": [{"type": "text", "text": text}]})


def test_an_idle_session_holds_its_events_in_little_memory_and_equal_messages_once() -> None:
    """Sessions opened like the SDK client's (a stream for `initialize`, whose result every session gets
    equal, and one for a call) each hold both streams, replayable, in a small part of what an SDK session
    costs; the equal `initialize` result is held once for all of them, not once per session."""
    instructions = "Tools of the project. " * 30

    async def main() -> None:
        buffer = EventBuffer()
        held: list[tuple[SessionEvents, str]] = []
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            for n in range(2_000):
                events = buffer.session()
                await events.store_event("1", None)
                first = await events.store_event("1", _result(1, instructions))
                await events.store_event("2", None)
                await events.store_event("2", _result(2, f"s{n}"))
                held.append((events, first))
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        per_session = (after - before) / 2_000
        assert per_session < 1_500, f"an idle session's events take {per_session:.0f} B"
        events, first = held[1_234]
        assert events.streams == 2 and events.holds_after(first)
        assert await _replayed(events, first.rpartition(".")[0] + ".1") == ["response"]

    anyio.run(main)


@pytest.mark.parametrize("suffix", ["1.²", "².1", "1." + "9" * 5_000, "1", "1.2.3", "x.1", "-1.1", ""])
def test_a_last_event_id_not_of_this_session_s_numbers_is_refused_and_never_raises(suffix: str) -> None:
    async def main() -> None:
        events = EventBuffer().session()
        first = await events.store_event("1", None)
        await events.store_event("1", _progress(1))
        key = first.partition(".")[0]
        assert events.holds_after(first)
        assert not events.holds_after(f"{key}.{suffix}")
        assert await events.replay_events_after(f"{key}.{suffix}", _never_called) is None

    anyio.run(main)


async def _never_called(event: EventMessage) -> None:
    raise AssertionError(f"replayed {event}")
