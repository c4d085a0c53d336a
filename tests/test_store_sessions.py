"""Sessions through a persistent state store: a `toolrt serve` killed and started again (`store: sqlite`)
keeps a 2026-07-28 session's token, its "always" approvals and its read stamps, and a request state it
accepted before is not accepted after; three replicas over one SQLite or PostgreSQL store, each request
to the next one, serve one session, the replica that asked killed before the answer. Real server
processes on loopback ports, raw 2026-07-28 JSON-RPC."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import pytest
from conftest import ProjectFactory
from serve_http import free_port
from test_serve_input_required import ECHO, _approve, rpc

from toolrt.faces.serve_sessions import SESSION_META_KEY
from toolrt.store import open_store, session_id

REPO = Path(__file__).resolve().parent.parent


def _start(root: Path, data: Path, store: str) -> tuple[int, subprocess.Popen[bytes], BinaryIO]:
    port = free_port()
    env = {**os.environ, "TOOLRT_DATA_DIR": str(data), "TOOLRT_STORE": store, "PYTHONPATH": str(REPO / "runtime")}
    argv = [sys.executable, "-m", "toolrt", "serve", "--transport", "http", "--port", str(port), "--root", str(root)]
    log = (data / f"serve-{port}.log").open("wb")
    return port, subprocess.Popen(argv, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=log), log


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60  # importing the SDK takes seconds: wait for the port
    while True:
        assert process.poll() is None, log.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "the server never listened"
            time.sleep(0.05)


def _stop(process: subprocess.Popen[bytes], log: BinaryIO) -> None:
    if process.poll() is None:
        process.terminate()
    process.wait(timeout=30)
    log.close()


@contextmanager
def serving(root: Path, data: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`toolrt serve --transport http` over `store: sqlite` in a process of its own; (endpoint, process)."""
    port, process, log = _start(root, data, "sqlite")
    try:
        _wait_listening(port, process, data / f"serve-{port}.log")
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        _stop(process, log)


