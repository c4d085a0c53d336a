"""`toolrt serve` driven by the official MCP client over stdio: list, call, list_changed, bad requests, ask."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from processes import holding
from serve_http import free_port

REPO = Path(__file__).resolve().parent.parent

TOOL = """\
id: {id}
description: "{text} The test tool echoes the number it is given, for the MCP tests."
title: "{id} title"
parameters: {{type: object, properties: {{n: {{type: integer}}}}, required: [n]}}
handler: {{argv: ["echo", "{text} {{{{ n }}}}"]}}
annotations: {{read_only: true}}
"""


def write_tool(root: Path, tool_id: str, text: str) -> None:
    (root / "tools.d").mkdir(parents=True, exist_ok=True)
    temp = root / "tools.d" / f".{tool_id}.tmp"
    temp.write_text(TOOL.format(id=tool_id, text=text), encoding="utf-8")
    os.replace(temp, root / "tools.d" / f"{tool_id}.yaml")


def project(tmp_path: Path, permissions: str | None = None) -> Path:
    root = tmp_path / "project"
    write_tool(root, "echo_n", "first")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    if permissions is not None:
        (root / "permissions.yaml").write_text(permissions, encoding="utf-8")
    return root


def server(root: Path, data: Path) -> StdioServerParameters:
    env = {**os.environ, "TOOLRT_DATA_DIR": str(data), "PYTHONPATH": str(REPO / "runtime")}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "toolrt", "serve", "--root", str(root)], env=env, cwd=str(root)
    )


def run(
    tmp_path: Path, body: Callable[[Client, anyio.Event], Awaitable[None]], *, permissions: str | None = None, **kw: Any
) -> Path:
    root = project(tmp_path, permissions)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def main() -> None:
        with anyio.fail_after(60):
            params = server(root, tmp_path / "data")
            async with Client(params, mode="legacy", message_handler=on_message, **kw) as client:
                await body(client, changed)

    anyio.run(main)
    return root


@pytest.mark.slow  # each test spawns `toolrt serve`; importing the mcp SDK takes seconds
def test_list_call_change_and_list_again(tmp_path: Path) -> None:
    root = tmp_path / "project"

    async def body(client: Client, changed: anyio.Event) -> None:
        capabilities = client.server_capabilities
        assert capabilities.tools is not None and capabilities.tools.list_changed is True
        listed = await client.list_tools()
        (tool,) = listed.tools
        assert (tool.name, tool.title) == ("echo_n", "echo_n title")
        assert tool.input_schema["required"] == ["n"]
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        result = await client.call_tool("echo_n", {"n": 5})
        assert result.is_error is False
        assert [c.text for c in result.content if isinstance(c, types.TextContent)] == ["first 5\n"]
        write_tool(root, "second", "second")
        await changed.wait()
        names = sorted(t.name for t in (await client.list_tools()).tools)
        assert names == ["echo_n", "second"]
        again = await client.call_tool("second", {"n": 1})
        assert again.content[0].text == "second 1\n"  # type: ignore[union-attr]

    run(tmp_path, body)


@pytest.mark.slow  # each test spawns `toolrt serve`; importing the mcp SDK takes seconds
def test_bad_requests_get_errors_not_a_crash(tmp_path: Path) -> None:
    async def body(client: Client, changed: anyio.Event) -> None:
        with pytest.raises(MCPError, match="Unknown tool: nope"):
            await client.call_tool("nope", {"n": 1})
        wrong = await client.call_tool("echo_n", {"n": "five"})  # schema violation: the model can retry
        assert wrong.is_error is True
        assert "n" in wrong.content[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="(?i)invalid"):  # params that are not CallToolRequestParams
            await _raw_call(client, {"name": 5, "arguments": "not an object"})
        still = await client.call_tool("echo_n", {"n": 2})  # the server survived
        assert still.is_error is False

    run(tmp_path, body)


async def _raw_call(client: Client, params: dict[str, Any]) -> Any:
    # The client's typed API cannot build a malformed request, so send one below it.
    return await client.session._dispatcher.send_raw_request("tools/call", params, None)


@pytest.mark.slow  # each test spawns `toolrt serve`; importing the mcp SDK takes seconds
def test_ask_goes_through_elicitation_and_without_it_is_denied(tmp_path: Path) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "once"})

    async def with_ui(client: Client, changed: anyio.Event) -> None:
        result = await client.call_tool("echo_n", {"n": 3})
        assert (result.is_error, result.content[0].text) == (False, "first 3\n")  # type: ignore[union-attr]

    rules = "permission:\n  echo_n: ask\n"
    run(tmp_path / "ui", with_ui, permissions=rules, elicitation_callback=elicit)
    assert len(asked) == 1 and "echo_n" in asked[0]

    async def headless(client: Client, changed: anyio.Event) -> None:
        result = await client.call_tool("echo_n", {"n": 3})
        assert result.is_error is True
        assert "approval" in result.content[0].text.lower()  # type: ignore[union-attr]

    run(tmp_path / "headless", headless, permissions=rules)


@pytest.mark.slow
def test_streamable_http_on_loopback(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time

    root = project(tmp_path)
    port = free_port()
    env = {**os.environ, "TOOLRT_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO / "runtime")}
    argv = [sys.executable, "-m", "toolrt", "serve", "--transport", "http", "--port", str(port), "--root", str(root)]
    process = subprocess.Popen(argv, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60  # importing the SDK takes seconds; wait for the port, not a guess
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.05)

        async def body() -> tuple[list[str], str]:
            with anyio.fail_after(30):
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    listed = await client.list_tools()
                    result = await client.call_tool("echo_n", {"n": 7})
                    return [tool.name for tool in listed.tools], result.content[0].text  # type: ignore[union-attr]

        names, text = anyio.run(body)
        assert names == ["echo_n"]
        assert text.strip() == "first 7"
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()


@pytest.mark.slow  # each test spawns `toolrt serve`; importing the mcp SDK takes seconds
def test_live_output_reaches_the_client_as_progress(tmp_path: Path) -> None:
    async def body(client: Client, changed: anyio.Event) -> None:
        messages: list[str | None] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            messages.append(message)

        result = await client.call_tool("echo_n", {"n": 3}, progress_callback=on_progress)
        assert result.content[0].text == "first 3\n"  # type: ignore[union-attr]
        assert any(message is not None and "first 3" in message for message in messages), messages

    run(tmp_path, body)


SLEEPER = """\
id: sleeper
description: "Says it started, then sleeps for the given number of seconds: for the cancellation test."
parameters: {type: object, properties: {seconds: {type: string}}, required: [seconds]}
handler: {shell: "echo started; exec sleep {{ seconds }}"}
timeout: 120
"""


@pytest.mark.slow  # each test spawns `toolrt serve`; importing the mcp SDK takes seconds
def test_a_client_cancellation_stops_the_tool(tmp_path: Path) -> None:
    # A unique length marks the sleeper: in the sandbox's PID namespace `$$` is no host pid.
    seconds = f"5{uuid.uuid4().int % 10**6:06d}"
    (tmp_path / "project" / "tools.d").mkdir(parents=True)
    (tmp_path / "project" / "tools.d" / "sleeper.yaml").write_text(SLEEPER, encoding="utf-8")

    async def body(client: Client, changed: anyio.Event) -> None:
        started = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if message is not None and "started" in message:
                started.set()

        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool("sleeper", {"seconds": seconds}, progress_callback=on_progress)

            group.start_soon(call)
            await started.wait()
            group.cancel_scope.cancel()  # the client sends notifications/cancelled for the request
        with anyio.fail_after(20):
            while any("zombie" not in _state(pid) for pid in holding(seconds)):
                await anyio.sleep(0.05)

    run(tmp_path, body)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


@pytest.mark.slow  # each test spawns `toolrt serve`; importing the mcp SDK takes seconds
def test_the_question_tool_asks_through_elicitation(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "toolrt.yaml").write_text("builtin_tools: [question]\n", encoding="utf-8")
    forms: list[dict[str, Any]] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        forms.append(params.requested_schema)  # type: ignore[union-attr]
        return types.ElicitResult(action="accept", content={"answer": "SQLite"})

    async def main() -> str:
        env = {**os.environ, "TOOLRT_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO / "runtime")}
        argv = ["-m", "toolrt", "serve", "--root", str(root), "--client", "cli"]
        params = StdioServerParameters(command=sys.executable, args=argv, env=env, cwd=str(root))
        with anyio.fail_after(60):
            async with Client(params, mode="legacy", elicitation_callback=elicit) as client:
                question = {
                    "question": "Which database?",
                    "header": "DB",
                    "options": [
                        {"label": "Postgres", "description": "a server"},
                        {"label": "SQLite", "description": "a file"},
                    ],
                }
                result = await client.call_tool("question", {"questions": [question]})
                assert result.is_error is False
                return str(result.content[0].text)  # type: ignore[union-attr]

    text = anyio.run(main)
    assert '"Which database?"="SQLite"' in text
    assert forms[0]["properties"]["answer"]["enum"] == ["Postgres", "SQLite"]
