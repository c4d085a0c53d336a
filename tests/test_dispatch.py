"""The dispatch pipeline end to end: repair, arguments, permission, execute, truncate, record, events."""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from processes import holding

from toolrt.api import Runtime
from toolrt.audit import read_records
from toolrt.build.project_import import project_module_name
from toolrt.call.events import CallEvent
from toolrt.errors import ConfigError
from toolrt.permissions.ask import AskRequest, Reply
from toolrt.result import ToolResult
from toolrt.store import session_id

Factory = Callable[..., Path]
OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def tool(tool_id: str, handler: Mapping[str, Any], parameters: Mapping[str, Any] | None = None, **extra: Any) -> str:
    """A tool file's YAML text."""
    data: dict[str, Any] = {
        "id": tool_id,
        "description": f"The {tool_id} test tool.",
        "parameters": parameters or OBJECT,
    }
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

from toolrt.result import ToolResult

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

async def pause(args, ctx):
    await anyio.sleep(0)
    return "done"

async def fail_after_a_pause(args, ctx):
    await anyio.sleep(0)
    raise ValueError("failed after a pause")
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
        {**py("zeta", "echo", text_param("text")), **py("readme", "echo", text_param("text"))},
        modules={"handlers": HANDLERS},
        builtin_tools=True,
    )
    rt = Runtime.load(root)
    result = rt.call_sync("reed", {"filePath": "x"})
    assert result.error is not None
    assert result.title == "Invalid Tool"
    assert (
        "The arguments provided to the tool are invalid: Model tried to call unavailable tool 'reed'." in result.output
    )
    available = result.output.split("Available tools: ", 1)[1].rstrip(".").split(", ")
    assert available[:2] == ["read", "readme"]
    assert "zeta" in available and "invalid" not in available
    records, _ = read_records(rt.snapshot.data_dir / "audit.jsonl")
    assert (records[-1]["tool"], records[-1]["status"]) == ("invalid", "invalid")


def test_unknown_or_hidden_name_under_a_deny_all_agent_still_lists_the_offered_tools(make_project: Factory) -> None:
    rt = Runtime.load(make_project({}, builtin_tools=True))
    offered = rt.tools(agent="explore").names()
    assert "write" not in offered and "grep" in offered
    for name in ("write", "gerp"):  # hidden by explore's rules; unknown
        result = rt.call_sync(name, {"pattern": "x"}, agent="explore")
        assert result.output.startswith(
            f"The arguments provided to the tool are invalid: Model tried to call unavailable tool '{name}'. "
            "Available tools: "
        )
        available = result.output.split("Available tools: ", 1)[1].rstrip(".").split(", ")
        assert sorted(available) == sorted(offered)
    assert rt.call_sync("gerp", {}, agent="explore").output.split("Available tools: ")[1].startswith("grep")


def test_a_call_without_a_tool_name_gets_its_own_text(make_project: Factory) -> None:
    rt = Runtime.load(make_project({}, builtin_tools=True))
    result = rt.call_sync(" ", {}, agent="explore")
    assert result.output.startswith(
        "The arguments provided to the tool are invalid: Model called a tool without a name. "
        "Call one of the available tools by its name: "
    )


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
def test_arguments_that_are_not_a_json_object_are_an_argument_error(
    make_project: Factory, raw: str, detail: str
) -> None:
    rt = project(make_project, ECHO)
    result = rt.call_sync("echo", raw)
    assert result.error is not None
    assert result.error.startswith("The echo tool was called with invalid arguments: ")
    assert result.error.endswith(".\nPlease rewrite the input so it satisfies the expected schema.")
    assert re.search(detail, result.error)


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
            "opts": {"type": "object", "properties": {"mode": {"enum": ["a", "b", "c", 1, None]}}},
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
    assert any(
        line.startswith('- /opts/mode: "z" is not one of the allowed values: "a", "b", "c", 1, null') for line in lines
    )


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


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_abort_event_aborts_an_async_handler(make_project: Factory, backend: str) -> None:
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

    assert anyio.run(main, backend=backend).error == "User aborted the command"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_abort_event_that_is_never_set_changes_nothing(make_project: Factory, backend: str) -> None:
    """The handler runs in the caller's task to its end, its failure is its own, and nothing is left waiting."""
    rt = project(make_project, {**py("pause", "pause"), **py("fail", "fail_after_a_pause")})

    async def main() -> tuple[list[ToolResult], int]:
        abort = anyio.Event()
        results = [await rt.call("pause", {}, abort=abort, session=str(n)) for n in range(3)]
        results.append(await rt.call("fail", {}, abort=abort))
        await anyio.lowlevel.checkpoint()  # a waiter cancelled at the end of a call is gone by now
        return results, _pending_tasks(backend)

    results, pending = anyio.run(main, backend=backend)
    assert [r.error for r in results[:3]] == [None, None, None]
    assert results[3].error == "The fail tool failed: ValueError: failed after a pause"
    assert pending == 0


