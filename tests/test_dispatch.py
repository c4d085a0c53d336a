"""The dispatch pipeline end to end: repair, arguments, permission, execute, truncate, record, events."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from runtime.api import Runtime
from runtime.audit import read_records
from runtime.dispatch import CallEvent
from runtime.errors import ConfigError
from runtime.permissions.ask import AskRequest, Reply
from runtime.result import ToolResult

Factory = Callable[..., Path]
OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def tool(tool_id: str, handler: Mapping[str, Any], parameters: Mapping[str, Any] | None = None, **extra: Any) -> str:
    """A tool file's YAML text."""
    data: dict[str, Any] = {"id": tool_id, "description": f"The {tool_id} test tool.", "parameters": parameters or OBJECT}
    data["handler"] = dict(handler)
    data.update(extra)
    return yaml.safe_dump(data, sort_keys=False)


def text_param(*names: str, required: bool = True, **more: Any) -> dict[str, Any]:
    props: dict[str, Any] = {n: {"type": "string"} for n in names}
    props.update(more)
    return {"type": "object", "properties": props, "required": list(names) if required else []}


HANDLERS = """
import time

import anyio

from runtime.result import ToolResult

CALLS = []

def echo(args, ctx):
    CALLS.append(dict(args))
    return args["text"]

async def aecho(args, ctx):
    await anyio.sleep(0)
    return {"title": "async " + args["text"], "output": args["text"], "metadata": {"n": 1}}

def result(args, ctx):
    return ToolResult(title="made", output="from ToolResult", metadata={"k": "v"})

def integer(args, ctx):
    return 42

def bad_mapping(args, ctx):
    return {"output": 7}

def boom(args, ctx):
    raise ValueError("the disk is on fire")

async def hang(args, ctx):
    await anyio.sleep(3600)

async def progress(args, ctx):
    ctx.metadata(title="halfway", metadata={"percent": 50})
    return "done"
"""


def project(make_project: Factory, tools: dict[str, str], **kw: Any) -> Runtime:
    modules = {"handlers": HANDLERS, **kw.pop("modules", {})}
    return Runtime.load(make_project(tools, modules=modules, **kw))


def py(tool_id: str, function: str, parameters: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, str]:
    return {tool_id: tool(tool_id, {"python": f"handlers:{function}"}, parameters, **extra)}


ECHO = py("echo", "echo", text_param("text"))


# --- repair ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Echo", "ECHO", "eCHO"])
def test_name_differing_only_by_case_is_repaired(make_project: Factory, name: str) -> None:
    rt = project(make_project, ECHO)
    result = rt.call_sync(name, {"text": "hi"})
    assert (result.error, result.output) == (None, "hi")


def test_unknown_name_goes_to_invalid_tool_with_closest_names_first(make_project: Factory) -> None:
    root = make_project(
        {**py("zeta", "echo", text_param("text")), **py("readme", "echo", text_param("text"))}, modules={"handlers": HANDLERS}, builtin_tools=True
    )
    rt = Runtime.load(root)
    result = rt.call_sync("reed", {"filePath": "x"})
    assert result.error is not None
    assert result.title == "Invalid Tool"
    assert "The arguments provided to the tool are invalid: Model tried to call unavailable tool 'reed'." in result.output
    available = result.output.split("Available tools: ", 1)[1].rstrip(".").split(", ")
    assert available[:2] == ["read", "readme"]
    assert "zeta" in available and "invalid" not in available
    records, _ = read_records(rt.snapshot.data_dir / "audit.jsonl")
    assert (records[-1]["tool"], records[-1]["status"]) == ("invalid", "invalid")


def test_unknown_name_without_invalid_tool_is_an_error_result(make_project: Factory) -> None:
    rt = project(make_project, {**ECHO, **py("echo_twice", "echo", text_param("text"))})
    result = rt.call_sync("ecko", {"text": "x"})
    assert result.error == "Model tried to call unavailable tool 'ecko'. Available tools: echo, echo_twice."
    assert result.output == ""


def test_arguments_as_json_string_are_parsed(make_project: Factory) -> None:
    rt = project(make_project, ECHO)
    assert rt.call_sync("echo", '{"text": "from json"}').output == "from json"


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        ("not json", r"the arguments are not valid JSON \(Expecting value at position 0\)"),
        ('{"text": ', r"the arguments are not valid JSON"),
        ("[1, 2]", r"expected a JSON object of arguments, got list"),
    ],
)
def test_arguments_that_are_not_a_json_object_are_an_argument_error(make_project: Factory, raw: str, detail: str) -> None:
    rt = project(make_project, ECHO)
    result = rt.call_sync("echo", raw)
    assert result.error is not None
    assert result.error.startswith("The echo tool was called with invalid arguments: ")
    assert result.error.endswith(".\nPlease rewrite the input so it satisfies the expected schema.")
    assert __import__("re").search(detail, result.error)


