"""Long-running tools as MCP tasks (the tasks extension, SEP-2663), driven by the official client.

`toolrt serve` over streamable HTTP on 127.0.0.1 in the test's event loop; the client is the SDK's
`Client` on 2026-07-28 with a small client extension that claims the task handle and polls `tasks/get`
(answering `inputRequests` through `tasks/update`). A task tool's call comes back through the task; an
ask inside it is answered through `tasks/update`; `tasks/cancel`, the tool's timeout and the end of the
owning session stop its process tree; another session's, a made-up or garbage task id is -32602.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from processes import holding
from pydantic import ConfigDict
from serve_http import serving
from test_serve_sessions import _alive, _statuses

from toolrt.api import Runtime
from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall
from toolrt.faces.serve import ServeLimits
from toolrt.faces.serve_sessions import SESSION_META_KEY
from toolrt.faces.serve_tasks import EXTENSION

MODERN = "2026-07-28"
SLEEPER = """\
id: sleeper
description: "Sleeps for the given number of seconds, as a task: for the tasks tests of toolrt serve."
parameters: {type: object, properties: {seconds: {type: string}}, required: [seconds]}
handler: {shell: "echo started; exec sleep {{ seconds }}"}
timeout: 120
task: true
"""
SHORT = """\
id: short
description: "Sleeps for the given number of seconds under a one-second timeout, as a task."
parameters: {type: object, properties: {seconds: {type: string}}, required: [seconds]}
handler: {shell: "exec sleep {{ seconds }}"}
timeout: 1
task: true
"""
GUARDED = """\
id: guarded
description: "Echoes the word it is given; its permission asks, for the tasks tests of toolrt serve."
parameters: {type: object, properties: {word: {type: string}}, required: [word]}
handler: {argv: [echo, "{{ word }}"]}
permission: {patterns: ["{{ word }}"]}
"""
NAMER = """\
id: namer
description: "Asks for a name in a form and greets it: for the tasks tests of toolrt serve."
parameters: {type: object, properties: {}}
handler: {python: "namer_tool:namer"}
task: required
"""
NAMER_CODE = """\
from toolrt import ToolContext


async def namer(args, ctx: ToolContext) -> str:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    ctx.progress(1, 2, "Asking for a name")
    answer = await ctx.elicit("Your name?", schema)
    return f"Hello, {(answer.content or {}).get('name')}!"
"""

OPEN = {"command": "true", "description": "Open a session"}
Answer = Callable[[str, Mapping[str, Any]], Mapping[str, Any]]


class TaskIdParams(types.RequestParams):
    task_id: str


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any]


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


class CreatedTask(types.Result):
    """The task handle `tools/call` answers with (`resultType: "task"`)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class DetailedTask(types.Result):
    """A `tasks/get` answer (keys it does not name are kept, to be checked)."""

    model_config = ConfigDict(extra="allow")
    result_type: str
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Ack(types.Result):
    """The empty answer of `tasks/update` and `tasks/cancel` (keys it does not name are kept)."""

    model_config = ConfigDict(extra="allow")
    result_type: str


def _params(task_id: str, token: str | None = None, **fields: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"taskId": task_id, **fields}
    if token is not None:
        params["_meta"] = {SESSION_META_KEY: token}
    return params


async def get_task(client: Client, task_id: str, token: str | None = None) -> DetailedTask:
    request = GetTask(params=TaskIdParams.model_validate(_params(task_id, token)))
    return await client.session.send_request(request, DetailedTask)


async def cancel_task(client: Client, task_id: str, token: str | None = None) -> Ack:
    request = CancelTask(params=TaskIdParams.model_validate(_params(task_id, token)))
    return await client.session.send_request(request, Ack)


