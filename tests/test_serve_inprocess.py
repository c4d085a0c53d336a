"""`toolrt serve` in-process: the official MCP client drives `build_server` over the SDK's in-memory
transport, with the swap listener, the change notifier and a scripted Reloader wired as `run_serve`
wires them. The same behaviours as test_serve_mcp.py (which spawns `toolrt serve`), without a process:
tools/list, tools/call, list_changed after a reload (both protocol generations), ask and the question
tool through elicitation, progress, a reload's problems as log messages, and bad requests.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.streams.memory import MemoryObjectSendStream
from conftest import ProjectFactory
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from test_serve_mcp import TOOL

from toolrt import CallScope, Runtime
from toolrt.errors import UsageError
from toolrt.faces.serve import ServeLimits, build_server, run_serve
from toolrt.reload import ChangeSet, Reloader, ReloadEvent

LIMIT = 30


def _tool(tool_id: str, text: str) -> str:
    return TOOL.format(id=tool_id, text=text)


@dataclass
class Served:
    """One in-process server, its client, and the means to script a reload."""

    client: Client
    root: Path
    saves: MemoryObjectSendStream[ChangeSet]
    reloads: list[ReloadEvent]
    changed: anyio.Event
    logged: list[types.LoggingMessageNotificationParams] = field(default_factory=list)
    server: Any = None
    """The server, for a second client of the same server."""

    async def save(self, name: str, text: str) -> ReloadEvent:
        """Write a file of the project and have the Reloader see it (as the watcher would)."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        count = len(self.reloads)
        await self.saves.send({(2, str(path))})
        while len(self.reloads) == count:
            await anyio.sleep(0.01)
        return self.reloads[-1]


@asynccontextmanager
async def serving(
    rt: Runtime, *, scope: CallScope | None = None, mode: str = "legacy", offer_unaskable: bool = False, **client: Any
) -> AsyncIterator[Served]:
    """`run_serve`'s wiring around an in-memory client instead of stdio."""
    server, face = build_server(rt, scope or CallScope(), ServeLimits(), offer_unaskable=offer_unaskable)
    unsubscribe = rt.subscribe(face.swap_listener(), to="swaps")
    saves, changes = anyio.create_memory_object_stream[ChangeSet](8)
    changed = anyio.Event()
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    reloads: list[ReloadEvent] = []
    reloader = Reloader(rt, changes=changes)
    reloader.subscribe(face.reload_listener())
    reloader.subscribe(reloads.append)
    try:
        with anyio.fail_after(LIMIT):
            async with saves, changes, anyio.create_task_group() as group:
                group.start_soon(face.notify_changes)
                ready = anyio.Event()  # the handler code imported at start: a save cannot race that import
                group.start_soon(functools.partial(reloader.run, ready=ready))
                await ready.wait()
                async with Client(
                    server, mode=mode, message_handler=on_message, logging_callback=on_log, **client
                ) as c:
                    yield Served(c, rt.root, saves, reloads, changed, logged, server)
                group.cancel_scope.cancel()
    finally:
        unsubscribe()
        face.close()


def _texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def run(body: Callable[[], Awaitable[None]]) -> None:
    anyio.run(body)


def test_list_call_reload_and_list_again(make_project: ProjectFactory) -> None:
    rt = Runtime.load(make_project({"echo_n": _tool("echo_n", "first")}))

    async def main() -> None:
        async with serving(rt) as served:
            client = served.client
            assert client.server_capabilities.tools is not None and client.server_capabilities.tools.list_changed
            (tool,) = (await client.list_tools()).tools
            assert (tool.name, tool.title, tool.input_schema["required"]) == ("echo_n", "echo_n title", ["n"])
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
            result = await client.call_tool("echo_n", {"n": 5})
            assert (result.is_error, _texts(result)) == (False, ["first 5\n"])
            assert result.meta is not None and result.meta["toolrt/title"]
            event = await served.save("tools.d/second.yaml", _tool("second", "second"))
            assert event.error is None and event.change is not None
            await served.changed.wait()
            assert sorted(t.name for t in (await client.list_tools()).tools) == ["echo_n", "second"]
            assert _texts(await client.call_tool("second", {"n": 1})) == ["second 1\n"]

    run(main)