def test_schema_defaults_are_applied(make_project: Factory) -> None:
    params = {"type": "object", "properties": {"text": {"type": "string", "default": "fallback"}}}
    rt = project(make_project, py("echo", "echo", params))
    assert rt.call_sync("echo", {}).output == "fallback"
    assert rt.call_sync("echo", {"text": "given"}).output == "given"


def test_every_bad_field_is_named_by_json_pointer(make_project: Factory) -> None:
    params = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "count": {"type": "integer", "minimum": 1},
            "opts": {"type": "object", "properties": {"mode": {"enum": ["a", "b"]}}},
        },
        "required": ["text"],
    }
    rt = project(make_project, py("echo", "echo", params))
    result = rt.call_sync("echo", {"count": 0, "opts": {"mode": "z"}})
    assert result.error is not None
    lines = result.error.splitlines()
    assert lines[0] == "The echo tool was called with invalid arguments: "
    assert lines[-1] == "Please rewrite the input so it satisfies the expected schema."
    assert '- (root): "text" is a required property' in lines
    assert any(line.startswith("- /count: 0 is less than the minimum of 1") for line in lines)
    assert any(line.startswith('- /opts/mode: "z" is not one of') for line in lines)


# --- python handlers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "title", "output", "metadata"),
    [
        ("echo", "", "hello", {}),
        ("aecho", "async hello", "hello", {"n": 1}),
        ("result", "made", "from ToolResult", {"k": "v"}),
    ],
)
def test_python_handlers_sync_async_and_every_result_shape(
    make_project: Factory, function: str, title: str, output: str, metadata: dict[str, Any]
) -> None:
    rt = project(make_project, py("t", function, text_param("text")))
    result = rt.call_sync("t", {"text": "hello"})
    assert (result.error, result.title, result.output, dict(result.metadata)) == (None, title, output, metadata)


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("integer", "The t tool's handler returned int; a handler returns text or a mapping with 'output'"),
        ("bad_mapping", "The t tool's handler returned dict; a handler returns text or a mapping with 'output'"),
        ("boom", "The t tool failed: ValueError: the disk is on fire"),
    ],
)
def test_bad_handler_outcomes_are_clean_error_results(make_project: Factory, function: str, message: str) -> None:
    rt = project(make_project, {**py("t", function), **ECHO})
    result = rt.call_sync("t", {})
    assert result.error is not None and result.error.startswith(message)
    assert "Traceback" not in result.error and 'File "' not in result.error
    assert rt.call_sync("echo", {"text": "still serving"}).output == "still serving"


def test_hanging_handler_times_out_and_the_runtime_keeps_serving(make_project: Factory) -> None:
    rt = project(make_project, {**py("hang", "hang", timeout=0.2), **ECHO})

    async def main() -> tuple[ToolResult, ToolResult]:
        with anyio.fail_after(10):
            first = await rt.call("hang", {})
            return first, await rt.call("echo", {"text": "next"})

    hung, following = anyio.run(main)
    assert hung.error == "The hang tool did not finish within 0.2 seconds and was stopped."
    assert following.output == "next"


def test_abort_event_aborts_an_async_handler(make_project: Factory) -> None:
    rt = project(make_project, py("hang", "hang"))

    async def main() -> ToolResult:
        abort = anyio.Event()
        results: list[ToolResult] = []
        running = anyio.Event()
        rt.subscribe(lambda event: running.set() if event.kind == "running" else None)

        async def go() -> None:
            results.append(await rt.call("hang", {}, abort=abort))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(go)
                await running.wait()
                abort.set()
        return results[0]

    assert anyio.run(main).error == "User aborted the command"


def test_events_reach_listeners_in_order(make_project: Factory) -> None:
    rt = project(make_project, {**py("progress", "progress"), **py("boom", "boom")})
    events: list[CallEvent] = []
    unsubscribe = rt.subscribe(events.append)
    rt.call_sync("progress", {}, call_id="c1")
    rt.call_sync("boom", {}, call_id="c2")
    unsubscribe()
    rt.call_sync("progress", {})
    assert [(e.kind, e.call_id, e.tool) for e in events] == [
        ("running", "c1", "progress"),
        ("metadata", "c1", "progress"),
        ("completed", "c1", "progress"),
        ("running", "c2", "boom"),
        ("error", "c2", "boom"),
    ]
    assert events[0].data == {"input": {}}
    assert events[1].data == {"title": "halfway", "metadata": {"percent": 50}}
    assert events[2].data["result"].output == "done"
    assert events[4].data["result"].error.startswith("The boom tool failed: ValueError")


