"""Provider adapters on plain dicts (no SDK): tool calls out, result messages in, streams, bad input."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_providers import chat_completion, chat_stream, generate_content, message, message_stream, response
from provider_project import PIXEL_PNG, json_calls, make_provider_project

from toolrt.api import Runtime
from toolrt.errors import UsageError
from toolrt.permissions.ask import AskRequest, Reply
from toolrt.providers import MediaBudget, ToolCall, adapter, anthropic, gemini, openai, openai_responses
from toolrt.result import ToolResult

PIXEL = {"type": "file", "mime": "image/png", "url": "data:image/png;base64," + base64.b64encode(PIXEL_PNG).decode()}


@pytest.fixture
def rt(tmp_path: Path) -> Runtime:
    return Runtime.load(make_provider_project(tmp_path / "project"))


def run(rt: Runtime, format: str, turn: Any, **options: Any) -> list[dict[str, Any]]:
    return anyio.run(lambda: rt.run_tool_calls(format, turn, **options))


# --- tool calls out -------------------------------------------------------------------------------


def test_each_format_reads_its_calls_from_a_response_dict() -> None:
    calls = [("c1", "read", '{"filePath": "a"}'), ("c2", "glob", '{"pattern": "*"}')]
    expected = [ToolCall("c1", "read", '{"filePath": "a"}'), ToolCall("c2", "glob", '{"pattern": "*"}')]
    assert openai.tool_calls(chat_completion(calls=calls)) == expected
    assert openai.tool_calls(chat_completion(calls=calls)["choices"][0]["message"]) == expected
    assert openai_responses.tool_calls(response(text="hi", calls=calls)) == expected
    objects = [(i, n, json.loads(a)) for i, n, a in calls]
    as_objects = [ToolCall(i, n, a) for i, n, a in objects]
    assert anthropic.tool_calls(message(text="hi", calls=objects)) == as_objects
    assert gemini.tool_calls(generate_content(text="hi", calls=objects)) == as_objects
    snake = {"candidates": [{"content": {"parts": [{"function_call": {"name": "read", "args": {"a": 1}}}]}}]}
    assert gemini.tool_calls(snake) == [ToolCall("", "read", {"a": 1})]


@pytest.mark.parametrize(
    "format, turn",
    [
        ("openai", chat_completion(text="hello")),
        ("openai-responses", response(text="hello")),
        ("anthropic", message(text="hello")),
        ("gemini", generate_content(text="hello")),
        ("openai", {}),
        ("anthropic", {"content": "not a list"}),
        ("gemini", {"candidates": []}),
    ],
)
def test_a_turn_without_tool_calls_gives_no_messages(rt: Runtime, format: str, turn: Any) -> None:
    assert adapter(format).tool_calls(turn) == []
    assert run(rt, format, turn) == []


def test_an_unknown_format_is_a_usage_error(rt: Runtime) -> None:
    with pytest.raises(UsageError, match="unknown provider format 'mcp'; expected one of: openai, openai-responses"):
        run(rt, "mcp", {})


def test_malformed_calls_become_results_the_model_can_act_on(rt: Runtime) -> None:
    turn = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{oops"}},
                        {"id": "c2", "type": "function", "function": {"name": "", "arguments": "{}"}},
                        {"id": "c3", "type": "function", "function": {"arguments": "{}"}},
                        {"type": "function", "function": {"name": "read", "arguments": '{"filePath": "notes.txt"}'}},
                        {"id": "c5", "type": "function", "function": {"name": "READ", "arguments": '{"filePath": 1}'}},
                        {"id": "c6", "type": "function", "function": {"name": "todowrite", "arguments": "[1, 2]"}},
                        "not a call",
                    ],
                }
            }
        ]
    }
    messages = run(rt, "openai", turn, agent="general")  # general hides todowrite
    texts = [m["content"] for m in messages]
    assert [m["tool_call_id"] for m in messages] == ["c1", "c2", "c3", "", "c5", "c6", ""]
    assert "the arguments are not valid JSON (Expecting property name enclosed in double quotes" in texts[0]
    assert "Model called a tool without a name. Call one of the available tools by its name: bash, read" in texts[1]
    assert "Model called a tool without a name." in texts[2]
    assert texts[3].startswith("This call to 'read' came without a call id") and "was not run" in texts[3]
    assert "/filePath: 1 is not of type" in texts[4]  # READ repaired to read, then validated
    assert "Model tried to call unavailable tool 'todowrite'" in texts[5]  # hidden for this agent
    assert "came without a call id" in texts[6]


@pytest.mark.parametrize(
    ("format", "turn"),
    [
        ("openai", chat_completion(calls=[("", "bash", '{"command": "echo run", "description": "d"}')])),
        ("openai-responses", response(calls=[("", "bash", '{"command": "echo run", "description": "d"}')])),
        ("anthropic", message(calls=[("", "bash", {"command": "echo run", "description": "d"})])),
    ],
)
def test_a_call_without_an_id_is_not_run_but_leaves_an_audit_record(rt: Runtime, format: str, turn: Any) -> None:
    from toolrt.audit import read_records

    assert rt.audit.path is not None
    [message] = run(rt, format, turn)
    assert "came without a call id" in json.dumps(message)
    records, bad = read_records(rt.audit.path)
    assert bad == [] and len(records) == 1, records
    [record] = records
    assert record["tool"] == "bash" and record["status"] == "invalid"
    assert record["call_id"].startswith("call_")  # generated: the response gave none
    sent = {"command": "echo run", "description": "d"}
    assert record["arguments"] in (json.dumps(sent), sent)
    assert "came without a call id" in record["error"] and "was not run" in record["error"]


def _appends(line: str) -> dict[str, str]:
    return {"command": f"echo {line} >> ran.txt", "description": "append"}


@pytest.mark.parametrize("format", ["openai", "openai-responses", "anthropic", "gemini"])
def test_a_repeated_call_id_runs_neither_call_and_is_answered_once(rt: Runtime, format: str) -> None:
    from toolrt.audit import read_records

    calls = [("dup", "bash", _appends("one")), ("solo", "bash", _appends("solo")), ("dup", "bash", _appends("two"))]
    as_text = [(i, n, json.dumps(a)) for i, n, a in calls]
    turn = {
        "openai": lambda: chat_completion(calls=as_text),
        "openai-responses": lambda: response(calls=as_text),
        "anthropic": lambda: message(calls=calls),
        "gemini": lambda: generate_content(calls=calls),
    }[format]()
    messages = run(rt, format, turn)
    ran = rt.root / "ran.txt"
    assert ran.read_text() == "solo\n"  # the call with its own id ran; neither repeated one did
    if format == "openai":
        answered = [(m["tool_call_id"], m["content"]) for m in messages]
    elif format == "openai-responses":
        answered = [(m["call_id"], m["output"]) for m in messages]
    elif format == "anthropic":
        answered = [(b["tool_use_id"], b["content"]) for b in messages[0]["content"]]
        assert [b["is_error"] for b in messages[0]["content"]] == [True, False]
    else:
        responses = [p["function_response"] for p in messages[0]["parts"]]
        answered = [(r["id"], str(r["response"])) for r in responses]
    ids = [id for id, _ in answered]
    assert ids == (["dup", "solo", "dup"] if format == "gemini" else ["dup", "solo"])  # what the provider accepts
    assert "which 2 calls of the same response carry" in answered[0][1] and "none of them was run" in answered[0][1]
    assert rt.audit.path is not None
    records, bad = read_records(rt.audit.path)
    assert bad == []
    statuses = sorted((r["call_id"], r["status"]) for r in records)
    assert statuses == [("dup", "invalid"), ("dup", "invalid"), ("solo", "ok")]


def test_gemini_calls_without_ids_run_and_answer_by_name(rt: Runtime) -> None:
    turn = generate_content(calls=[("", "read", {"filePath": "notes.txt"})])
    [content] = run(rt, "gemini", turn)
    [part] = content["parts"]
    assert part["function_response"]["name"] == "read"
    assert "id" not in part["function_response"]
    assert "remember the milk" in part["function_response"]["response"]["output"]


# --- results in -----------------------------------------------------------------------------------


def _pairs(*results: ToolResult) -> list[tuple[ToolCall, ToolResult]]:
    return [(ToolCall(f"c{i}", "read", {}), result) for i, result in enumerate(results)]


def test_result_shapes_and_error_flags() -> None:
    pairs = _pairs(ToolResult("t", "fine"), ToolResult("t", "", error="bad"), ToolResult("t", ""))
    assert openai.result_messages(pairs) == [
        {"role": "tool", "tool_call_id": "c0", "content": "fine"},
        {"role": "tool", "tool_call_id": "c1", "content": "bad"},
        {"role": "tool", "tool_call_id": "c2", "content": "(no output)"},
    ]
    assert openai_responses.result_messages(pairs)[1] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "bad",
    }
    assert anthropic.result_messages(pairs) == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c0", "content": "fine", "is_error": False},
                {"type": "tool_result", "tool_use_id": "c1", "content": "bad", "is_error": True},
                {"type": "tool_result", "tool_use_id": "c2", "content": "(no output)", "is_error": False},
            ],
        }
    ]
    [content] = gemini.result_messages(pairs)
    assert [p["function_response"]["response"] for p in content["parts"]] == [
        {"output": "fine"},
        {"error": "bad"},
        {"output": "(no output)"},
    ]
    for module in (openai, openai_responses, anthropic, gemini):
        assert module.result_messages([]) == []


def test_attachments_go_where_each_provider_takes_them() -> None:
    pdf = {
        "type": "file",
        "mime": "application/pdf",
        "url": "data:application/pdf;base64,JVBERi0=",
        "filename": "a.pdf",
    }
    pairs = _pairs(ToolResult("t", "two files", attachments=(PIXEL, pdf)))
    chat = openai.result_messages(pairs)
    assert chat[0]["content"] == "two files"
    assert [p["type"] for p in chat[1]["content"]] == ["text", "image_url", "text", "file"]
    assert chat[1]["content"][3]["file"] == {"file_data": pdf["url"], "filename": "a.pdf"}
    output = openai_responses.result_messages(pairs)[0]["output"]
    assert [p["type"] for p in output] == ["input_text", "input_image", "input_file"]
    blocks = anthropic.result_messages(pairs)[0]["content"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "document"]
    assert blocks[2]["source"] == {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}
    parts = gemini.result_messages(pairs)[0]["parts"][0]["function_response"]["parts"]
    assert parts == [
        {"inline_data": {"mime_type": "image/png", "data": PIXEL_PNG}},
        {"inline_data": {"mime_type": "application/pdf", "data": b"%PDF-"}},
    ]


def test_attachments_past_a_providers_limits_become_a_clear_text() -> None:
    big = "A" * (5 * 1024 * 1024 + 4)
    large = {"type": "file", "mime": "image/png", "url": f"data:image/png;base64,{big}", "filename": "large.png"}
    bmp = {"type": "file", "mime": "image/bmp", "url": "data:image/bmp;base64,Qk0=", "filename": "old.bmp"}
    remote = {"type": "file", "mime": "image/png", "url": "https://example.com/x.png"}
    broken = {"type": "file", "mime": "image/png", "url": "data:image/png;base64,%%%"}
    pairs = _pairs(ToolResult("t", "look", attachments=(large, bmp, remote, broken, PIXEL)))
    [result] = anthropic.result_messages(pairs)[0]["content"]
    text, image = result["content"]
    assert image["type"] == "image"
    assert text["text"].split("\n\n") == [
        "look",
        "[Attachment large.png (image/png, 5.0 MB) was not sent: Anthropic takes images up to 5.0 MB]",
        "[Attachment old.bmp (image/bmp, 0 KB) was not sent: Anthropic takes images (GIF, JPEG, PNG, WEBP) and PDF]",
        "[Attachment attachment (image/png) is at https://example.com/x.png]",
        "[Attachment attachment was not sent: its data is not valid base64]",
    ]
    # The whole turn shares one budget: the request limit counts every result's attachments.
    budget = MediaBudget(anthropic.LIMITS)
    half = {"type": "file", "mime": "application/pdf", "url": "data:application/pdf;base64," + "A" * (20 * 1024 * 1024)}
    assert len(budget.take([half])[0]) == 1
    sent, notes = budget.take([dict(half, filename="b.pdf")])
    assert sent == [] and "with the other attachments of this turn it would pass the 32.0 MB" in notes[0]


# --- streams --------------------------------------------------------------------------------------


def _feed(accumulator: Any, events: Sequence[Any]) -> list[list[str]]:
    return [[call.id for call in accumulator.feed(event)] for event in events]


def test_chat_completions_stream_completes_each_call_when_the_next_starts() -> None:
    calls = json_calls()[:3]
    accumulator = openai.StreamAccumulator()
    finished = [
        ids for ids in _feed(accumulator, [data for _, data in chat_stream(text="hi there", calls=calls).events]) if ids
    ]
    assert finished == [["call_meet_a"], ["call_meet_b"], ["call_notes"]]
    assert accumulator.calls == openai.tool_calls(chat_completion(calls=calls))
    assert accumulator.finish_reason == "tool_calls"
    assert accumulator.message()["content"] == "hi there "
    assert accumulator.message()["tool_calls"][2]["function"] == {
        "name": "read",
        "arguments": '{"filePath": "notes.txt"}',
    }


def test_chat_completions_stream_cut_short_still_gives_the_open_call() -> None:
    events = [data for _, data in chat_stream(calls=json_calls()[:1]).events][:-1]
    accumulator = openai.StreamAccumulator()
    _feed(accumulator, events)
    assert accumulator.calls == []
    assert accumulator.finish() == [ToolCall("call_meet_a", "meet", '{"name": "a"}')]


def test_responses_stream_completes_calls_at_output_item_done() -> None:
    def item(call_id: str, arguments: str) -> dict[str, Any]:
        return {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": "read",
            "arguments": arguments,
        }

    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": item("c1", "")},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_c1", "delta": '{"filePath"'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_c1", "delta": ': "a"}'},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc_c1", "call_id": "c1", "name": "read"},
        },
        {"type": "response.output_item.added", "output_index": 1, "item": item("c2", "")},
        {"type": "response.function_call_arguments.done", "item_id": "fc_c2", "arguments": "{}"},
        {"type": "response.completed", "response": {"output": [item("c1", '{"filePath": "a"}'), item("c2", "{}")]}},
    ]
    accumulator = openai_responses.StreamAccumulator()
    assert _feed(accumulator, events) == [[], [], [], ["c1"], [], [], ["c2"]]
    assert accumulator.calls == [ToolCall("c1", "read", '{"filePath": "a"}'), ToolCall("c2", "read", "{}")]
    assert [i["call_id"] for i in accumulator.items] == ["c1", "c2"]


def test_anthropic_stream_parses_input_json_at_block_stop() -> None:
    calls = [("t1", "read", '{"filePath": "notes.txt"}'), ("t2", "read", ""), ("t3", "read", '{"filePath": ')]
    accumulator = anthropic.StreamAccumulator()
    finished = [
        ids for ids in _feed(accumulator, [data for _, data in message_stream(text="ok", calls=calls).events]) if ids
    ]
    assert finished == [["t1"], ["t2"], ["t3"]]
    assert accumulator.calls == [
        ToolCall("t1", "read", {"filePath": "notes.txt"}),
        ToolCall("t2", "read", {}),
        ToolCall("t3", "read", '{"filePath": '),  # not JSON: the argument step says so to the model
    ]
    assert accumulator.message()["content"][0] == {"type": "text", "text": "ok "}
    assert accumulator.message()["content"][3]["input"] == {}  # the history keeps an object


def test_gemini_stream_takes_whole_calls_per_chunk() -> None:
    chunks = [
        generate_content(text="Let me "),
        generate_content(text="check."),
        generate_content(calls=[("g1", "read", {"filePath": "a"})]),
        generate_content(calls=[("", "glob", {"pattern": "*"})]),
    ]
    accumulator = gemini.StreamAccumulator()
    assert _feed(accumulator, chunks) == [[], [], ["g1"], [""]]
    assert accumulator.text == "Let me check."
    assert accumulator.content()["parts"][0] == {"text": "Let me check."}
    assert len(accumulator.content()["parts"]) == 3


# --- running a turn -------------------------------------------------------------------------------


ASKING_TOOL = """
id: ping
description: Ask before answering pong.
parameters: {type: object, properties: {n: {type: integer}}}
handler: {python: "pinger:ping"}
parallel: true
permission: {key: ping, patterns: ["{{ n }}"]}
"""


def test_asks_of_concurrent_calls_reach_the_asker_one_at_a_time(make_project: Any) -> None:
    root = make_project(
        {"ping": ASKING_TOOL},
        permissions='permission: {"*": allow, ping: ask}\n',
        modules={"pinger": "def ping(args, ctx):\n    return 'pong %s' % args['n']\n"},
    )
    rt = Runtime.load(root)
    active: list[int] = []
    most = 0

    async def ask(request: AskRequest) -> Reply:
        nonlocal most
        active.append(1)
        most = max(most, len(active))
        await anyio.sleep(0.01)  # give another ask the chance to overlap, if it could
        active.pop()
        return Reply("once")

    calls = [(f"p{n}", "ping", json.dumps({"n": n})) for n in range(4)]
    messages = run(rt, "openai", chat_completion(calls=calls), ask=ask)
    assert [m["content"] for m in messages] == ["pong 0", "pong 1", "pong 2", "pong 3"]
    assert most == 1
