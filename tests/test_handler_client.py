"""The handler context for the protocol: one handler, written once, talks to its client the same way in
`rt.call` (a host's channel), over MCP 2025-11-25 (server requests) and over 2026-07-28 (input-required
results, by replay: the handler runs again from the start with the answers gathered so far)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import ProjectFactory
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from test_serve_inprocess import run, serving

from toolrt import ClientInfo, ClientRequest, Runtime
from toolrt.call.pipeline import PROTOCOL_ERROR

DEMO = """\
id: demo
description: Talks to its client (log, progress, a form, the client's model and roots), for the handler context tests.
parameters: {type: object, properties: {}}
handler: {python: "client_code:demo"}
"""
STRICT = """\
id: strict
description: Refuses with a protocol error, for the handler context tests.
parameters: {type: object, properties: {mode: {type: string}}}
handler: {python: "client_code:strict"}
"""
CODE = """\
import json

from toolrt import ProtocolError

RUNS = []


async def demo(args, ctx):
    RUNS.append(1)  # code before the first request runs again on 2026-07-28
    ctx.log("info", "starting", {"step": 1})
    ctx.progress(1, 3, "asking")
    form = await ctx.elicit(
        "Your name?",
        {"type": "object", "properties": {"name": {"type": "string", "default": "Ann"}}, "required": ["name"]},
    )
    both = await ctx.ask_client({"model": ctx.sample_request(["Say hi"], 20), "roots": ctx.roots_request()})
    ctx.progress(3, 3)
    return json.dumps({
        "client": [ctx.client.name, ctx.client.protocol_version, sorted(ctx.client.capabilities)],
        "form": [form.action, form.content],
        "text": both["model"]["content"]["text"],
        "roots": [root["uri"] for root in both["roots"]],
        "runs": len(RUNS),
    })


def strict(args, ctx):
    ctx.log("warning", "refusing")
    raise ProtocolError(-32602, "mode must be fast or slow", {"mode": args.get("mode")})
"""


def _project(make_project: ProjectFactory) -> Path:
    return make_project(
        {"demo": DEMO, "strict": STRICT},
        permissions="permission:\n  demo: allow\n  strict: allow\n",
        modules={"client_code": CODE},
    )


class HostChannel:
    """A library host's client: answers every request and keeps what it was told."""

    def __init__(self) -> None:
        self.info = ClientInfo({"elicitation": {}, "sampling": {}, "roots": {}}, "host", "1.0", None)
        self.rounds: list[dict[str, str]] = []
        self.logged: list[tuple[str, str, Any]] = []
        self.progressed: list[tuple[float, float | None, str | None]] = []

    async def request(self, requests: Mapping[str, ClientRequest]) -> dict[str, Mapping[str, Any]]:
        self.rounds.append({key: request.method for key, request in requests.items()})
        answers: dict[str, Mapping[str, Any]] = {}
        for key, request in requests.items():
            if request.method == "elicitation/create":
                answers[key] = {"action": "accept", "content": {"name": "Bo"}}
            elif request.method == "sampling/createMessage":
                assert request.params["maxTokens"] == 20
                answers[key] = {"role": "assistant", "content": {"type": "text", "text": "hi!"}, "model": "m"}
            else:
                answers[key] = {"roots": [{"uri": "file:///work", "name": "work"}]}
        return answers

    def log(self, level: str, message: str, data: Any = None) -> None:
        self.logged.append((level, message, data))

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        self.progressed.append((progress, total, message))


def test_in_the_library_the_host_channel_answers(make_project: ProjectFactory) -> None:
    rt = Runtime.load(_project(make_project))
    host = HostChannel()
    result = rt.call_sync("demo", {}, channel=host)
    assert result.error is None, result.error
    assert json.loads(result.output) == {
        "client": ["host", None, ["elicitation", "roots", "sampling"]],
        "form": ["accept", {"name": "Bo"}],
        "text": "hi!",
        "roots": ["file:///work"],
        "runs": 1,
    }
    assert host.rounds == [
        {"toolrt_1": "elicitation/create"},
        {"model": "sampling/createMessage", "roots": "roots/list"},
    ]
    assert host.logged == [("info", "starting", {"step": 1})]
    assert host.progressed == [(1, 3, "asking"), (3, 3, None)]

    strict = rt.call_sync("strict", {"mode": "odd"}, channel=host)
    assert strict.error == "mode must be fast or slow"
    assert strict.metadata[PROTOCOL_ERROR] == {
        "code": -32602,
        "message": "mode must be fast or slow",
        "data": {"mode": "odd"},
    }
    assert host.logged[-1] == ("warning", "refusing", None)


def test_without_a_channel_a_request_is_a_missing_capability_error(make_project: ProjectFactory) -> None:
    rt = Runtime.load(_project(make_project))
    result = rt.call_sync("demo", {})
    assert result.error is not None and "did not declare the elicitation capability" in result.error
    assert result.metadata[PROTOCOL_ERROR]["code"] == -32021
    assert result.metadata[PROTOCOL_ERROR]["data"] == {"requiredCapabilities": {"elicitation": {}}}


async def _elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Cy"})


async def _sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="hello"), model="m")


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///srv", "name": "srv"}]})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_over_mcp_the_client_answers_on_both_protocol_versions(make_project: ProjectFactory, mode: str) -> None:
    rt = Runtime.load(_project(make_project))
    progressed: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        progressed.append((progress, total))

    async def main() -> None:
        callbacks: dict[str, Any] = {
            "elicitation_callback": _elicit,
            "sampling_callback": _sample,
            "list_roots_callback": _roots,
        }
        async with serving(rt, mode=mode, log_level="info", **callbacks) as served:
            if mode == "legacy":  # a handshake-era session hears warning and above until it sets a level
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await served.client.set_logging_level("info")
            result = await served.client.call_tool("demo", {}, progress_callback=on_progress)
            assert result.is_error is False, result
            answer = json.loads(result.content[0].text)  # type: ignore[union-attr]
            assert answer["form"] == ["accept", {"name": "Cy"}] and answer["text"] == "hello"
            assert answer["roots"] == ["file:///srv"]
            assert "elicitation" in answer["client"][2] and "sampling" in answer["client"][2]
            modern = answer["client"][1] >= "2026"
            assert modern == (mode == "auto")
            # 2026-07-28: one run per round (the form; then sampling and roots together; then the result).
            assert answer["runs"] == (3 if modern else 1)
            with anyio.fail_after(10):
                while not any(p.logger == "demo" for p in served.logged):
                    await served.client.list_tools()
            logged = [p for p in served.logged if p.logger == "demo"]
            assert logged[0].level == "info" and logged[0].data == {"message": "starting", "data": {"step": 1}}

            with pytest.raises(MCPError, match="mode must be fast or slow") as raised:
                await served.client.call_tool("strict", {"mode": "odd"})
            assert raised.value.error.code == -32602 and raised.value.error.data == {"mode": "odd"}
            # A sync handler logs from its worker thread; the message still arrives, in order.
            with anyio.fail_after(10):
                while not any(p.logger == "strict" for p in served.logged):
                    await served.client.list_tools()
            assert [(p.level, p.data) for p in served.logged if p.logger == "strict"] == [("warning", "refusing")]
        if mode == "legacy":
            assert (3, 3) in progressed and (1, 3) in progressed
        async with serving(rt, mode=mode) as bare:  # declares nothing: the handler's form is -32021
            with pytest.raises(MCPError, match="elicitation capability") as missing:
                await bare.client.call_tool("demo", {})
            assert missing.value.error.code == -32021
            assert missing.value.error.data == {"requiredCapabilities": {"elicitation": {}}}

    run(main)