class Tasks(ClientExtension):
    """The client side of the tasks extension: a task handle is polled until it ends; the requests it
    waits on are answered by `answer(key, request)` through `tasks/update`."""

    identifier = EXTENSION

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer = answer
        self.handles: list[CreatedTask] = []
        self.seen: list[DetailedTask] = []
        """Every `tasks/get` answer while polling."""

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, handle: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.handles.append(handle)
        session = ctx.session
        with anyio.fail_after(20):
            while True:
                task = await session.send_request(GetTask(params=TaskIdParams(task_id=handle.task_id)), DetailedTask)
                self.seen.append(task)
                if task.status == "completed" and task.result is not None:
                    return types.CallToolResult.model_validate(task.result)
                if task.status == "failed" and task.error is not None:
                    raise MCPError(task.error["code"], task.error["message"], task.error.get("data"))
                assert task.status != "cancelled", "the task was cancelled"
                if task.status == "input_required" and task.input_requests and self.answer is not None:
                    answers = {key: self.answer(key, request) for key, request in task.input_requests.items()}
                    params = UpdateParams(task_id=handle.task_id, input_responses=answers)
                    ack = await session.send_request(UpdateTask(params=params), Ack)
                    assert ack.result_type == "complete" and not ack.model_extra
                    continue
                await anyio.sleep((handle.poll_interval_ms or 500) / 1000)