def test_a_2026_client_hears_of_changes_through_subscriptions_listen(make_project: ProjectFactory) -> None:
    rt = Runtime.load(make_project({"echo_n": _tool("echo_n", "first")}))

    async def main() -> None:
        async with serving(rt, mode="auto") as served:
            client = served.client
            assert client.protocol_version >= "2026"
            async with client.listen(tools_list_changed=True) as subscription:
                await served.save("tools.d/second.yaml", _tool("second", "second"))
                async for _event in subscription:
                    break
            names = sorted(t.name for t in (await client.list_tools(cache_mode="bypass")).tools)
            assert names == ["echo_n", "second"]
            assert _texts(await client.call_tool("second", {"n": 2})) == ["second 2\n"]

    run(main)


def test_problems_at_start_their_fix_and_a_broken_save_are_logged_to_the_client(make_project: ProjectFactory) -> None:
    broken = _tool("other", "broken").replace("n }}", "n | uper }}")
    rt = Runtime.load(make_project({"echo_n": _tool("echo_n", "first"), "other": broken}), partial=True)

    async def main() -> None:
        async with serving(rt) as served:
            client = served.client
            with pytest.warns(MCPDeprecationWarning):
                await client.set_logging_level("info")  # the fix is announced at info
            withheld = await client.call_tool("other", {"n": 1})
            assert (
                withheld.is_error
                and "The other tool is unavailable until its definition is fixed" in _texts(withheld)[0]
            )
            assert _texts(await client.call_tool("echo_n", {"n": 1})) == ["first 1\n"]  # the rest serves
            fixed = await served.save("tools.d/other.yaml", _tool("other", "fixed"))
            assert fixed.error is None and fixed.change is not None
            assert _texts(await client.call_tool("other", {"n": 1})) == ["fixed 1\n"]
            again = await served.save("tools.d/other.yaml", broken)
            assert again.error is not None and again.change is None
            assert _texts(await client.call_tool("other", {"n": 2})) == ["fixed 2\n"]  # the last good one serves
            await client.list_tools()  # a round trip: the log notifications have arrived
            told = [p for p in served.logged if "the configuration" in str(p.data)]
            assert [(p.level, str(p.data).splitlines()[0]) for p in told] == [
                ("error", "toolrt: the configuration is invalid, serving what is valid:"),
                ("info", "toolrt: the configuration is valid again"),
                ("error", "toolrt: the configuration is invalid, still serving the last good configuration:"),
            ]
            assert "tools.d/other.yaml:5:" in str(told[0].data) and "unknown filter 'uper'" in str(told[2].data)

    run(main)


def test_bad_requests_are_errors_and_the_server_stays_up(make_project: ProjectFactory) -> None:
    rt = Runtime.load(make_project({"echo_n": _tool("echo_n", "first")}))

    async def main() -> None:
        async with serving(rt) as served:
            client = served.client
            with pytest.raises(MCPError, match="Unknown tool: nope"):
                await client.call_tool("nope", {"n": 1})
            wrong = await client.call_tool("echo_n", {"n": "five"})
            assert wrong.is_error is True and "n" in _texts(wrong)[0]
            with pytest.raises(MCPError, match="(?i)invalid"):
                await client.session._dispatcher.send_raw_request("tools/call", {"name": 5, "arguments": "x"}, None)
            with pytest.warns(MCPDeprecationWarning, match="logging capability is deprecated"):
                assert isinstance(await client.set_logging_level("debug"), types.EmptyResult)
            assert _texts(await client.call_tool("echo_n", {"n": 2})) == ["first 2\n"]

    run(main)


ASKING = "permission:\n  echo_n: ask\n"


