"""What the call path does to stay cheap, and that it changes nothing a caller sees: one timer per call for
the timeout (every handler that can suspend is stopped by it, an outside cancellation stays one), an
audit line assembled from pre-encoded parts."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from toolrt.api import Runtime
from toolrt.audit import AuditLog, read_records
from toolrt.call import record
from toolrt.call.record import CallRecord, Recorder
from toolrt.result import ToolResult
from toolrt.scope import CallScope, scope_of
from toolrt.store import session_id

Factory = Callable[..., Path]

HANDLERS = """
import anyio

async def plain(args, ctx):
    return "plain " + args.get("text", "")

async def waits(args, ctx):
    await anyio.sleep(3600)

async def guarded(args, ctx):
    async with anyio.create_task_group() as group:
        group.start_soon(anyio.sleep, 3600)

def returns_a_hang(args, ctx):
    return anyio.sleep(3600)

def inline(args, ctx):
    return "inline"
"""


def _tool(tool_id: str, function: str, **extra: Any) -> dict[str, str]:
    data: dict[str, Any] = {
        "id": tool_id,
        "description": f"The {tool_id} test tool.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "handler": {"python": f"handlers:{function}", **extra.pop("handler", {})},
        **extra,
    }
    return {tool_id: yaml.safe_dump(data, sort_keys=False)}


async def _no_wait(args: Any, ctx: Any) -> str:
    return "x" if args else "y"


def test_timeouts_still_stop_every_handler_that_can_suspend(make_project: Factory) -> None:
    tools = {
        **_tool("plain", "plain", timeout=0.2),
        **_tool("waits", "waits", timeout=0.2),
        **_tool("guarded", "guarded", timeout=0.2),
        **_tool("returns_a_hang", "returns_a_hang", timeout=0.2, handler={"blocking": False}),
        **_tool("inline", "inline", timeout=0.2, handler={"blocking": False}),
    }
    rt = Runtime.load(make_project(tools, modules={"handlers": HANDLERS}))

    async def main() -> dict[str, ToolResult]:
        with anyio.fail_after(20):
            return {name: await rt.call(name, {"text": "t"}) for name in tools}

    results = anyio.run(main)
    for name in ("waits", "guarded", "returns_a_hang"):
        assert results[name].error == f"The {name} tool did not finish within 0.2 seconds and was stopped."
    assert (results["plain"].output, results["inline"].output) == ("plain t", "inline")
    records, _ = read_records(rt.audit.path or Path())
    assert [r["status"] for r in records] == ["ok", "error", "error", "error", "ok"]


def test_a_handler_registered_again_is_read_again(make_project: Factory) -> None:
    tool = {"id": "hosted", "description": "A host tool.", "parameters": {"type": "object"}, "handler": {"host": "h"}}
    rt = Runtime.load(make_project({"hosted": yaml.safe_dump(tool)}))
    rt.register_handler("h", _no_wait)
    assert rt.call_sync("hosted", {}).output == "y"

    async def slow(args: Any, ctx: Any) -> str:
        await anyio.sleep(0)
        return "slow"

    rt.register_handler("h", slow)
    assert rt.call_sync("hosted", {}).output == "slow"


VALUES: list[Any] = [
    {"text": 'é ✓ \n " \\ \x00', "n": [1, 2.5, -0.0, 10**30, True, None], "nested": {"a": {"b": []}}},
    {"command": 'echo "é" \\\n\t\x1f', "path": "\udcff", 'k"ey': ""},
    {1: "a key that is not text", "b": "c"},
    {"text": "x", "n": 1, "big": -(10**30), "yes": True, "no": False, "none": None},
    {"ratio": 0.5, "text": "a float goes to the encoder"},
    {},
    {"path": Path("/x"), "raw": "\udcff", "inf": math.inf},
    "a string",
    [],
    3,
]


@pytest.mark.parametrize("value", VALUES)
def test_arguments_encode_as_the_standard_encoder_does(value: Any) -> None:
    expected = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    assert record._json(value) == expected


def test_a_cyclic_argument_fails_as_the_standard_encoder_does() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError, match="Circular reference detected"):
        record._json(cyclic)


def test_records_assembled_from_parts_are_plain_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(AuditLog(tmp_path / "audit.jsonl"))
    clock = iter([1_800_000_000.9996, 1_800_000_001.0004, 1_800_000_001.25])
    monkeypatch.setattr(time, "time", lambda: next(clock))
    scopes = [CallScope(session='s"1', model="m"), CallScope(session='s"1', model="m"), CallScope(agent="plan")]
    for number, scope in enumerate(scopes):
        result = ToolResult(title="", output="é" * number, error=None if number else "bad\nthing")
        recorder.record(CallRecord(scope, "build", "echo", f"c{number}", {"n": number}, None, "ok", result, 0.0015))
    records, bad = read_records(tmp_path / "audit.jsonl")
    assert bad == []
    assert [(r["time"], r["session"], r["model"], r["call_id"], r["error"]) for r in records] == [
        ("2027-01-15T08:00:00.999Z", session_id('s"1'), "m", "c0", "bad\nthing"),
        ("2027-01-15T08:00:01.000Z", session_id('s"1'), "m", "c1", None),
        ("2027-01-15T08:00:01.250Z", session_id("default"), None, "c2", None),
    ]
    expected: list[tuple[str, str, float, list[Any]]] = [("build", "echo", 1.5, [])] * 3
    assert [(r["agent"], r["tool"], r["duration_ms"], r["requests"]) for r in records] == expected
    assert [r["output_bytes"] for r in records] == [0, 1, 2]  # characters, as before


def test_scopes_from_keyword_fields_are_built_once_and_equal_what_was_asked() -> None:
    first = scope_of(None, {"session": "s1", "agent": "plan"})
    again = scope_of(None, {"session": "s1", "agent": "plan"})
    assert first is again and first == CallScope(session="s1", agent="plan")
    assert scope_of(None, {"session": "s2"}) == CallScope(session="s2")
    flagged = scope_of(None, {"flags": {"web": True}})
    assert flagged == CallScope(flags={"web": True}) and flagged is not scope_of(None, {"flags": {"web": True}})
    based = scope_of(CallScope(model="m"), {"session": "s1"})
    assert based == CallScope(model="m", session="s1")


def test_a_calls_read_rules_are_built_once_until_an_approval_changes_them(make_project: Factory) -> None:
    tool = {"id": "hosted", "description": "A host tool.", "parameters": {"type": "object"}, "handler": {"host": "h"}}
    permissions = 'permission:\n  "*": allow\n  read: {"*": allow, "*.env": deny}\n'
    rt = Runtime.load(make_project({"hosted": yaml.safe_dump(tool)}, permissions=permissions))
    seen: list[Any] = []

    async def keep(args: Any, ctx: Any) -> str:
        seen.append(ctx.reads)
        return "kept"

    rt.register_handler("h", keep)
    for _ in range(2):
        assert rt.call_sync("hosted", {}, session="s").output == "kept"
    rt.sessions.restore_approvals("s", [("read", "secret.env")])
    assert rt.call_sync("hosted", {}, session="s").output == "kept"
    first, second, approved = seen
    assert first is second and first.denies("a.env") and first.denies("secret.env")
    assert approved is not first and approved.denies("a.env") and not approved.denies("secret.env")