def project(tmp_path: Path, permissions: str = "") -> Path:
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    for name, text in (("sleeper", SLEEPER), ("short", SHORT), ("guarded", GUARDED), ("namer", NAMER)):
        (root / "tools.d" / f"{name}.yaml").write_text(text, encoding="utf-8")
    (root / "namer_tool.py").write_text(NAMER_CODE, encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: [bash]\n" + permissions, encoding="utf-8")
    (root / "permissions.yaml").write_text("permission:\n  '*': allow\n  guarded: ask\n", encoding="utf-8")
    return root


def run(root: Path, body: Callable[[Runtime, str], Awaitable[None]], limits: ServeLimits | None = None) -> Runtime:
    rt = Runtime.load(root)

    async def main() -> None:
        with anyio.fail_after(60):
            async with serving(rt, limits) as url:
                await body(rt, url)

    anyio.run(main)
    return rt


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _marker() -> str:
    """A sleep length no other process holds: it finds the sleeper's pid on the host."""
    return f"5{uuid.uuid4().int % 10**6:06d}"


async def _handle(client: Client, tool: str, arguments: dict[str, Any], token: str | None = None) -> CreatedTask:
    meta = cast(types.RequestParamsMeta, {SESSION_META_KEY: token}) if token is not None else None
    handle = await client.session.call_tool(tool, arguments, meta=meta, allow_claimed=True)
    assert isinstance(handle, CreatedTask), handle
    return handle


async def _gone(marker: str) -> None:
    with anyio.fail_after(15):
        while any(_alive(pid) for pid in holding(marker)):
            await anyio.sleep(0.05)


def test_a_task_tool_answers_with_a_task_whose_result_the_client_polls(tmp_path: Path) -> None:
    tasks = Tasks()

    async def body(rt: Runtime, url: str) -> None:
        async with Client(url, mode=MODERN, extensions=[tasks]) as client:
            result = await client.call_tool("sleeper", {"seconds": "0.3"})
            assert _text(result) == "started\n" and result.is_error is False
        (handle,) = tasks.handles
        assert handle.status == "working" and handle.poll_interval_ms == 500
        assert handle.ttl_ms is not None and handle.ttl_ms >= 120_000
        done = tasks.seen[-1]
        assert (done.status, done.result_type, done.model_extra) == ("completed", "complete", {})  # no requestState
        async with Client(url, mode=MODERN) as plain:  # no tasks extension: the result when the call ends
            result = await plain.call_tool("sleeper", {"seconds": "0.1"})
            assert _text(result) == "started\n"
        assert _statuses(rt, "sleeper") == ["ok", "ok"]

    run(project(tmp_path), body)


def test_an_ask_and_an_elicitation_inside_a_task_go_through_tasks_update(tmp_path: Path) -> None:
    asked: list[dict[str, Any]] = []

    def answer(key: str, request: Mapping[str, Any]) -> Mapping[str, Any]:
        asked.append(dict(request))
        if "decision" in request["params"]["requestedSchema"]["properties"]:
            return {"action": "accept", "content": {"decision": "once"}}
        return {"action": "accept", "content": {"name": "Ada"}}

    tasks = Tasks(answer)

    async def body(rt: Runtime, url: str) -> None:
        async with Client(url, mode=MODERN, extensions=[tasks], elicitation_callback=_never) as client:
            named = await client.call_tool("namer", {})
            assert _text(named) == "Hello, Ada!"
            guarded = await client.call_tool("guarded", {"word": "hi"})  # a task via serve.task_tools
            assert _text(guarded) == "hi\n"
        assert [request["method"] for request in asked] == ["elicitation/create", "elicitation/create"]
        assert "guarded: hi" in asked[1]["params"]["message"]
        assert [task.status for task in tasks.seen].count("input_required") == 2
        assert tasks.seen[0].status_message == "Asking for a name"  # the handler's progress, while it waits

    run(project(tmp_path, "serve: {task_tools: [guarded]}\n"), body)


async def _never(context: Any, params: Any) -> Any:
    raise AssertionError("inside a task, a request reaches the client through tasks/get, not elicitation/create")


def test_tasks_cancel_stops_the_call_and_kills_its_process_tree(tmp_path: Path) -> None:
    seconds = _marker()

    async def body(rt: Runtime, url: str) -> None:
        async with Client(url, mode=MODERN, extensions=[Tasks()]) as client:
            handle = await _handle(client, "sleeper", {"seconds": seconds})
            with anyio.fail_after(15):
                while not holding(seconds):
                    await anyio.sleep(0.02)
            assert (await get_task(client, handle.task_id)).status == "working"
            ack = await cancel_task(client, handle.task_id)
            assert ack.result_type == "complete" and not ack.model_extra
            await _gone(seconds)
            task = await get_task(client, handle.task_id)
            assert task.status == "cancelled" and task.result is None
            assert (await cancel_task(client, handle.task_id)).result_type == "complete"  # again: the same ack
        with anyio.fail_after(10):
            while not _statuses(rt, "sleeper"):
                await anyio.sleep(0.05)
        assert _statuses(rt, "sleeper") == ["cancelled"]

    run(project(tmp_path), body)


def test_a_task_ends_at_its_tools_timeout_with_its_process_tree(tmp_path: Path) -> None:
    seconds = _marker()
    tasks = Tasks()

    async def body(rt: Runtime, url: str) -> None:
        async with Client(url, mode=MODERN, extensions=[tasks]) as client:
            result = await client.call_tool("short", {"seconds": seconds})
        assert "short tool terminated command after exceeding timeout 1000 ms" in _text(result)
        assert tasks.seen[-1].status == "completed"
        await _gone(seconds)

    run(project(tmp_path), body)


def test_the_end_of_its_session_cancels_a_task_and_forgets_it(tmp_path: Path) -> None:
    seconds = _marker()

    async def body(rt: Runtime, url: str) -> None:
        async with Client(url, mode=MODERN, extensions=[Tasks()]) as client:
            opened = await client.call_tool("bash", OPEN, meta=_new())  # a toolrt session of its own
            assert opened.meta is not None
            token = opened.meta[SESSION_META_KEY]
            handle = await _handle(client, "sleeper", {"seconds": seconds}, token)
            assert (await get_task(client, handle.task_id, token)).status == "working"
            with anyio.fail_after(15):
                while not holding(seconds):
                    await anyio.sleep(0.02)
            await client.call_tool("bash", OPEN, meta=_new())  # the limit is one: the first is released
            await _gone(seconds)
            with pytest.raises(MCPError, match="Unknown task") as unknown:
                await get_task(client, handle.task_id, token)
            assert unknown.value.code == types.INVALID_PARAMS
        assert _statuses(rt, "sleeper") == ["cancelled"]

    run(project(tmp_path, ""), body, ServeLimits(max_sessions=1))


def _new() -> types.RequestParamsMeta:
    return cast(types.RequestParamsMeta, {SESSION_META_KEY: "new"})


def test_a_foreign_made_up_or_garbage_task_id_and_garbage_answers_are_errors(tmp_path: Path) -> None:
    async def body(rt: Runtime, url: str) -> None:
        async with Client(url, mode=MODERN, extensions=[Tasks()], elicitation_callback=_never) as client:
            opened = await client.call_tool("bash", OPEN, meta=_new())  # a toolrt session of its own
            assert opened.meta is not None
            token = opened.meta[SESSION_META_KEY]
            handle = await _handle(client, "namer", {}, token)
            with anyio.fail_after(10):
                while (await get_task(client, handle.task_id, token)).status != "input_required":
                    await anyio.sleep(0.05)
            for task_id, who in ((handle.task_id, None), ("made-up", token), ("\x00' OR 1=1 --" * 40, token)):
                for send in (get_task, cancel_task):
                    with pytest.raises(MCPError, match="Unknown task") as unknown:
                        await send(client, task_id, who)
                    assert unknown.value.code == types.INVALID_PARAMS
            task = await get_task(client, handle.task_id, token)
            assert task.input_requests is not None
            (key,) = task.input_requests
            request = UpdateTask(
                params=UpdateParams.model_validate(
                    _params(handle.task_id, token, inputResponses={key: {"action": "maybe"}})
                )
            )
            with pytest.raises(MCPError, match="not a valid elicitation/create result"):
                await client.session.send_request(request, Ack)
            assert (await get_task(client, handle.task_id, token)).status == "input_required"
            await cancel_task(client, handle.task_id, token)
        async with Client(url, mode=MODERN) as plain:  # without the extension
            with pytest.raises(MCPError, match=EXTENSION) as missing:
                await get_task(plain, "anything")
            assert missing.value.code == -32021
            with pytest.raises(MCPError, match="runs only as a task") as required:
                await plain.call_tool("namer", {})
            assert required.value.code == -32021
            assert required.value.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}

    run(project(tmp_path), body)