@pytest.mark.parametrize(
    ("reply", "error", "asked"),
    [
        (types.ElicitResult(action="accept", content={"decision": "once"}), None, 2),
        (types.ElicitResult(action="accept", content={"decision": "reject", "feedback": "use n=4"}), "use n=4", 2),
        (types.ElicitResult(action="decline"), "rejected", 2),
        (types.ElicitResult(action="accept", content={"decision": "maybe"}), "rejected", 2),
    ],
    ids=["once", "reject-with-feedback", "decline", "unknown-decision"],
)
def test_ask_goes_through_elicitation(
    make_project: ProjectFactory, reply: types.ElicitResult, error: str | None, asked: int
) -> None:
    rt = Runtime.load(make_project({"echo_n": _tool("echo_n", "first")}, permissions=ASKING))
    messages: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        messages.append(params.message)
        return reply

    async def main() -> None:
        async with serving(rt, elicitation_callback=elicit) as served:
            for n in (3, 4):
                result = await served.client.call_tool("echo_n", {"n": n})
                if error is None:
                    assert (result.is_error, _texts(result)) == (False, [f"first {n}\n"])
                else:
                    assert result.is_error is True and error in _texts(result)[0].lower(), _texts(result)

    run(main)
    assert len(messages) == asked and "echo_n" in messages[0]


def test_without_elicitation_an_ask_is_denied(make_project: ProjectFactory) -> None:
    rt = Runtime.load(make_project({"echo_n": _tool("echo_n", "first")}, permissions=ASKING))

    async def main() -> None:
        async with serving(rt) as served:
            result = await served.client.call_tool("echo_n", {"n": 3})
            assert result.is_error is True and "approval" in _texts(result)[0].lower()

    run(main)


@pytest.mark.parametrize(
    ("multiple", "answer", "shown"),
    [
        (False, "SQLite", '"Which database?"="SQLite"'),
        (True, "Postgres, SQLite", '"Which database?"="Postgres, SQLite"'),
    ],
)
def test_the_question_tool_asks_through_elicitation(
    make_project: ProjectFactory, multiple: bool, answer: str, shown: str
) -> None:
    rt = Runtime.load(make_project(settings="builtin_tools: [question]\n", builtin_tools=True))
    forms: list[dict[str, Any]] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        forms.append(params.requested_schema)  # type: ignore[union-attr]
        return types.ElicitResult(action="accept", content={"answer": answer})

    question = {
        "question": "Which database?",
        "header": "DB",
        "multiple": multiple,
        "options": [{"label": "Postgres", "description": "a server"}, {"label": "SQLite", "description": "a file"}],
    }

    async def main() -> None:
        async with serving(rt, scope=CallScope(client="cli"), elicitation_callback=elicit) as served:
            result = await served.client.call_tool("question", {"questions": [question]})
            assert result.is_error is False and shown in _texts(result)[0], _texts(result)

    run(main)
    answer_field = forms[0]["properties"]["answer"]
    if multiple:
        assert "enum" not in answer_field and "Postgres, SQLite" in answer_field["title"]
    else:
        assert answer_field["enum"] == ["Postgres", "SQLite"]


def test_live_output_reaches_the_client_as_progress(make_project: ProjectFactory) -> None:
    rt = Runtime.load(make_project({"echo_n": _tool("echo_n", "first")}))

    async def main() -> None:
        messages: list[str | None] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            messages.append(message)

        async with serving(rt) as served:
            result = await served.client.call_tool("echo_n", {"n": 3}, progress_callback=on_progress)
            assert _texts(result) == ["first 3\n"]
        assert any(message is not None and "first 3" in message for message in messages), messages

    run(main)


def test_run_serve_refuses_an_unknown_transport_agent_or_tool_set(make_project: ProjectFactory) -> None:
    rt = Runtime.load(make_project({"echo_n": _tool("echo_n", "first")}))
    common: dict[str, Any] = {"host": "127.0.0.1", "port": 0}
    with pytest.raises(UsageError, match=r"unknown transport 'pigeon'; expected one of: stdio, http"):
        run_serve(rt, transport="pigeon", scope=CallScope(), **common)
    with pytest.raises(Exception, match=r"(?i)agent.*nobody|nobody.*agent"):
        run_serve(rt, transport="stdio", scope=CallScope(agent="nobody"), **common)
    with pytest.raises(UsageError, match=r"unknown tool set 'nope'"):
        run_serve(rt, transport="stdio", scope=CallScope(toolset="nope"), **common)


def test_a_port_in_use_is_a_usage_error(make_project: ProjectFactory) -> None:
    import socket

    rt = Runtime.load(make_project({"echo_n": _tool("echo_n", "first")}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(
            UsageError, match=rf"port {port} on 127.0.0.1 is already in use; choose another with --port"
        ):
            run_serve(rt, transport="http", host="127.0.0.1", port=port, scope=CallScope())
