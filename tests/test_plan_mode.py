"""plan_enter / plan_exit (flag `plan_mode`, client `cli`) and the session-held agent; task's `task_id`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from toolrt import Runtime
from toolrt.call.events import CallEvent

Factory = Callable[..., Path]
PLAN: dict[str, Any] = {"client": "cli", "flags": {"plan_mode": True}}


class Person:
    """A questioner that answers every question with the next of `replies` and keeps what it was asked."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.asked: list[Mapping[str, Any]] = []

    async def __call__(self, questions: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        self.asked.extend(questions)
        return [[self.replies.pop(0)] for _ in questions]


@pytest.fixture
def rt(make_project: Factory) -> Runtime:
    (root := make_project({}, builtin_tools=True)).joinpath("src").mkdir()
    (root / "src" / "app.py").write_text("x = 1\n", encoding="utf-8")
    return Runtime.load(root)


def test_the_plan_tools_are_offered_to_the_cli_client_under_plan_mode_by_agent(rt: Runtime) -> None:
    assert not {"plan_enter", "plan_exit"} & set(rt.tools(client="cli").names())
    assert not {"plan_enter", "plan_exit"} & set(rt.tools(flags={"plan_mode": True}, client="app").names())
    build, plan = rt.tools(**PLAN).names(), rt.tools(agent="plan", **PLAN).names()
    assert "plan_enter" in build and "plan_exit" not in build
    assert "plan_exit" in plan and "plan_enter" not in plan
    assert build[-1] == "plan_enter"  # OpenCode's registry puts the plan tools last


def test_yes_switches_the_session_to_plan_and_back_with_an_event_each_time(rt: Runtime) -> None:
    events: list[CallEvent] = []
    rt.subscribe(events.append)
    person = Person("Yes", "Yes")
    entered = rt.call_sync("plan_enter", {}, session="s1", questioner=person, **PLAN)
    assert entered.error is None and entered.title == "Switching to plan agent"
    assert entered.output == (
        "User confirmed to switch to plan mode. The session now uses the plan agent. "
        "The plan file will be at .toolrt/plans/s1.md. Begin planning."
    )
    assert person.asked[0]["question"] == (
        "Would you like to switch to the plan agent and create a plan saved to .toolrt/plans/s1.md?"
    )
    assert [o["label"] for o in person.asked[0]["options"]] == ["Yes", "No"]
    assert rt.session_agent("s1") == "plan" and rt.session_agent("other") is None
    switched = [e for e in events if e.kind == "agent"]
    assert [(e.tool, e.session, dict(e.data)) for e in switched] == [
        ("plan_enter", "s1", {"agent": "plan", "previous": "build"})
    ]
    # The host names no agent: the session's plan agent decides what is offered and what is allowed.
    names = rt.tools(session="s1", **PLAN).names()
    assert "plan_exit" in names and "plan_enter" not in names
    edit = rt.call_sync("write", {"filePath": "src/app.py", "content": "y = 2\n"}, session="s1", **PLAN)
    assert edit.error is not None and "prevents you from using this specific tool call" in edit.error
    # A host that names the agent still gets that agent.
    assert "plan_enter" in rt.tools(session="s1", agent="build", **PLAN).names()
    exited = rt.call_sync("plan_exit", {}, session="s1", questioner=person, **PLAN)
    assert exited.output == "User approved switching to build agent. Wait for further instructions."
    assert person.asked[1]["question"] == (
        "Plan at .toolrt/plans/s1.md is complete. Would you like to switch to the build agent and start implementing?"
    )
    assert rt.session_agent("s1") == "build"
    assert [dict(e.data) for e in events if e.kind == "agent"][-1] == {"agent": "build", "previous": "plan"}
    written = rt.call_sync("write", {"filePath": "src/new.py", "content": "y = 2\n"}, session="s1", **PLAN)
    assert written.error is None


def test_no_keeps_the_agent_and_says_what_to_do(rt: Runtime) -> None:
    result = rt.call_sync("plan_enter", {}, session="s2", questioner=Person("No"), **PLAN)
    assert result.error == (
        "The user chose to stay with the build agent: do not plan first, continue with the request as it stands."
    )
    assert rt.session_agent("s2") is None


def test_without_a_person_the_switch_is_refused(rt: Runtime) -> None:
    result = rt.call_sync("plan_enter", {}, session="s3", **PLAN)
    assert result.error is not None and result.error.startswith("No one can answer here")
    assert "stays with the build agent" in result.error and rt.session_agent("s3") is None


def test_task_id_reaches_the_hosts_task_handler(rt: Runtime) -> None:
    seen: list[Mapping[str, Any]] = []

    async def runner(args: Mapping[str, Any], ctx: Any) -> str:
        seen.append(args)
        return f"task_id: {args.get('task_id', 'ses_new')}\n\n<task_result>\ndone\n</task_result>"

    rt.register_handler("task", runner)
    spec = rt.tools().spec("task", "anthropic")
    assert spec is not None and "task_id" in spec["input_schema"]["properties"]
    first = {"description": "Find clients", "prompt": "Find HTTP clients.", "subagent_type": "explore"}
    assert rt.call_sync("task", first).output.startswith("task_id: ses_new")
    again = rt.call_sync("task", {**first, "task_id": "ses_new", "prompt": "Now list their timeouts."})
    assert again.error is None and again.output.startswith("task_id: ses_new")
    assert [a.get("task_id") for a in seen] == [None, "ses_new"]
    empty = rt.call_sync("task", {**first, "task_id": ""})
    assert empty.error is not None and "task_id" in empty.error
