"""The `batch` tool: run up to 25 independent tool calls at once through dispatch (OpenCode §14).

Each call goes through the whole pipeline (arguments, permission, truncation, audit) via
`ctx.batch`; this module only decides which calls may run and writes the summary. Unlike OpenCode,
whose UI shows each inner call as its own part, the model here sees every inner result inside the
batch output, after OpenCode's summary line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..call.context import ToolContext
from ..result import ToolResult

__all__ = ["DISALLOWED", "MAX_CALLS", "batch"]

MAX_CALLS = 25
DISALLOWED = frozenset({"batch"})
# Never suggested as batchable: internal or not meant to be called by the model.
_NOT_SUGGESTED = DISALLOWED | {"invalid", "patch"}


@dataclass(frozen=True, slots=True)
class _Outcome:
    tool: str
    result: ToolResult


async def batch(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run `tool_calls` (each `{tool, parameters}`): the first 25 allowed ones together, in call order.

    Returns OpenCode's summary followed by each call's result; metadata holds per-call status.
    Calls refused here (over the cap, `batch` itself, unknown tools) are failures in the summary.
    """
    calls: Sequence[Mapping[str, Any]] = args["tool_calls"]
    outcomes: list[_Outcome | None] = []
    runnable: list[tuple[int, str, Mapping[str, Any]]] = []
    for index, call in enumerate(calls):
        tool = str(call["tool"])
        refusal = _refusal(tool, index, ctx.available_tools)
        if refusal is None:
            runnable.append((index, tool, call.get("parameters") or {}))
            outcomes.append(None)
        else:
            outcomes.append(_Outcome(tool, ToolResult(title=tool, output="", error=refusal)))
    if runnable:
        results = await ctx.batch([(tool, parameters) for _, tool, parameters in runnable])
        for (index, tool, _), result in zip(runnable, results, strict=True):
            outcomes[index] = _Outcome(tool, result)
    done = [outcome for outcome in outcomes if outcome is not None]
    return _report(done)


def _refusal(tool: str, index: int, available: Sequence[str]) -> str | None:
    if index >= MAX_CALLS:
        return f"Maximum of {MAX_CALLS} tools allowed in batch"
    if tool in DISALLOWED:
        return f"Tool '{tool}' is not allowed in batch. Disallowed tools: {', '.join(sorted(DISALLOWED))}"
    if tool not in available:
        suggestions = ", ".join(name for name in available if name not in _NOT_SUGGESTED)
        return (
            f"Tool '{tool}' not in registry. External tools (MCP, environment) cannot be batched - call them "
            f"directly. Available tools: {suggestions}"
        )
    return None


def _report(outcomes: Sequence[_Outcome]) -> dict[str, Any]:
    successful = sum(1 for outcome in outcomes if outcome.result.ok)
    failed = len(outcomes) - successful
    if failed:
        summary = f"Executed {successful}/{len(outcomes)} tools successfully. {failed} failed."
    else:
        summary = (
            f"All {successful} tools executed successfully.\n\n"
            "Keep using the batch tool for optimal performance in your next response!"
        )
    sections = [summary, *(_section(number, outcome) for number, outcome in enumerate(outcomes, start=1))]
    return {
        "title": f"Batch execution ({successful}/{len(outcomes)} successful)",
        "output": "\n\n".join(sections),
        "metadata": {
            "totalCalls": len(outcomes),
            "successful": successful,
            "failed": failed,
            "tools": [outcome.tool for outcome in outcomes],
            "details": [_detail(outcome) for outcome in outcomes],
        },
        "attachments": [
            dict(attachment) for outcome in outcomes if outcome.result.ok for attachment in outcome.result.attachments
        ],
    }


def _section(number: int, outcome: _Outcome) -> str:
    result = outcome.result
    status = "success" if result.ok else "error"
    body = result.output if result.ok else f"Error: {result.error}"
    return f'<result index="{number}" tool="{outcome.tool}" status="{status}">\n{body}\n</result>'


def _detail(outcome: _Outcome) -> dict[str, Any]:
    result = outcome.result
    detail: dict[str, Any] = {"tool": outcome.tool, "success": result.ok, "status": "success" if result.ok else "error"}
    if result.ok:
        detail["title"] = result.title
    else:
        detail["error"] = result.error
    return detail
