"""The session model of `toolrt serve` over streamable HTTP on 127.0.0.1, both protocol versions.

The server runs in the test's own event loop (uvicorn on a free loopback port), driven by the official
client: two clients with different sessions never see each other's approvals or read stamps; on the
sessionless protocol the server-issued token carries a session across requests; a cancelled call
still has its process tree killed.
"""

from __future__ import annotations

import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client
from processes import holding
from serve_http import serving
from test_serve_mcp import SLEEPER

from toolrt.api import Runtime
from toolrt.audit import read_records
from toolrt.call.sessions import SessionStore
from toolrt.faces.serve_sessions import DEFAULT_SESSION, SESSION_META_KEY, OnExit

MODERN = "2026-07-28"
ASKING = """\
id: guarded
description: "Echoes ok; its permission asks, for the approval isolation test of the serve sessions."
parameters: {type: object, properties: {}}
handler: {argv: ["echo", "ok"]}
"""


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "guarded.yaml").write_text(ASKING, encoding="utf-8")
    (root / "tools.d" / "sleeper.yaml").write_text(SLEEPER, encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: [read, edit]\n", encoding="utf-8")
    (root / "permissions.yaml").write_text("permission:\n  guarded: ask\n", encoding="utf-8")
    (root / "notes.txt").write_text("alpha\n", encoding="utf-8")
    return root


def run(tmp_path: Path, body: Callable[[Runtime, str], Awaitable[None]]) -> Runtime:
    rt = Runtime.load(project(tmp_path))

    async def main() -> None:
        with anyio.fail_after(40):
            async with serving(rt) as url:
                await body(rt, url)

    anyio.run(main)
    return rt


def _meta(token: str) -> types.RequestParamsMeta:
    """A request `_meta` carrying a session token (the TypedDict takes extra keys at run time)."""
    return cast(types.RequestParamsMeta, {SESSION_META_KEY: token})


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def _always(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"decision": "always"})


def test_two_mcp_sessions_share_no_approvals_and_no_read_stamps(tmp_path: Path) -> None:
    async def body(rt: Runtime, url: str) -> None:
        notes = str(rt.root / "notes.txt")
        async with (
            Client(url, mode="legacy", elicitation_callback=_always) as first,
            Client(url, mode="legacy") as second,
        ):
            approved = await first.call_tool("guarded", {})
            assert (approved.is_error, _text(approved)) == (False, "ok\n")
            refused = await second.call_tool("guarded", {})  # first's "always" is first's alone
            assert refused.is_error is True
            assert "approval" in _text(refused).lower()
            read = await first.call_tool("read", {"filePath": notes})
            assert read.is_error is False, _text(read)
            unread = await second.call_tool("edit", {"filePath": notes, "oldString": "alpha", "newString": "beta"})
            assert unread.is_error is True
            assert "read" in _text(unread).lower()
            edited = await first.call_tool("edit", {"filePath": notes, "oldString": "alpha", "newString": "beta"})
            assert edited.is_error is False, _text(edited)
            assert len(rt.sessions) == 2
        # Both clients closed their MCP sessions: the server released what they held.
        with anyio.fail_after(10):
            while len(rt.sessions):
                await anyio.sleep(0.01)
        assert rt.snapshot.root.joinpath("notes.txt").read_text() == "beta\n"

    run(tmp_path, body)


def test_the_sessionless_protocol_carries_a_session_in_a_server_issued_token(tmp_path: Path) -> None:
    async def body(rt: Runtime, url: str) -> None:
        notes = str(rt.root / "notes.txt")
        async with Client(url, mode=MODERN) as client:
            read = await client.call_tool("read", {"filePath": notes}, meta=_meta("new"))
            assert read.is_error is False, _text(read)
            assert read.meta is not None
            token = read.meta[SESSION_META_KEY]
            assert isinstance(token, str) and len(token) >= 20
            stranger = await client.call_tool("read", {"filePath": notes}, meta=_meta("guessed"))
            assert stranger.meta is not None and stranger.meta[SESSION_META_KEY] not in (token, "guessed")
            args = {"filePath": notes, "oldString": "alpha", "newString": "beta"}
            unread = await client.call_tool("edit", args)  # the default session never read the file
            assert unread.is_error is True
            assert unread.meta is not None and SESSION_META_KEY not in unread.meta
            edited = await client.call_tool("edit", args, meta=_meta(token))
            assert edited.is_error is False, _text(edited)
            assert edited.meta is not None and edited.meta[SESSION_META_KEY] == token
        assert DEFAULT_SESSION in rt.sessions

    rt = run(tmp_path, body)
    assert rt.root.joinpath("notes.txt").read_text() == "beta\n"