# --- argv and shell handlers ----------------------------------------------------------------------

LISTING = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "string"}}, "flag": {"type": "string"}},
    "required": ["items"],
}


@pytest.mark.parametrize(
    ("args", "output"),
    [
        ({"items": ["a b", "c"]}, "[a b][c]"),
        ({"items": ["a"], "flag": "-x"}, "[-x][a]"),
        ({"items": []}, "[]"),  # no arguments at all: printf still prints its format once
    ],
)
def test_argv_list_expands_and_absent_optional_is_omitted(make_project: Factory, args: dict[str, Any], output: str) -> None:
    rt = project(make_project, {"t": tool("t", {"argv": ["printf", "[%s]", "{{ flag }}", "{{ items }}"]}, LISTING)})
    result = rt.call_sync("t", args)
    assert (result.error, result.output, result.metadata["exit"]) == (None, output, 0)


def test_shell_list_becomes_several_quoted_words(make_project: Factory) -> None:
    rt = project(make_project, {"t": tool("t", {"shell": "printf '[%s]' {{ items }}"}, LISTING)})
    assert rt.call_sync("t", {"items": ["a b", "$(x)", "'"]}).output == "[a b][$(x)][']"


def test_non_zero_exit_is_an_error_result_with_the_exit_code(make_project: Factory) -> None:
    rt = project(make_project, {"t": tool("t", {"shell": "echo partial; exit 3"})})
    result = rt.call_sync("t", {})
    assert result.error == "The command exited with code 3.\npartial"
    assert (result.output, result.metadata["exit"]) == ("partial\n", 3)


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def test_timeout_kills_the_whole_process_tree(make_project: Factory, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    script = "sleep 30 & echo $! >> {{ out }}; sleep 30 & echo $! >> {{ out }}; echo $$ >> {{ out }}; wait"
    rt = project(make_project, {"t": tool("t", {"shell": script}, text_param("out"), timeout=0.5)})
    started = time.monotonic()
    result = rt.call_sync("t", {"out": str(pidfile)})
    assert time.monotonic() - started < 10
    assert result.error is not None and result.error.startswith("The command timed out.")
    assert "t tool terminated command after exceeding timeout 500 ms" in result.output
    pids = [int(line) for line in pidfile.read_text().split()]
    assert len(pids) == 3
    deadline = time.monotonic() + 5
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.02)  # polling a condition with a deadline, not waiting a fixed time
    assert _alive(pids) == []


def test_secrets_in_the_environment_are_not_passed(make_project: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "sk-secret")
    monkeypatch.setenv("VISIBLE_ONE", "seen")
    rt = project(
        make_project,
        {
            "plain": tool("plain", {"argv": ["env"]}),
            "allowed": tool("allowed", {"argv": ["env"], "env": {"allow": ["VISIBLE_*"], "set": {"GREETING": "hi {{ who }}"}}}, text_param("who")),
        },
    )
    plain = rt.call_sync("plain", {}).output
    assert "sk-secret" not in plain and "MY_API_KEY" not in plain and "VISIBLE_ONE" not in plain
    allowed = rt.call_sync("allowed", {"who": "bob"}).output.splitlines()
    assert "VISIBLE_ONE=seen" in allowed and "GREETING=hi bob" in allowed
    assert not any(line.startswith("MY_API_KEY=") for line in allowed)


def test_stdin_template_feeds_the_process(make_project: Factory) -> None:
    rt = project(make_project, {"t": tool("t", {"argv": ["cat"], "stdin": "line: {{ text }}\n"}, text_param("text"))})
    assert rt.call_sync("t", {"text": "$(nope)"}).output == "line: $(nope)\n"


def test_stdin_is_closed_unless_declared(make_project: Factory) -> None:
    rt = project(make_project, {"t": tool("t", {"argv": ["cat"]}, timeout=5)})
    result = rt.call_sync("t", {})
    assert (result.error, result.output) == (None, "")


# --- permission -----------------------------------------------------------------------------------

