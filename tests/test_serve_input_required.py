"""Asks on MCP 2026-07-28: an input-required result (SEP-2322) whose sealed `requestState` resumes the call.

Raw JSON-RPC over streamable HTTP on 127.0.0.1 (a uvicorn server in the test's event loop), as a
2026-07-28 client sends it: the ask shows what "always" keeps, the answer resumes the call, and a
replayed, tampered, expired, foreign-session or other-arguments state is a JSON-RPC error (HTTP 400),
never a run; garbage answers are asked again; a server restarted between the rounds resumes the call.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import ProjectFactory
from serve_http import serving

from toolrt.api import Runtime
from toolrt.audit import read_records
from toolrt.faces.serve_sessions import SESSION_META_KEY

MODERN = "2026-07-28"
ECHO = """\
id: guarded
description: Echoes the word it is given; its permission asks, for the input-required tests of toolrt serve.
parameters: {type: object, properties: {word: {type: string}}, required: [word]}
handler: {argv: [echo, "{{ word }}"]}
permission: {patterns: ["{{ word }}"], always: ["*"]}
"""
ELICITING: dict[str, Any] = {"elicitation": {}}


def _project(make_project: ProjectFactory) -> Path:
    return make_project({"guarded": ECHO}, permissions="permission:\n  guarded: ask\n")


async def rpc(
    url: str,
    name: str,
    arguments: Mapping[str, Any],
    *,
    capabilities: Mapping[str, Any] = ELICITING,
    meta: Mapping[str, Any] | None = None,
    **extra: Any,
) -> tuple[int, dict[str, Any]]:
    """One 2026-07-28 `tools/call` (no handshake; `_meta` says who the client is); (HTTP status, reply)."""
    params: dict[str, Any] = {
        "name": name,
        "arguments": dict(arguments),
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": dict(capabilities),
            **(meta or {}),
        },
        **extra,
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    request = urllib.request.Request(url, body, {**headers, "Content-Type": "application/json"}, method="POST")

    def post() -> tuple[int, str, str]:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers.get("content-type", ""), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("content-type", ""), error.read().decode()

    status, kind, text = await anyio.to_thread.run_sync(post)
    if kind.startswith("text/event-stream"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:") and '"id"' in line][-1]
    return status, json.loads(text)


def _audit(rt: Runtime) -> Path:
    assert rt.audit.path is not None
    return rt.audit.path


def _approve(reply: dict[str, Any], decision: str = "once") -> dict[str, Any]:
    (key,) = reply["result"]["inputRequests"]
    return {key: {"action": "accept", "content": {"decision": decision}}}


def test_an_ask_is_an_input_required_result_and_its_answer_resumes_the_call_once(
    make_project: ProjectFactory,
) -> None:
    root = _project(make_project)
    rt = Runtime.load(root)

    async def main() -> None:
        async with serving(rt) as url:
            _, first = await rpc(url, "guarded", {"word": "hi"})
            result = first["result"]
            assert result["resultType"] == "input_required"
            ((key, request),) = result["inputRequests"].items()
            assert request["method"] == "elicitation/create"
            message = request["params"]["message"]
            assert "guarded: hi" in message and '"always" keeps: guarded: *' in message
            state = result["requestState"]
            assert isinstance(state, str) and "guarded" not in state, "sealed, not readable"

            status, done = await rpc(url, "guarded", {"word": "hi"}, inputResponses=_approve(first), requestState=state)
            assert status == 200 and done["result"]["content"][0]["text"] == "hi\n"
            assert done["result"].get("resultType", "complete") == "complete"

            status, replayed = await rpc(
                url, "guarded", {"word": "hi"}, inputResponses=_approve(first), requestState=state
            )
            assert status == 400 and replayed["error"]["code"] == -32602
            assert "already used" in replayed["error"]["message"]

            _, again = await rpc(url, "guarded", {"word": "hi"})
            fresh = again["result"]["requestState"]
            tampered = fresh[:-2] + ("A" if fresh[-2] != "A" else "B") + fresh[-1]
            status, refused = await rpc(
                url, "guarded", {"word": "hi"}, inputResponses=_approve(again), requestState=tampered
            )
            assert status == 400 and refused["error"]["message"] == "Invalid or expired requestState"
            status, other = await rpc(
                url, "guarded", {"word": "rm"}, inputResponses=_approve(again), requestState=fresh
            )
            assert status == 400 and other["error"]["message"] == "Invalid or expired requestState"

            # The same state from another toolrt session (a session token) is refused.
            status, foreign = await rpc(
                url,
                "guarded",
                {"word": "hi"},
                meta={SESSION_META_KEY: "new"},
                inputResponses=_approve(again),
                requestState=fresh,
            )
            assert status == 400 and "another session" in foreign["error"]["message"]

            # Answers to requests never made are asked again (a new state); malformed ones are an error.
            _, third = await rpc(url, "guarded", {"word": "hi"})
            (key,) = third["result"]["inputRequests"]
            status, asked = await rpc(
                url,
                "guarded",
                {"word": "hi"},
                inputResponses={"stray": {"action": "accept", "content": {"decision": "once"}}},
                requestState=third["result"]["requestState"],
            )
            assert status == 200 and asked["result"]["resultType"] == "input_required"
            assert list(asked["result"]["inputRequests"]) == [key]
            assert asked["result"]["requestState"] != third["result"]["requestState"]
            status, garbage = await rpc(
                url,
                "guarded",
                {"word": "hi"},
                inputResponses={key: {"action": "maybe"}},
                requestState=asked["result"]["requestState"],
            )
            assert status == 400 and garbage["error"]["code"] == -32602

            # A client without elicitation is not asked: the call is denied, saying approval was needed.
            _, unasked = await rpc(url, "guarded", {"word": "hi"}, capabilities={})
            assert unasked["result"]["isError"] and "no one is available to approve" in str(unasked["result"])

    anyio.run(main)
    runs = [r for r in read_records(_audit(rt))[0] if r["tool"] == "guarded" and r["status"] == "ok"]
    assert len(runs) == 1, "only the accepted retry ran the tool"


def test_an_expired_state_is_refused(make_project: ProjectFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import mcp.server.request_state as request_state

    rt = Runtime.load(_project(make_project))

    class Later:
        @staticmethod
        def time() -> float:
            return time.time() + 3600

    async def main() -> None:
        async with serving(rt) as url:
            _, first = await rpc(url, "guarded", {"word": "hi"})
            monkeypatch.setattr(request_state, "time", Later)
            status, expired = await rpc(
                url,
                "guarded",
                {"word": "hi"},
                inputResponses=_approve(first),
                requestState=first["result"]["requestState"],
            )
            assert status == 400 and expired["error"]["message"] == "Invalid or expired requestState"

    anyio.run(main)


def test_a_server_restarted_between_the_rounds_resumes_the_call_once(make_project: ProjectFactory) -> None:
    root = _project(make_project)

    async def main() -> None:
        async with serving(Runtime.load(root)) as url:
            _, first = await rpc(url, "guarded", {"word": "hi"}, meta={SESSION_META_KEY: "new"})
            token = first["result"]["_meta"][SESSION_META_KEY]
        assert (Path(Runtime.load(root).snapshot.data_dir) / "mcp-request-state.key").stat().st_mode & 0o077 == 0
        async with serving(Runtime.load(root)) as url:  # a new process: the key is read from the data directory
            status, done = await rpc(
                url,
                "guarded",
                {"word": "hi"},
                meta={SESSION_META_KEY: token},
                inputResponses=_approve(first, "always"),
                requestState=first["result"]["requestState"],
            )
            assert status == 200 and done["result"]["content"][0]["text"] == "hi\n", done
        async with serving(Runtime.load(root)) as url:  # and again: the state was used, also after a restart
            status, replayed = await rpc(
                url,
                "guarded",
                {"word": "hi"},
                meta={SESSION_META_KEY: token},
                inputResponses=_approve(first, "always"),
                requestState=first["result"]["requestState"],
            )
            assert status == 400 and "already used" in replayed["error"]["message"]

    anyio.run(main)