@pytest.mark.parametrize("mode", ["legacy", MODERN])
def test_a_cancel_over_http_kills_the_process_tree(tmp_path: Path, mode: str) -> None:
    # A unique length marks the sleeper: in the sandbox's PID namespace `$$` is no host pid.
    seconds = f"5{uuid.uuid4().int % 10**6:06d}"

    async def body(rt: Runtime, url: str) -> None:
        async with Client(url, mode=mode) as client:
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "sleeper", {"seconds": seconds})
                with anyio.fail_after(15):
                    while not holding(seconds):
                        await anyio.sleep(0.02)
                group.cancel_scope.cancel()
            with anyio.fail_after(15):
                while any(_alive(pid) for pid in holding(seconds)) or not _statuses(rt, "sleeper"):
                    await anyio.sleep(0.05)
            assert _statuses(rt, "sleeper") == ["cancelled"]  # recorded, though the client never saw a result
            after = await client.call_tool("read", {"filePath": str(rt.root / "notes.txt")})
            assert after.is_error is False  # the server carries on

    run(tmp_path, body)


def _statuses(rt: Runtime, tool: str) -> list[str]:
    assert rt.audit.path is not None
    if not rt.audit.path.exists():
        return []
    return [record["status"] for record in read_records(rt.audit.path)[0] if record["tool"] == tool]


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "zombie" not in status.lower()


def test_idle_sessions_expire_and_the_most_idle_is_evicted_first() -> None:
    now = [0.0]
    released: list[str] = []
    store: SessionStore[dict[str, int]] = SessionStore(dict, idle_seconds=60, max_sessions=2, clock=lambda: now[0])
    store.on_release(released.append)
    store.get("a")["n"] = 1
    now[0] = 10
    store.get("b")
    now[0] = 20
    store.get("a")  # a is used again: b is now the most idle
    now[0] = 30
    store.get("c")
    assert released == ["b"] and "a" in store and "c" in store
    now[0] = 85  # a was last used at 20: idle 65 s > 60
    assert "a" not in store and released == ["b", "a"]
    assert store.get("a") == {}  # a new, empty session under the old name
    store.release("c")
    assert released == ["b", "a", "c"] and len(store) == 1
    from toolrt.errors import UsageError

    with pytest.raises(UsageError, match="session limit must be at least 1, not 0"):
        store.limit(idle_seconds=None, max_sessions=0)


def test_a_connection_exit_callback_runs_once_on_unwinding_never_swallows_an_error_and_stays_small() -> None:
    """What an open session registers on its connection's exit stack (its session's release, its log listener's
    removal): run once when the stack unwinds, normally or on an error, which goes on; and a fraction of the
    closure `AsyncExitStack.callback` would keep for every open session."""
    released: list[str] = []

    async def main() -> None:
        async with AsyncExitStack() as stack:
            stack.push(OnExit(released.append, "mcp:one"))
        assert released == ["mcp:one"]
        with pytest.raises(ValueError, match="the handler failed"):
            async with AsyncExitStack() as stack:
                stack.push(OnExit(released.append, "mcp:two"))
                raise ValueError("the handler failed")
        assert released == ["mcp:one", "mcp:two"]

    anyio.run(main)
    stacks = [AsyncExitStack() for _ in range(1_000)]
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for n, stack in enumerate(stacks):
            stack.push(OnExit(released.append, f"mcp:{n}"))
        ours, _ = tracemalloc.get_traced_memory()
        for n, stack in enumerate(stacks):
            stack.callback(released.append, f"mcp:{n}")
        closures, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (ours - before) * 2 < closures - ours, (ours - before, closures - ours)
