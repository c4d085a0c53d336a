"""`plan_enter` and `plan_exit`: after asking the person, switch the session between the plan and build agents.

As OpenCode's plan tools (flag `plan_mode`, client `cli`), each puts one Yes/No question to the person
through the host's questioner; on Yes the session holds the other agent (`ToolContext.switch_agent`),
so the host's next calls that name no agent run under its rules and are offered its tools, and the
host's listeners get an `agent` event.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..call.context import ToolContext
from ..errors import ToolFailure

__all__ = ["plan_enter", "plan_exit", "plan_path"]

PLANS_DIR = ".toolrt/plans"
"""Where plan files go, relative to the project root (the plan agent may edit `.toolrt/plans/*.md`)."""


@dataclass(frozen=True, slots=True)
class _Door:
    """One direction of the switch: OpenCode's question, options and texts for it."""

    target: str
    question: str
    header: str
    yes: str
    no: str
    declined: str
    title: str
    output: str


_ENTER = _Door(
    target="plan",
    question="Would you like to switch to the plan agent and create a plan saved to {plan}?",
    header="Plan Mode",
    yes="Switch to plan agent for research and planning",
    no="Stay with build agent to continue making changes",
    declined="The user chose to stay with the build agent: do not plan first, continue with the request as it stands.",
    title="Switching to plan agent",
    output="User confirmed to switch to plan mode. The session now uses the plan agent. "
    "The plan file will be at {plan}. Begin planning.",
)
_EXIT = _Door(
    target="build",
    question="Plan at {plan} is complete. Would you like to switch to the build agent and start implementing?",
    header="Build Agent",
    yes="Switch to build agent and start implementing the plan",
    no="Stay with plan agent to continue refining the plan",
    declined="The user wants to keep planning: stay with the plan agent, refine the plan at {plan} and ask "
    "what is missing.",
    title="Switching to build agent",
    output="User approved switching to build agent. Wait for further instructions.",
)


def plan_path(session: str) -> str:
    """The session's plan file, relative to the project root: `.toolrt/plans/<session>.md`."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", session).strip(".-") or "session"
    return f"{PLANS_DIR}/{name[:100]}.md"


async def plan_enter(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Ask to switch to the plan agent; on Yes the session holds it."""
    return await _switch(_ENTER, ctx)


async def plan_exit(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Ask to switch to the build agent; on Yes the session holds it."""
    return await _switch(_EXIT, ctx)


async def _switch(door: _Door, ctx: ToolContext) -> dict[str, Any]:
    plan = plan_path(ctx.session)
    if ctx.questioner is None:
        raise ToolFailure(
            f"No one can answer here: this session runs without a person at the keyboard, so it stays with the "
            f"{ctx.agent} agent. Continue without switching."
        )
    question = {
        "question": door.question.format(plan=plan),
        "header": door.header,
        "custom": False,
        "options": [{"label": "Yes", "description": door.yes}, {"label": "No", "description": door.no}],
        "multiple": False,
    }
    answers = await ctx.questioner([question])
    if not answers or list(answers[0])[:1] != ["Yes"]:
        raise ToolFailure(door.declined.format(plan=plan))
    ctx.switch_agent(door.target)
    return {
        "title": door.title,
        "output": door.output.format(plan=plan),
        "metadata": {"agent": door.target, "plan": plan},
    }
