"""Several calls at once: `run_together` (the `parallel` tools side by side, the rest in order) and `Turn`,
one model turn's tool calls as the requests the pipeline runs and its results as the provider's messages
(`Runtime.call_many` and `Runtime.run_tool_calls`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

if TYPE_CHECKING:
    from ..build.snapshot import Snapshot
    from ..call.request import CallRequest
    from ..providers import Adapter
    from ..providers.model import ToolCall
    from ..result import ToolResult

__all__ = ["Turn", "one_at_a_time", "run_together"]

_T = TypeVar("_T")

UNMATCHABLE = (
    "This call to '{name}' came without a call id, so its result could not be matched to it and it was not run. "
    "Call the tool again."
)
"""The result of a call without the id its result needs (every format but `gemini` matches results by id)."""


async def run_together(
    snapshot: Snapshot, tools: Sequence[str], run: Callable[[int], Awaitable[ToolResult]]
) -> list[ToolResult]:
    """`run(i)` for every call: `parallel: true` tools concurrently, the rest in order; results in call order."""
    results: list[ToolResult | None] = [None] * len(tools)
    sequential: list[int] = []

    async def one(index: int) -> None:
        results[index] = await run(index)

    async def run_sequential() -> None:
        for index in sequential:
            await one(index)

    async with anyio.create_task_group() as group:
        for index, tool in enumerate(tools):
            compiled = snapshot.tools.get(tool) or snapshot.tools.get(tool.lower())
            if compiled is not None and compiled.definition.parallel:
                group.start_soon(one, index)
            else:
                sequential.append(index)
        group.start_soon(run_sequential)
    return [r for r in results if r is not None]


def one_at_a_time(function: Callable[[_T], Awaitable[Any]], lock: anyio.Lock) -> Callable[[_T], Awaitable[Any]]:
    """`function` made to wait for the one before it: concurrent calls' asks reach a person one by one."""

    async def wrapped(request: _T) -> Any:
        async with lock:
            return await function(request)

    return wrapped


@dataclass(frozen=True, slots=True)
class Turn:
    """The tool calls of one model turn in one provider's format."""

    format: str
    adapter: Adapter
    calls: tuple[ToolCall, ...]

    @classmethod
    def of(cls, format: str, response: Any) -> Turn:
        """The calls of `response` (the provider's response, or the `ToolCall`s a stream accumulator collected).

        Raises:
            UsageError: `format` is unknown.
        """
        from ..providers import ToolCall, adapter

        module = adapter(format)
        if isinstance(response, (list, tuple)) and response and all(isinstance(c, ToolCall) for c in response):
            return cls(format, module, tuple(response))
        return cls(format, module, tuple(module.tool_calls(response)))

    @property
    def needs_ids(self) -> bool:
        """Whether results are matched to calls by id (every format but `gemini`, which pairs by position)."""
        return self.format != "gemini"

    def requests(self, base: CallRequest) -> list[CallRequest]:
        """Each call as `base` with its tool, arguments and id; a call that must not run (no id where the format
        needs one, or an id the turn repeats: never run twice) carries why it was refused."""
        from ..providers.duplicates import refusal, repeated_ids

        repeated = repeated_ids(list(self.calls))
        requests = []
        for call in self.calls:
            request = base._replace(tool=call.name, args=call.arguments, call_id=call.id)
            if self.needs_ids and not call.id:  # not run, but recorded (under a generated id) like any call
                request = request._replace(refused=UNMATCHABLE.format(name=call.name))
            elif call.id in repeated:
                request = request._replace(refused=refusal(call, sum(c.id == call.id for c in self.calls)))
            requests.append(request)
        return requests

    def messages(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """What to append to the next request: each call's result in the provider's shape, each id answered once."""
        from ..providers.duplicates import answered_once

        pairs = list(zip(self.calls, results, strict=True))
        return self.adapter.result_messages(answered_once(pairs) if self.needs_ids else pairs)
