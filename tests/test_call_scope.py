"""One value for who is calling: the scope reaches selection, handlers, records and batch sub-calls whole."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt import CallScope, Runtime
from toolrt.audit import read_records
from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall
from toolrt.errors import DeniedError, UsageError
from toolrt.store import session_id

Factory = Callable[..., Path]

HANDLERS = """
def who(args, ctx):
    s = ctx.scope
    return f"{ctx.agent}|{s.model}|{s.provider}|{s.client}|{s.session}|{dict(s.flags or {})}|{s.toolset}"
"""

TOOLS = {
    "who": """
        id: who
        description: Says who is calling.
        parameters: {type: object, properties: {}}
        handler: {python: "handlers:who"}
    """,
    "beta_who": """
        id: beta_who
        description: Says who is calling, only with the beta flag on.
        parameters: {type: object, properties: {}}
        handler: {python: "handlers:who"}
        when: {flags: [beta]}
    """,
    "multi": """
        id: multi
        description: Runs several calls (the batch handler).
        parameters:
          type: object
          properties:
            tool_calls:
              type: array
              items:
                type: object
                properties: {tool: {type: string}, parameters: {type: object}}
                required: [tool]
          required: [tool_calls]
        handler: {python: "toolrt.builtin.batch:batch"}
    """,
}

SETTINGS = """
flags:
  - {name: beta, description: Beta tools., default: false}
toolsets:
  small: [who, multi]
"""


@pytest.fixture
def rt(make_project: Factory) -> Runtime:
    return Runtime.load(make_project(TOOLS, settings=SETTINGS, modules={"handlers": HANDLERS}))


def test_a_scope_and_keyword_fields_are_the_same_call(rt: Runtime) -> None:
    scope = CallScope(agent="build", model="gpt-5", provider="openai", client="cli", session="s1")
    by_scope = rt.call_sync("who", {}, scope)
    by_keywords = rt.call_sync("who", {}, agent="build", model="gpt-5", provider="openai", client="cli", session="s1")
    assert by_scope.output == by_keywords.output == "build|gpt-5|openai|cli|s1|{}|None"


def test_keyword_fields_override_single_fields_of_the_scope(rt: Runtime) -> None:
    scope = CallScope(model="gpt-5", session="s1")
    assert rt.call_sync("who", {}, scope, session="s2").output == "build|gpt-5|None|None|s2|{}|None"


def test_the_handler_sees_the_default_agent_resolved(rt: Runtime) -> None:
    assert rt.call_sync("who", {}).output.startswith("build|")


def test_scope_flags_select_tools_for_specs_tools_and_calls(rt: Runtime) -> None:
    beta = CallScope(flags={"beta": True})
    assert "beta_who" not in rt.tools().names()
    assert "beta_who" in rt.tools(beta).names()
    assert [s["name"] for s in rt.specs("mcp", beta)] == ["beta_who", "multi", "who"]
    assert rt.call_sync("beta_who", {}).error == (
        "Model tried to call unavailable tool 'beta_who'. Available tools: who, multi."
    )
    assert rt.call_sync("beta_who", {}, beta).output == "build|None|None|None|default|{'beta': True}|None"


def test_scope_tool_set_limits_the_offer(rt: Runtime) -> None:
    assert rt.tools(toolset="small").names() == ("multi", "who")
    assert [s["function"]["name"] for s in rt.specs("openai", CallScope(toolset="small"))] == ["multi", "who"]


def test_batch_sub_calls_keep_the_whole_scope(rt: Runtime) -> None:
    scope = CallScope(model="m1", session="batch-session", flags={"beta": True})
    calls = [{"tool": "beta_who", "parameters": {}}, {"tool": "who", "parameters": {}}]
    result = rt.call_sync("multi", {"tool_calls": calls}, scope)
    assert result.error is None, result.error
    assert result.output.count("build|m1|None|None|batch-session|{'beta': True}|None") == 2
    records, _ = read_records(rt.snapshot.data_dir / "audit.jsonl")
    assert [(r["tool"], r["session"], r["model"]) for r in records] == [
        ("beta_who", session_id("batch-session"), "m1"),
        ("who", session_id("batch-session"), "m1"),
        ("multi", session_id("batch-session"), "m1"),
    ]


def test_call_many_runs_every_call_in_one_scope(rt: Runtime) -> None:
    async def main() -> list[str]:
        results = await rt.call_many([("who", {}), ("beta_who", {})], CallScope(flags={"beta": True}), session="m")
        return [r.output for r in results]

    assert anyio.run(main) == ["build|None|None|None|m|{'beta': True}|None"] * 2


def test_check_call_takes_a_scope(rt: Runtime) -> None:
    decision, requests = rt.check_call("who", {}, CallScope(agent="plan"))
    assert [(r.permission, r.patterns) for r in requests] == [("who", ("*",))]
    assert decision.action == rt.check("who", "*", agent="plan").action


def test_an_unknown_agent_in_the_scope_is_a_usage_error(rt: Runtime) -> None:
    with pytest.raises(UsageError, match='unknown agent "nobody"; agents: build, explore, general, plan'):
        rt.call_sync("who", {}, CallScope(agent="nobody"))


def test_scopes_are_frozen_and_hashable() -> None:
    scope = CallScope(agent="plan", flags={"beta": True})
    with pytest.raises(AttributeError):
        scope.agent = "build"  # type: ignore[misc]
    assert hash(scope) == hash(CallScope(agent="plan", flags={"beta": True}))
    assert scope.selection_key() == CallScope(agent="plan", flags={"beta": True}, session="other").selection_key()


def test_a_context_without_an_asker_denies(tmp_path: Path) -> None:
    ctx = ToolContext(DetachedCall(tool_id="t", root=tmp_path, data_dir=tmp_path / "data"))

    async def ask() -> None:
        await ctx.ask("edit", ["src/a.py"])

    with pytest.raises(DeniedError, match=r"needs approval \(edit `src/a.py`\) but no one is available"):
        anyio.run(ask)


def test_a_context_asker_double_decides(tmp_path: Path) -> None:
    asked: list[Any] = []

    async def allow(requests: Any) -> None:
        asked.extend(requests)

    ctx = ToolContext(DetachedCall(tool_id="t", root=tmp_path, data_dir=tmp_path / "data", ask=allow))
    anyio.run(lambda: ctx.ask("edit", ["src/a.py"]))
    assert [(r.permission, r.patterns) for r in asked] == [("edit", ("src/a.py",))]