def call(url: str, name: str, arguments: dict[str, Any], token: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    async def one() -> tuple[int, dict[str, Any]]:
        with anyio.fail_after(30):
            return await rpc(url, name, arguments, meta={SESSION_META_KEY: token}, **extra)

    return anyio.run(one)


def text(reply: dict[str, Any]) -> str:
    content = reply["result"]["content"]
    return str(content[0]["text"])


@pytest.mark.slow  # two servers start, each importing the MCP SDK
def test_a_killed_and_restarted_server_keeps_the_session_its_approvals_and_read_stamps(
    make_project: ProjectFactory, tmp_path: Path
) -> None:
    root = make_project(
        {"guarded": ECHO},
        permissions="permission:\n  guarded: ask\n",
        settings="builtin_tools: [read, edit]\n",
        builtin_tools=True,
    )
    notes = root / "notes.txt"
    notes.write_text("alpha\n", encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    with serving(root, data) as (url, process):
        status, asked = call(url, "guarded", {"word": "hi"}, "new")
        assert status == 200 and asked["result"]["resultType"] == "input_required", asked
        token = asked["result"]["_meta"][SESSION_META_KEY]
        state = asked["result"]["requestState"]
        status, done = call(
            url, "guarded", {"word": "hi"}, token, inputResponses=_approve(asked, "always"), requestState=state
        )
        assert (status, text(done)) == (200, "hi\n")
        status, read = call(url, "read", {"filePath": str(notes)}, token)
        assert status == 200 and read["result"].get("isError") is not True, read
        process.send_signal(signal.SIGKILL)  # dies without a chance to save anything more
        process.wait(timeout=30)

    kept = open_store("sqlite", data)
    assert kept.approvals(session_id("mcp-token:" + token)) == [("build", "guarded", "*")]
    kept.close()

    with serving(root, data) as (url, _):
        status, again = call(url, "guarded", {"word": "later"}, token)  # "always" holds: no ask
        assert (status, text(again)) == (200, "later\n"), again
        assert again["result"]["_meta"][SESSION_META_KEY] == token
        args = {"filePath": str(notes), "oldString": "alpha", "newString": "beta"}
        status, edited = call(url, "edit", args, token)  # the read stamp of the first server holds
        assert status == 200 and edited["result"].get("isError") is not True, edited
        status, replayed = call(
            url, "guarded", {"word": "hi"}, token, inputResponses=_approve(asked), requestState=state
        )
        assert status == 400 and "already used" in replayed["error"]["message"], replayed
        status, stranger = call(url, "edit", {**args, "oldString": "beta", "newString": "gamma"}, "new")
        assert stranger["result"]["isError"] is True and "read" in text(stranger).lower()
        assert stranger["result"]["_meta"][SESSION_META_KEY] != token
    assert notes.read_text(encoding="utf-8") == "beta\n"


@contextmanager
def replicas(root: Path, data: Path, store: str, count: int) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    """`count` `toolrt serve` processes over one store, started together; (endpoint, process) of each."""
    with contextlib.ExitStack() as stack:
        starting = [_start(root, data, store) for _ in range(count)]
        served = []
        for port, process, log in starting:
            stack.callback(_stop, process, log)
            _wait_listening(port, process, data / f"serve-{port}.log")
            served.append((f"http://127.0.0.1:{port}/mcp", process))
        yield served


@pytest.mark.slow  # three servers start, each importing the MCP SDK
def test_replicas_over_one_sqlite_store_serve_one_session_round_robin_when_the_one_that_asked_dies(
    make_project: ProjectFactory, tmp_path: Path
) -> None:
    """The same over PostgreSQL: test_store_replicas (its three replicas are started once for its tests)."""
    store = "sqlite"
    root = make_project(
        {"guarded": ECHO},
        permissions="permission:\n  guarded: ask\n",
        settings="builtin_tools: [read, edit]\n",
        builtin_tools=True,
    )
    notes = root / "notes.txt"
    notes.write_text("alpha\n", encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    with replicas(root, data, store, 3) as served:
        (first, asker), *others = served
        status, asked = call(first, "guarded", {"word": "hi"}, "new")
        assert status == 200 and asked["result"]["resultType"] == "input_required", asked
        asker.send_signal(signal.SIGKILL)  # the replica that asked dies before the answer comes
        asker.wait(timeout=30)
        turn = itertools.cycle([url for url, _ in others])  # each request to the next replica, no stickiness
        token, state = asked["result"]["_meta"][SESSION_META_KEY], asked["result"]["requestState"]
        always = _approve(asked, "always")
        status, done = call(next(turn), "guarded", {"word": "hi"}, token, inputResponses=always, requestState=state)
        assert (status, text(done)) == (200, "hi\n"), done  # a living replica opened the state and resumed
        status, replayed = call(next(turn), "guarded", {"word": "hi"}, token, inputResponses=always, requestState=state)
        assert status == 400 and "already used" in replayed["error"]["message"], replayed
        status, approved = call(next(turn), "guarded", {"word": "again"}, token)  # the approval given elsewhere
        assert (status, text(approved)) == (200, "again\n"), approved
        status, read = call(next(turn), "read", {"filePath": str(notes)}, token)
        assert status == 200 and read["result"].get("isError") is not True, read
        args = {"filePath": str(notes), "oldString": "alpha", "newString": "beta"}
        status, edited = call(next(turn), "edit", args, token)  # the read stamp another replica made
        assert status == 200 and edited["result"].get("isError") is not True, edited
        status, tokenless = anyio.run(lambda: rpc(next(turn), "read", {"filePath": str(notes)}))
        issued = tokenless["result"]["_meta"][SESSION_META_KEY]  # a new session, not a per-replica default
        assert isinstance(issued, str) and issued != token
        status, unread = call(next(turn), "edit", {**args, "oldString": "beta", "newString": "gamma"}, "new")
        assert unread["result"]["isError"] is True and "read" in text(unread).lower()
    assert notes.read_text(encoding="utf-8") == "beta\n"


@pytest.mark.slow  # two stdio servers start, each importing the MCP SDK
def test_stdio_servers_over_one_store_never_share_their_default_session(
    make_project: ProjectFactory, tmp_path: Path
) -> None:
    """Two clients' stdio servers over one store: the first one's "always" stays the first one's."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from test_serve_sessions import _always
    from test_serve_sessions import _text as content

    root = make_project({"guarded": ECHO}, permissions="permission:\n  guarded: ask\n")
    env = {**os.environ, "TOOLRT_STORE": "sqlite", "PYTHONPATH": str(REPO / "runtime")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolrt", "serve", "--root", str(root)], env=env, cwd=str(root)
    )

    async def body() -> None:
        with anyio.fail_after(60):
            async with Client(params, mode="legacy", elicitation_callback=_always) as first:
                approved = await first.call_tool("guarded", {"word": "hi"})
                assert (approved.is_error, content(approved)) == (False, "hi\n")
                again = await first.call_tool("guarded", {"word": "again"})  # held: no ask, same answer
                assert (again.is_error, content(again)) == (False, "again\n")
            async with Client(params, mode="legacy") as second:  # another client: nobody to ask
                refused = await second.call_tool("guarded", {"word": "hi"})
                assert refused.is_error is True and "approval" in content(refused).lower()

    anyio.run(body)