def _pending_tasks(backend: str) -> int:
    """Tasks of the running asyncio loop other than the current one (0 on other loops: none to leak)."""
    if backend != "asyncio":
        return 0
    import asyncio

    return len(asyncio.all_tasks() - {asyncio.current_task()})


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_abort_set_before_the_call_stops_the_handler_at_its_first_wait(make_project: Factory, backend: str) -> None:
    rt = project(make_project, py("hang", "hang"))

    async def main() -> ToolResult:
        abort = anyio.Event()
        abort.set()
        with anyio.fail_after(10):
            return await rt.call("hang", {}, abort=abort)

    assert anyio.run(main, backend=backend).error == "User aborted the command"


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
    assert events[2].data["start"] <= events[2].data["end"] == events[2].time
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
def test_argv_list_expands_and_absent_optional_is_omitted(
    make_project: Factory, args: dict[str, Any], output: str
) -> None:
    rt = project(make_project, {"t": tool("t", {"argv": ["printf", "[%s]", "{{ flag }}", "{{ items }}"]}, LISTING)})
    result = rt.call_sync("t", args)
    assert (result.error, result.output, result.metadata["exit"]) == (None, output, 0)


def test_shell_list_becomes_several_quoted_words(make_project: Factory) -> None:
    rt = project(make_project, {"t": tool("t", {"shell": "printf '[%s]' {{ items }}"}, LISTING)})
    assert rt.call_sync("t", {"items": ["a b", "$(x)", "'"]}).output == "[a b][$(x)][']"


def test_a_non_zero_exit_in_ok_exit_is_stated_in_the_output_not_an_error(make_project: Factory) -> None:
    rt = project(make_project, {"t": tool("t", {"shell": "echo partial; exit 3", "ok_exit": [0, 3]})})
    result = rt.call_sync("t", {})
    assert result.error is None
    assert result.output == (
        "partial\n\n\n<toolrt_metadata>\nThe command exited with status 3, which the t tool counts as success "
        "(success: 0, 3).\n</toolrt_metadata>"
    )
    assert result.metadata["exit"] == 3


def test_empty_output_is_stated(make_project: Factory) -> None:
    rt = project(make_project, {"t": tool("t", {"shell": "true"})})
    assert rt.call_sync("t", {}).output == (
        "\n\n<toolrt_metadata>\nThe command succeeded (exit status 0) and printed no output.\n</toolrt_metadata>"
    )


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
    # Unique sleep lengths mark the tree: inside the sandbox's PID namespace `$!` and `$$` are no host pids.
    marker = f"3{uuid.uuid4().int % 10**5:05d}"
    script = f"sleep {marker}1 & sleep {marker}2 & echo started >> {{{{ out }}}}; wait"
    rt = project(make_project, {"t": tool("t", {"shell": script}, text_param("out"), timeout=0.5)})
    started = time.monotonic()
    result = rt.call_sync("t", {"out": str(tmp_path / "started")})
    assert time.monotonic() - started < 10
    assert result.error is None
    assert "t tool terminated command after exceeding timeout 500 ms. If it needs more time" in result.output
    assert (tmp_path / "started").read_text() == "started\n"
    deadline = time.monotonic() + 5
    while _alive(holding(marker)) and time.monotonic() < deadline:
        time.sleep(0.02)  # polling a condition with a deadline, not waiting a fixed time
    assert _alive(holding(marker)) == []


