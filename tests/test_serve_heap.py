"""`toolrt serve` hides its start-up heap from the cyclic collector, and a settle releases what a
swap left behind, off the path from a save to the client's new listing."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from test_serve_mcp import TOOL

from toolrt import CallScope, Runtime
from toolrt.faces import serve_heap
from toolrt.faces.serve import build_server, settle_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()  # whatever a test froze goes back to the collector


@pytest.mark.usefixtures("thawed")
def test_a_settled_heap_is_frozen_and_the_next_settle_frees_its_dropped_cycles() -> None:
    node = _Node()
    alive = weakref.ref(node)
    settle_heap()
    assert gc.get_freeze_count() > 0
    del node
    gc.collect()
    assert alive() is not None, "a frozen cycle waits for the next settle"
    settle_heap()  # what a snapshot swap does: the old snapshot's cycles go
    assert alive() is None
    assert gc.get_freeze_count() > 0


def test_a_swap_settles_the_heap_after_its_notification_once_requests_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full collection takes tens of milliseconds: it must not stand between a save, its list_changed and
    # the listing the client asks for on it.
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "echo_n.yaml").write_text(TOOL.format(id="echo_n", text="first"), encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    rt = Runtime.load(root, settings={"data_dir": tmp_path / "data"})
    events: list[tuple[str, float]] = []
    monkeypatch.setattr(serve_heap, "settle_heap", lambda: events.append(("settled", time.monotonic())))
    idle = 0.2

    async def main() -> None:
        server, face = build_server(rt, CallScope())
        unsubscribe = rt.subscribe(face.swap_listener(), to="swaps")
        notified = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                events.append(("notified", time.monotonic()))
                notified.set()

        try:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(face.notify_changes)
                    group.start_soon(face.settle_when_idle, idle)
                    async with Client(server, mode="legacy", message_handler=on_message) as client:
                        await client.list_tools()
                        rt.register(
                            {
                                "id": "second",
                                "description": "A tool registered at run time: a swap.",
                                "parameters": {"type": "object"},
                                "handler": {"argv": ["true"]},
                            }
                        )
                        await notified.wait()
                        # Taken before the request: the server counts its idle time from when the request
                        # started, which a client that reads the answer later (a busy machine) would miss.
                        requested = time.monotonic()
                        listed = await client.list_tools()  # the request a client makes on list_changed
                        assert sorted(tool.name for tool in listed.tools) == ["echo_n", "second"]
                        while len(events) < 2:
                            await anyio.sleep(0.01)
                    group.cancel_scope.cancel()
        finally:
            unsubscribe()
            face.close()
        assert [kind for kind, _ in events] == ["notified", "settled"]
        assert events[1][1] - requested >= idle * 0.99  # after the last request, once the server was idle

    anyio.run(main)


def test_a_server_that_never_goes_quiet_settles_the_heap_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The swapped-out snapshot's cycles stay frozen until a settle: steady traffic must not put it off forever.
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "echo_n.yaml").write_text(TOOL.format(id="echo_n", text="first"), encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    rt = Runtime.load(root, settings={"data_dir": tmp_path / "data"})
    settles: list[float] = []
    monkeypatch.setattr(serve_heap, "settle_heap", lambda: settles.append(time.monotonic()))
    listings = 0

    async def main() -> None:
        nonlocal listings
        server, face = build_server(rt, CallScope())
        unsubscribe = rt.subscribe(face.swap_listener(), to="swaps")
        notified = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                notified.set()

        try:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(face.notify_changes)
                    group.start_soon(face.settle_when_idle, 3600.0, 0.3)  # never idle enough; 0.3 s at the latest
                    async with Client(server, mode="legacy", message_handler=on_message) as client:
                        await client.list_tools()
                        rt.register(
                            {
                                "id": "second",
                                "description": "A tool registered at run time: a swap.",
                                "parameters": {"type": "object"},
                                "handler": {"argv": ["true"]},
                            }
                        )
                        await notified.wait()
                        while not settles:  # requests all along
                            await client.list_tools()
                            listings += 1
                    group.cancel_scope.cancel()
        finally:
            unsubscribe()
            face.close()
        assert listings > 1

    anyio.run(main)