def test_bash_in_the_background_is_a_task_and_runs_in_the_foreground_elsewhere(tmp_path: Path) -> None:
    tasks = Tasks()
    args = {"command": "echo done", "description": "Print done", "background": True}

    async def body(rt: Runtime, url: str) -> None:
        async with Client(url, mode=MODERN, extensions=[tasks]) as client:
            assert _text(await client.call_tool("bash", args)).startswith("done")
        assert len(tasks.handles) == 1
        async with Client(url, mode=MODERN) as plain:
            assert _text(await plain.call_tool("bash", args)).startswith("done")
        assert len(tasks.handles) == 1
        description = next(tool for tool in rt.tools().specs("mcp") if tool["name"] == "bash")["description"]
        assert "Do not poll" in description
        assert await rt.call("bash", args) is not None  # the library: no task, the result at once

    run(project(tmp_path), body)


def test_continue_as_task_is_false_where_no_client_can_hold_a_task(tmp_path: Path) -> None:
    assert anyio.run(ToolContext(DetachedCall(tool_id="t", root=tmp_path, data_dir=tmp_path)).continue_as_task) is False


def test_task_takes_true_false_or_required_and_nothing_else(tmp_path: Path) -> None:
    from toolrt.errors import ConfigError

    root = project(tmp_path)
    assert Runtime.load(root).snapshot.tools["namer"].definition.task == "required"
    assert Runtime.load(root).snapshot.tools["guarded"].definition.task == "never"
    (root / "tools.d" / "namer.yaml").write_text(NAMER.replace("task: required", "task: later"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"namer\.yaml:5:1: a string \('later'\) is not one of"):
        Runtime.load(root)


def test_serve_task_tools_comes_from_toolrt_yaml_or_the_environment(tmp_path: Path, monkeypatch: Any) -> None:
    assert Runtime.load(
        project(tmp_path / "a", "serve: {task_tools: [guarded]}\n")
    ).settings.values.serve.task_tools == ("guarded",)
    monkeypatch.setenv("TOOLRT_SERVE__TASK_TOOLS", '["bash", "guarded"]')
    assert Runtime.load(project(tmp_path / "b")).settings.values.serve.task_tools == ("bash", "guarded")
    monkeypatch.setenv("TOOLRT_SERVE__TASK_TOOLS", "bash, guarded")
    assert Runtime.load(project(tmp_path / "c")).settings.values.serve.task_tools == ("bash", "guarded")