def test_secrets_in_the_environment_are_not_passed(make_project: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "sk-secret")
    monkeypatch.setenv("VISIBLE_ONE", "seen")
    rt = project(
        make_project,
        {
            "plain": tool("plain", {"argv": ["env"]}),
            "allowed": tool(
                "allowed",
                {"argv": ["env"], "env": {"allow": ["VISIBLE_*"], "set": {"GREETING": "hi {{ who }}"}}},
                text_param("who"),
            ),
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
    rt = project(make_project, {"t": tool("t", {"argv": ["cat"]}, timeout=20)})
    result = rt.call_sync("t", {})
    assert (result.error, result.output) == (
        None,
        "\n\n<toolrt_metadata>\nThe command succeeded (exit status 0) and printed no output.\n</toolrt_metadata>",
    )


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
        (
            Reply("reject", "use the other tool"),
            "The user rejected permission to use this specific tool call with the following feedback: "
            "use the other tool",
            True,
        ),
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
def test_path_arguments_outside_the_root_ask_external_directory(
    make_project: Factory, tmp_path: Path, kind: str
) -> None:
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
    assert results[2].error.startswith(
        "You made this exact call (echo with the same arguments) 3 times in a row, and it was stopped as a loop: "
        "the result would not change. Use what the earlier results said, or try another approach.\n"
        "This call needs approval (doom_loop `echo`)"
    )
    seen: list[AskRequest] = []
    fourth = rt.call_sync("echo", {"text": "again"}, ask=asker(Reply("once"), seen))
    assert fourth.output == "again"
    assert [(d.permission, d.pattern) for d in seen[0].pending] == [("doom_loop", "echo")]
    other = rt.call_sync("echo", {"text": "again"}, session="other")
    assert other.error is None


def test_confirm_title_and_message_reach_the_asker(make_project: Factory) -> None:
    perms = 'permission: {"*": allow, echo: ask}\n'
    tools = py(
        "echo",
        "echo",
        text_param("text"),
        confirm={"title": "Echo {{ text }}?", "message": "Will print {{ text }} once"},
    )
    rt = project(make_project, tools, permissions=perms)
    seen: list[AskRequest] = []
    assert rt.call_sync("echo", {"text": "hey"}, ask=asker(Reply("once"), seen)).output == "hey"
    assert (seen[0].title, seen[0].message) == ("Echo hey?", "Will print hey once")


# --- truncation -----------------------------------------------------------------------------------

LINES = """
def lines(args, ctx):
    return "\\n".join(f"line {i}" for i in range(args["n"]))
"""
N_PARAM = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
HINT = "The tool call succeeded but the output was truncated. Full output saved to: "


def _saved(output: str) -> Path:
    return Path(output.split(HINT, 1)[1].splitlines()[0])


def test_output_over_2000_lines_is_truncated_with_a_hint_naming_the_full_file(make_project: Factory) -> None:
    tools = {"lines": tool("lines", {"python": "lines:lines"}, N_PARAM)}
    rt = project(make_project, tools, modules={"lines": LINES})
    result = rt.call_sync("lines", {"n": 2500})
    full = "\n".join(f"line {i}" for i in range(2500))
    assert result.error is None and result.metadata["truncated"] is True
    assert result.output.startswith("line 0\nline 1\n")
    assert "line 1999\n\n...500 lines truncated...\n\n" + HINT in result.output
    assert "line 2000" not in result.output
    saved = _saved(result.output)
    assert saved == Path(result.metadata["outputPath"])
    assert saved.read_text(encoding="utf-8") == full
    assert saved.is_relative_to(rt.snapshot.data_dir)
    short = rt.call_sync("lines", {"n": 2000})
    assert "truncated" not in short.metadata and short.output.count("\n") == 1999


def test_truncate_false_leaves_output_untouched(make_project: Factory) -> None:
    tools = {"lines": tool("lines", {"python": "lines:lines"}, N_PARAM, truncate=False)}
    rt = project(make_project, tools, modules={"lines": LINES})
    result = rt.call_sync("lines", {"n": 3000})
    assert result.output == "\n".join(f"line {i}" for i in range(3000))
    assert "truncated" not in result.metadata


def test_per_tool_truncate_settings_tail(make_project: Factory) -> None:
    tools = {"lines": tool("lines", {"python": "lines:lines"}, N_PARAM, truncate={"max_lines": 5, "direction": "tail"})}
    rt = project(make_project, tools, modules={"lines": LINES})
    result = rt.call_sync("lines", {"n": 8})
    assert result.output.startswith("...3 lines truncated...\n\n" + HINT)
    assert result.output.endswith("\n\nline 3\nline 4\nline 5\nline 6\nline 7")
    assert _saved(result.output).read_text() == "\n".join(f"line {i}" for i in range(8))


# --- audit ----------------------------------------------------------------------------------------


def test_every_call_appends_one_audit_record(make_project: Factory) -> None:
    rt = project(make_project, {**ECHO_PATTERN, **py("boom", "boom")}, permissions=PERMS)
    rt.call_sync("echo", {"text": "ok"}, session="s1", model="gpt-5")
    rt.call_sync("echo", {"text": "nope"})
    rt.call_sync("boom", {})
    rt.call_sync("echo", "not json")
    records, bad = read_records(rt.snapshot.data_dir / "audit.jsonl")
    assert bad == []
    assert [(r["tool"], r["status"]) for r in records] == [
        ("echo", "ok"),
        ("echo", "denied"),
        ("boom", "error"),
        ("echo", "invalid"),
    ]
    first = records[0]
    assert (first["session"], first["model"], first["agent"], first["arguments"]) == (
        session_id("s1"),
        "gpt-5",
        "build",
        {"text": "ok"},
    )
    assert first["requests"] == [
        {"permission": "echo", "pattern": "ok", "action": "allow", "rule": first["requests"][0]["rule"]}
    ]
    assert isinstance(first["duration_ms"], float) and first["duration_ms"] >= 0
    assert first["output_bytes"] == 2 and first["error"] is None
    assert [r["action"] for r in records[1]["requests"]] == ["deny"]
    assert records[2]["error"].startswith("The boom tool failed")


def test_generated_call_ids_never_repeat_across_runtimes_on_one_audit_log(make_project: Factory) -> None:
    """Each `toolrt call` is a new Runtime: its ids must not restart at `call_1`, or the audit log and the
    attribution journal (which outlive the process) would hold one id for different calls."""
    root = make_project(ECHO, modules={"handlers": HANDLERS})
    for _ in range(3):
        rt = Runtime.load(root)
        rt.call_sync("echo", {"text": "a"})
        rt.call_sync("echo", {"text": "b"})
    records, bad = read_records(rt.snapshot.data_dir / "audit.jsonl")
    ids = [r["call_id"] for r in records]
    assert bad == [] and len(ids) == 6 and len(set(ids)) == 6, ids
    assert all(re.fullmatch(r"call_[0-9a-f]{8}_[12]", i) for i in ids), ids


def test_audit_off_in_settings_writes_nothing(make_project: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRT_AUDIT", "off")
    rt = project(make_project, ECHO)
    assert rt.call_sync("echo", {"text": "x"}).output == "x"
    assert rt.audit.path is None
    assert not (rt.snapshot.data_dir / "audit.jsonl").exists()


def test_audit_pointed_elsewhere(make_project: Factory, tmp_path: Path) -> None:
    root = make_project(ECHO, modules={"handlers": HANDLERS})
    rt = Runtime.load(root, settings={"audit": str(tmp_path / "calls.jsonl")})
    rt.call_sync("echo", {"text": "x"})
    assert [r["tool"] for r in read_records(tmp_path / "calls.jsonl")[0]] == ["echo"]


# --- call_many ------------------------------------------------------------------------------------

RENDEZVOUS = """
import anyio

EVENTS = {}
ORDER = []

async def meet(args, ctx):
    mine, other = args["me"], args["other"]
    EVENTS.setdefault(mine, anyio.Event()).set()
    await EVENTS.setdefault(other, anyio.Event()).wait()
    return mine

async def step(args, ctx):
    ORDER.append(("start", args["me"]))
    await anyio.sleep(0)
    ORDER.append(("end", args["me"]))
    return args["me"]

async def fail(args, ctx):
    raise RuntimeError("one failed")
"""
PAIR = text_param("me", "other", required=False)


def test_call_many_runs_parallel_tools_concurrently_and_returns_in_call_order(make_project: Factory) -> None:
    tools = {
        "meet": tool("meet", {"python": "rendezvous:meet"}, PAIR, parallel=True),
        "fail": tool("fail", {"python": "rendezvous:fail"}, parallel=True),
    }
    rt = project(make_project, tools, modules={"rendezvous": RENDEZVOUS})

    async def main() -> list[ToolResult]:
        with anyio.fail_after(10):  # only concurrent calls can meet: sequential ones would wait forever
            return await rt.call_many(
                [("meet", {"me": "a", "other": "b"}), ("fail", {}), ("meet", {"me": "b", "other": "a"})]
            )

    results = anyio.run(main)
    assert [r.output for r in results] == ["a", "", "b"]
    assert results[1].error == "The fail tool failed: RuntimeError: one failed"


def test_call_many_runs_non_parallel_tools_in_order(make_project: Factory) -> None:
    tools = {"step": tool("step", {"python": "rendezvous:step"}, PAIR)}
    rt = project(make_project, tools, modules={"rendezvous": RENDEZVOUS})
    results = anyio.run(lambda: rt.call_many([("step", {"me": str(i)}) for i in range(4)]))
    assert [r.output for r in results] == ["0", "1", "2", "3"]
    rendezvous = sys.modules[project_module_name(rt.root, "rendezvous")]  # the project's module, by its root
    assert rendezvous.ORDER == [(kind, str(i)) for i in range(4) for kind in ("start", "end")]


# --- cache ----------------------------------------------------------------------------------------


def test_cache_returns_the_cached_result_for_the_same_arguments(make_project: Factory) -> None:
    rt = project(make_project, py("echo", "echo", text_param("text"), cache={"ttl": 60}))
    outputs = [rt.call_sync("echo", {"text": t}, session=f"s{i}").output for i, t in enumerate(["a", "a", "b", "a"])]
    assert outputs == ["a", "a", "b", "a"]
    assert sys.modules[project_module_name(rt.root, "handlers")].CALLS == [{"text": "a"}, {"text": "b"}]


# --- registration ---------------------------------------------------------------------------------


def test_register_adds_a_tool_at_run_time(make_project: Factory) -> None:
    rt = project(make_project, ECHO)
    rt.register(yaml.safe_load(tool("shout", {"argv": ["printf", "%s!", "{{ text }}"]}, text_param("text"))))
    assert "shout" in rt.tools().names()
    assert rt.call_sync("shout", {"text": "hey"}).output == "hey!"


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        (
            {"id": "x", "description": "d", "handler": {"argv": ["echo", "{{ nope }}"]}},
            r"'nope', which is not a declared parameter",
        ),
        ({"id": "x", "handler": {"argv": ["true"]}}, r"missing 'description'"),
        (
            {"id": "x", "description": "d", "handler": {"shell": "echo '{{ a }}'"}, "parameters": text_param("a")},
            r"inside single quotes",
        ),
    ],
)
def test_register_validates_like_a_file(make_project: Factory, definition: dict[str, Any], message: str) -> None:
    rt = project(make_project, ECHO)
    with pytest.raises(ConfigError, match=message):
        rt.register(definition)
    assert rt.tools().names() == ("echo",)


def test_register_handler_makes_a_host_tool_visible(make_project: Factory) -> None:
    rt = project(make_project, {"task": tool("task", {"host": "task_runner"}, text_param("prompt"))})
    hidden = {h.id: h.reason for h in rt.tools().hidden}
    assert hidden == {"task": "no host handler registered for 'task_runner'"}

    async def runner(args: Mapping[str, Any], ctx: Any) -> str:
        return f"ran {args['prompt']} as {ctx.agent}"

    rt.register_handler("task_runner", runner)
    assert rt.tools().names() == ("task",)
    assert rt.call_sync("task", {"prompt": "p"}).output == "ran p as build"


# --- selection ------------------------------------------------------------------------------------

APPLY_PATCH_MODELS = {"model": "*gpt-*", "not": [{"model": "*oss*"}, {"model": "*gpt-4*"}]}
EDITING = {
    "apply_patch": tool("apply_patch", {"argv": ["true"]}, when={"models": [APPLY_PATCH_MODELS]}),
    "edit": tool("edit", {"argv": ["true"]}, when={"models": [{"not": [APPLY_PATCH_MODELS]}]}),
    "write": tool("write", {"argv": ["true"]}, when={"models": [{"not": [APPLY_PATCH_MODELS]}]}),
}


@pytest.mark.parametrize(
    ("model", "offered"),
    [
        ("gpt-5", ("apply_patch",)),
        ("gpt-3.5-turbo", ("apply_patch",)),
        ("openai/gpt-5-codex", ("apply_patch",)),
        ("gpt-4o", ("edit", "write")),
        ("gpt-oss-120b", ("edit", "write")),
        ("claude-sonnet-4", ("edit", "write")),
        (None, ("edit", "write")),
    ],
)
def test_opencode_apply_patch_rule_in_yaml_alone(
    make_project: Factory, model: str | None, offered: tuple[str, ...]
) -> None:
    rt = project(make_project, EDITING)
    toolset = rt.tools(model=model)
    assert toolset.names() == offered
    hidden = {h.id: h.reason for h in toolset.hidden}
    assert set(hidden) == {"apply_patch", "edit", "write"} - set(offered)
    assert all(reason.startswith(f"model {model or '(none given)'} does not match") for reason in hidden.values())


FLAGGED = {
    "beta": tool("beta", {"argv": ["true"]}, when={"flags": ["beta"]}),
    "stable": tool("stable", {"argv": ["true"]}, when={"flags": ["!beta"]}),
}
FLAG_SETTINGS = "flags:\n  - {name: beta, description: The beta tool.}\n"


def test_flag_values_from_the_option_and_the_environment(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(FLAGGED, settings=FLAG_SETTINGS)
    off = Runtime.load(root)
    assert off.tools().names() == ("stable",)
    assert {h.id: h.reason for h in off.tools().hidden} == {"beta": "flag beta is off"}
    assert off.tools(flags={"beta": True}).names() == ("beta",)
    assert Runtime.load(root, flags={"beta": True}).tools().names() == ("beta",)
    monkeypatch.setenv("TOOLRT_FLAG_BETA", "1")
    on = Runtime.load(root)
    assert on.tools().names() == ("beta",)
    assert {h.id: h.reason for h in on.tools().hidden} == {"stable": "flag beta is on"}


def test_unknown_flag_in_the_environment_is_a_config_error(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(FLAGGED, settings=FLAG_SETTINGS)
    monkeypatch.setenv("TOOLRT_FLAG_BETTA", "1")
    with pytest.raises(
        ConfigError,
        match=r"environment variable TOOLRT_FLAG_BETTA names an unknown flag 'betta' \(declared flags: .*beta",
    ):
        Runtime.load(root)


@pytest.mark.parametrize(
    ("kwargs", "offered", "reasons"),
    [
        (
            {},
            (),
            {
                "cli_only": "client (none given) is not one of: cli",
                "oai": "provider (none given) is not one of: openai*",
                "fast": "model (none given) does not match fast",
            },
        ),
        ({"client": "cli"}, ("cli_only",), {}),
        ({"provider": "openai-compatible"}, ("oai",), {}),
        ({"provider": "anthropic"}, (), {"oai": "provider anthropic is not one of: openai*"}),
        ({"model": "gpt-4o-mini"}, ("fast",), {}),
        ({"model": "claude-haiku-4"}, ("fast",), {}),
        ({"model": "gpt-5"}, (), {"fast": "model gpt-5 does not match fast"}),
    ],
)
def test_clients_providers_and_model_groups(
    make_project: Factory, kwargs: dict[str, Any], offered: tuple[str, ...], reasons: dict[str, str]
) -> None:
    tools = {
        "cli_only": tool("cli_only", {"argv": ["true"]}, when={"clients": ["cli"]}),
        "oai": tool("oai", {"argv": ["true"]}, when={"providers": ["openai*"]}),
        "fast": tool("fast", {"argv": ["true"]}, when={"models": "fast"}),
    }
    settings = "model_groups:\n  fast: [{model: '*mini*'}, {model: '*haiku*'}]\n"
    toolset = project(make_project, tools, settings=settings).tools(**kwargs)
    assert toolset.names() == offered
    hidden = {h.id: h.reason for h in toolset.hidden}
    assert set(hidden) == {"cli_only", "oai", "fast"} - set(offered)
    for tool_id, reason in reasons.items():
        assert hidden[tool_id] == reason


def test_override_is_offered_under_the_base_name_for_matching_models(make_project: Factory) -> None:
    tools = {
        "grep": tool("grep", {"argv": ["echo", "plain"]}),
        "grep_gpt": tool(
            "grep_gpt", {"argv": ["echo", "tuned"]}, overrides="grep", when={"models": [{"model": "gpt-*"}]}
        ),
    }
    rt = project(make_project, tools)
    tuned = rt.tools(model="gpt-5")
    assert tuned.names() == ("grep",)
    assert tuned.get("grep") is not None and tuned.get("grep").tool.id == "grep_gpt"  # type: ignore[union-attr]
    assert {h.id: h.reason for h in tuned.hidden} == {"grep": "overridden by 'grep_gpt' for this model"}
    assert rt.call_sync("grep", {}, model="gpt-5").output == "tuned\n"
    assert rt.call_sync("grep", {}, model="claude-sonnet-4").output == "plain\n"
    assert rt.tools(model="claude-sonnet-4").names() == ("grep",)


def test_toolsets_limit_what_is_offered(make_project: Factory) -> None:
    tools = {n: tool(n, {"argv": ["true"]}) for n in ("a", "b", "c")}
    rt = project(make_project, tools, settings="toolsets:\n  small: [a, c]\n")
    toolset = rt.tools(toolset="small")
    assert toolset.names() == ("a", "c")
    assert {h.id: h.reason for h in toolset.hidden} == {"b": "not in tool set 'small'"}
    from toolrt.errors import UsageError

    with pytest.raises(UsageError, match=r"unknown tool set 'big' \(tool sets: small\)"):
        rt.tools(toolset="big")


def test_tool_denied_by_the_agents_last_rule_is_hidden_with_the_reason(make_project: Factory) -> None:
    perms = """
    agents:
      reviewer:
        mode: subagent
        description: Reviews without echoing.
        permission:
          echo: {"*": deny}
      partial:
        mode: subagent
        description: Echoes some things.
        permission:
          echo: {"*": deny, "ok*": allow}
    """
    rt = project(make_project, {**ECHO, **py("other", "echo", text_param("text"))}, permissions=perms)
    reviewer = rt.tools(agent="reviewer")
    assert reviewer.names() == ("other",)
    (hidden,) = reviewer.hidden
    assert hidden.id == "echo"
    assert hidden.reason.startswith("permission 'echo' is denied for agent reviewer")
    assert rt.tools(agent="partial").names() == ("echo", "other")
    assert rt.tools().names() == ("echo", "other")
    denied = rt.call_sync("echo", {"text": "x"}, agent="reviewer")
    assert denied.error == "Model tried to call unavailable tool 'echo'. Available tools: other."


def test_an_async_handler_that_opens_a_cancel_scope_before_suspending(make_project: Factory) -> None:
    # Regression: running a handler's first step outside the call's timeout scope broke handlers that
    # open their own scope (a task group, a deadline) and then wait.
    root = make_project(
        {"scoped": TOOL_SCOPED},
        modules={"scoped_handlers": SCOPED_MODULE},
    )
    rt = Runtime.load(root)
    result = rt.call_sync("scoped", {})
    assert result.error is None, result.error
    assert result.output == "done"


TOOL_SCOPED = """\
id: scoped
description: Opens a cancel scope, then waits inside it.
handler: {python: "scoped_handlers:scoped"}
"""

SCOPED_MODULE = """\
import anyio

async def scoped(args, ctx):
    with anyio.move_on_after(5):
        await anyio.sleep(0)
    async with anyio.create_task_group() as group:
        group.start_soon(anyio.sleep, 0)
    return "done"
"""


def test_truncation_hint_names_the_task_tool_only_when_it_is_offered(make_project: Factory) -> None:
    rt = Runtime.load(make_project({}, builtin_tools=True))
    args = {"command": "seq 1 3000", "description": "Count to 3000"}
    assert "task" not in rt.tools()
    cut = rt.call_sync("bash", args).output
    assert cut.endswith("Use Grep to search the full content or Read with offset/limit to view specific sections.")

    async def runner(args: Mapping[str, Any], ctx: Any) -> str:
        return "done"

    rt.register_handler("task", runner)
    assert "task" in rt.tools()
    assert "Use the Task tool to have explore agent process this file" in rt.call_sync("bash", args).output


def test_descriptions_name_only_offered_tools(make_project: Factory) -> None:
    rt = Runtime.load(make_project({}, builtin_tools=True))

    def description(model: str, name: str) -> str:
        spec = rt.tools(model=model).spec(name, "anthropic")
        assert spec is not None
        return str(spec["description"])

    gpt, claude = description("gpt-5", "bash"), description("claude-sonnet-4", "bash")
    assert "change files with\napply_patch (not sed/awk/echo >)" in gpt and "edit or write" not in gpt
    assert "change files with\nedit or write (not sed/awk/echo >)" in claude and "apply_patch" not in claude
    assert "edit and write refuse" not in description("gpt-5", "read")
    assert "edit and write refuse" in description("claude-sonnet-4", "read")
    for name in ("glob", "grep"):
        assert "task tool" not in description("gpt-5", name)  # no host runs subagents here
    for spec in rt.tools(model="gpt-5").specs("openai"):
        assert "{%" not in spec["function"]["description"]


def test_a_broken_description_template_is_a_located_problem(make_project: Factory) -> None:
    text = tool("t", {"python": "handlers:echo"}, text_param("text"))
    text = text.replace("The t test tool.", "'Uses {% if \"a\" in tools %}a{% endif %} and {% if x %}x{% endif %}.'")
    with pytest.raises(ConfigError, match=r"t\.yaml:2:1: description template uses x; it may only use `tools`"):
        project(make_project, {"t": text})


def test_every_mcp_tool_has_a_title(make_project: Factory) -> None:
    rt = Runtime.load(make_project({}, builtin_tools=True))
    titles = {spec["name"]: spec.get("title") for spec in rt.tools(model="gpt-5").specs("mcp")}
    assert titles["read"] == "Read" and titles["apply_patch"] == "Apply patch" and titles["bash"] == "Bash"
    assert all(titles.values())


def test_batch_output_is_capped_like_any_other_output(make_project: Factory) -> None:
    rt = Runtime.load(make_project({}, builtin_tools=True))
    # each sub-call stays under the limits (1,500 lines); together they pass 2,000 lines
    calls = [{"tool": "bash", "parameters": {"command": "seq 1 1500", "description": "Count"}} for _ in range(2)]
    result = rt.call_sync("batch", {"tool_calls": calls}, flags={"batch_tool": True})
    assert result.error is None, result.error
    assert result.metadata["truncated"] is True
    assert result.output.count("\n") < 2010
    assert "The tool call succeeded but the output was truncated. Full output saved to: " in result.output