PERMS = """
permission:
  "*": allow
  echo: {"*": allow, "no*": deny, "ask*": ask}
"""
ECHO_PATTERN = py("echo", "echo", text_param("text"), permission={"patterns": ["{{ text }}"], "always": ["ask*"]})


def asker(reply: Reply, seen: list[AskRequest]) -> Callable[[AskRequest], Any]:
    async def ask(request: AskRequest) -> Reply:
        seen.append(request)
        return reply

    return ask


def test_allow_and_deny_by_pattern(make_project: Factory) -> None:
    rt = project(make_project, ECHO_PATTERN, permissions=PERMS)
    assert rt.call_sync("echo", {"text": "fine"}).output == "fine"
    denied = rt.call_sync("echo", {"text": "nope"})
    assert denied.error is not None and "echo `nope`" in denied.error and "Denied:" in denied.error
    assert denied.output == ""


def test_ask_without_an_asker_is_denied_asking_for_approval(make_project: Factory) -> None:
    rt = project(make_project, ECHO_PATTERN, permissions=PERMS)
    result = rt.call_sync("echo", {"text": "ask me"})
    assert result.error is not None
    assert result.error.startswith("This call needs approval (echo `ask me`) but no one is available to approve it")


@pytest.mark.parametrize(
    ("reply", "error", "second_asks"),
    [
        (Reply("once"), None, True),
        (Reply("always"), None, False),
        (Reply("reject"), "The user rejected permission to use this specific tool call.", True),
        (Reply("reject", "use the other tool"), "The user rejected permission to use this specific tool call with the following feedback: use the other tool", True),
    ],
)
def test_ask_with_an_asker(make_project: Factory, reply: Reply, error: str | None, second_asks: bool) -> None:
    rt = project(make_project, ECHO_PATTERN, permissions=PERMS)
    seen: list[AskRequest] = []
    first = rt.call_sync("echo", {"text": "ask one"}, ask=asker(reply, seen))
    assert first.error == error
    assert first.output == ("" if error else "ask one")
    assert [(d.permission, d.pattern) for d in seen[0].pending] == [("echo", "ask one")]
    rt.call_sync("echo", {"text": "ask two"}, ask=asker(Reply("once"), seen))
    assert len(seen) == (2 if second_asks else 1)


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "symlink"])
def test_path_arguments_outside_the_root_ask_external_directory(make_project: Factory, tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    rt = project(make_project, py("echo", "echo", text_param("text"), permission={"paths": ["text"]}))
    root = rt.root
    (root / "link").symlink_to(outside)
    value = {"absolute": str(outside / "f.txt"), "dotdot": "../outside/f.txt", "symlink": "link/f.txt"}[kind]
    if kind == "dotdot":
        value = os.path.relpath(outside / "f.txt", root)  # "../outside/f.txt" from the project root
        assert value.startswith("../")
    seen: list[AskRequest] = []
    result = rt.call_sync("echo", {"text": value}, ask=asker(Reply("reject"), seen))
    assert result.error == "The user rejected permission to use this specific tool call."
    assert [(d.permission, d.pattern) for d in seen[0].pending] == [("external_directory", f"{outside}/*")]
    inside = rt.call_sync("echo", {"text": "sub/f.txt"})
    assert (inside.error, inside.output) == (None, "sub/f.txt")


def test_third_identical_call_asks_doom_loop(make_project: Factory) -> None:
    rt = project(make_project, ECHO)
    results = [rt.call_sync("echo", {"text": "again"}) for _ in range(3)]
    assert [r.error for r in results[:2]] == [None, None]
    assert results[2].error is not None
    assert results[2].error.startswith("This call needs approval (doom_loop `echo`)")
    seen: list[AskRequest] = []
    fourth = rt.call_sync("echo", {"text": "again"}, ask=asker(Reply("once"), seen))
    assert fourth.output == "again"
    assert [(d.permission, d.pattern) for d in seen[0].pending] == [("doom_loop", "echo")]
    other = rt.call_sync("echo", {"text": "again"}, session="other")
    assert other.error is None


def test_confirm_title_and_message_reach_the_asker(make_project: Factory) -> None:
    perms = 'permission: {"*": allow, echo: ask}\n'
    tools = py("echo", "echo", text_param("text"), confirm={"title": "Echo {{ text }}?", "message": "Will print {{ text }} once"})
    rt = project(make_project, tools, permissions=perms)
    seen: list[AskRequest] = []
    assert rt.call_sync("echo", {"text": "hey"}, ask=asker(Reply("once"), seen)).output == "hey"
    assert (seen[0].title, seen[0].message) == ("Echo hey?", "Will print hey once")
