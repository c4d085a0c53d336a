"""The handler's timeout and abort (`toolrt.call.deadline`): one timer per call that stops the handler,
told apart from a cancellation that came from outside, which stays a cancellation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import yaml

from toolrt.api import Runtime
from toolrt.audit import read_records
from toolrt.result import ToolResult

Factory = Callable[..., Path]

HANDLERS = """
import anyio

async def sleeps(args, ctx):
    await anyio.sleep(3600)

async def swallows(args, ctx):
    try:
        await anyio.sleep(3600)
    except BaseException:
        return "swallowed"

async def quick(args, ctx):
    await anyio.sleep(0)
    return "quick"
"""

BACKENDS = ["asyncio", "trio"]


def _runtime(make_project: Factory, timeout: float) -> Runtime:
    tools = {
        name: yaml.safe_dump(
            {
                "id": name,
                "description": f"The {name} test tool.",
                "parameters": {"type": "object"},
                "handler": {"python": f"handlers:{name}"},
                "timeout": timeout,
            }
        )
        for name in ("sleeps", "swallows", "quick")
    }
    return Runtime.load(make_project(tools, modules={"handlers": HANDLERS}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_timeout_stops_a_handler_that_sleeps_past_it(make_project: Factory, backend: str) -> None:
    rt = _runtime(make_project, 0.2)

    async def main() -> tuple[ToolResult, ToolResult]:
        with anyio.fail_after(20):
            return await rt.call("sleeps", {}), await rt.call("quick", {})

    stopped, following = anyio.run(main, backend=backend)
    assert stopped.error == "The sleeps tool did not finish within 0.2 seconds and was stopped."
    assert (following.error, following.output) == (None, "quick")
    records, _ = read_records(rt.audit.path or Path())
    assert [(r["tool"], r["status"]) for r in records] == [("sleeps", "error"), ("quick", "ok")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("abort", [False, True])
def test_a_cancellation_from_outside_stays_a_cancellation(make_project: Factory, backend: str, abort: bool) -> None:
    """The host's cancel scope cancels the call: it is not turned into a timeout or an abort result."""
    rt = _runtime(make_project, 60)

    async def main() -> tuple[bool, list[ToolResult]]:
        results: list[ToolResult] = []
        with anyio.fail_after(20):
            with anyio.move_on_after(0.2) as outside:
                results.append(await rt.call("sleeps", {}, abort=anyio.Event() if abort else None))
            results.append(await rt.call("quick", {}))  # the task is not left cancelled
            await anyio.sleep(0.01)
        return outside.cancelled_caught, results

    caught, results = anyio.run(main, backend=backend)
    assert caught is True
    assert [r.output for r in results] == ["quick"]
    records, _ = read_records(rt.audit.path or Path())
    assert [(r["tool"], r["status"], r["error"]) for r in records][0] == (
        "sleeps",
        "cancelled",
        "The call was cancelled before it finished.",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancellation_from_outside_during_a_timed_out_handlers_cleanup_stays_one(
    make_project: Factory, backend: str
) -> None:
    """The timeout fires, the outside cancels too before the handler is done: the caller is cancelled."""
    handlers = """
import anyio

async def cleanup(args, ctx):
    try:
        await anyio.sleep(3600)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.4)
"""
    tool = {
        "id": "cleanup",
        "description": "Cleans up slowly.",
        "parameters": {"type": "object"},
        "handler": {"python": "slow:cleanup"},
        "timeout": 0.1,
    }
    rt = Runtime.load(make_project({"cleanup": yaml.safe_dump(tool)}, modules={"slow": handlers}))

    async def main() -> tuple[bool, list[ToolResult]]:
        results: list[ToolResult] = []
        with anyio.fail_after(20):
            with anyio.move_on_after(0.3) as outside:
                results.append(await rt.call("cleanup", {}))
            await anyio.sleep(0.01)
        return outside.cancelled_caught, results

    caught, results = anyio.run(main, backend=backend)
    assert (caught, results) == (True, [])


def test_a_handler_that_swallows_the_timeout_returns_and_leaves_the_caller_uncancelled(make_project: Factory) -> None:
    rt = _runtime(make_project, 0.1)

    async def main() -> tuple[ToolResult, ToolResult]:
        with anyio.fail_after(20):
            swallowed = await rt.call("swallows", {})
            await anyio.sleep(0.01)  # a cancellation left pending on the task would raise here
            return swallowed, await rt.call("quick", {})

    swallowed, following = anyio.run(main, backend="asyncio")
    assert (swallowed.error, swallowed.output) == (None, "swallowed")
    assert following.output == "quick"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_abort_event_is_left_with_no_waiter_after_calls_that_ended(make_project: Factory, backend: str) -> None:
    rt = _runtime(make_project, 60)

    async def main() -> tuple[list[str], int, ToolResult]:
        abort = anyio.Event()
        outputs = [(await rt.call("quick", {}, abort=abort, session=str(n))).output for n in range(3)]
        await anyio.lowlevel.checkpoint()
        waiting = abort.statistics().tasks_waiting
        abort.set()
        with anyio.fail_after(20):
            return outputs, waiting, await rt.call("sleeps", {}, abort=abort)

    outputs, waiting, aborted = anyio.run(main, backend=backend)
    assert (outputs, waiting) == (["quick"] * 3, 0)
    assert aborted.error == "User aborted the command"
