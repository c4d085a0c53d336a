"""How a running handler is stopped: when its timeout passes, or when the caller's `abort` event is set.

Every handler that can suspend runs under its timeout, so the mechanism must cost little. On asyncio
(Python 3.11 and later) a call enters its deadline in its loop's `DeadlineTimer` (one loop timer at
the earliest deadline, see `deadline_timer`), which cancels the call's own task when the deadline
passes; an `abort` event is watched from the call's own task (`_watch_abort`) and cancels it the same
way. A cancellation of ours is told apart from one that came from outside (the host's cancel scope, an
MCP client's cancel) the way `asyncio.timeout` does it: we note that we cancelled, and `Task.uncancel`
says whether any other cancellation is still pending; when one is, the cancellation goes on as
cancellation. Elsewhere (trio, or asyncio on Python 3.10) anyio's cancel scopes do the same; a trio
cancel scope with a deadline is itself one timer.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel

from ..errors import ToolFailure
from .deadline_timer import timer_of

__all__ = ["ABORTED", "TIMED_OUT", "stop_in_time"]

TIMED_OUT = "The {tool} tool did not finish within {timeout:g} seconds and was stopped."
ABORTED = "User aborted the command"


class _Stop:
    """What cancelled the call's task, if anything did; `over` once the call has left `stop_in_time`."""

    __slots__ = ("over", "reason", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.reason: str | None = None
        self.over = False

    def expire(self) -> None:
        """The timer's callback: the deadline has passed."""
        self.cancel(TIMED_OUT)

    def set_seen(self, future: asyncio.Future[Any]) -> None:
        """The callback of the future the abort event's `wait` waits on: the event was set."""
        if not future.cancelled():
            self.cancel(ABORTED)

    async def abort_when_set(self, abort: anyio.Event) -> None:
        """The abort waiter task (where `_watch_abort` cannot wait without one)."""
        await abort.wait()
        self.cancel(ABORTED)

    def cancel(self, reason: str) -> None:
        """Cancel the call's task for `reason`, unless something already did or the call is over."""
        if self.reason is None and not self.over:
            self.reason = reason
            self.task.cancel()


def _watch_abort(stop: _Stop, abort: anyio.Event, loop: asyncio.AbstractEventLoop) -> Callable[[], object]:
    """Cancel the call's task when `abort` is set; returns what ends the watch.

    A task per call to await `abort.wait()` costs two turns of the event loop. Instead the `wait` coroutine
    is started here, in the call's own task, up to the future it waits on (on asyncio an event's `wait`
    waits on one future, which `set` completes), and that future's callback cancels the call; closing the
    coroutine at the end takes the future off the event's list as returning from `wait` would. Anything
    else (an event already set, whose `wait` only yields to the loop) gets a waiting task.
    """
    waiting = abort.wait()
    try:
        awaited = waiting.send(None)
    except StopIteration:  # set, and nothing to wait for
        stop.cancel(ABORTED)
        return _nothing
    if isinstance(awaited, asyncio.Future) and awaited.get_loop() is loop:
        awaited.add_done_callback(stop.set_seen)
        return waiting.close
    waiting.close()
    waiter: asyncio.Task[None]
    if sys.version_info >= (3, 12):  # started at once: it runs until it waits, with no turn of the loop
        waiter = asyncio.Task(stop.abort_when_set(abort), loop=loop, eager_start=True)
    else:
        waiter = loop.create_task(stop.abort_when_set(abort))
    return waiter.cancel


def _nothing() -> None:
    return None


async def stop_in_time(awaitable: Awaitable[Any], timeout: float, tool_id: str, abort: anyio.Event | None) -> Any:
    """Await `awaitable` in this task; `ToolFailure` when `timeout` seconds pass first or `abort` is set.

    A cancellation from outside propagates as cancellation, whatever fired meanwhile.
    """
    if sys.version_info >= (3, 11):  # `Task.uncancel` and `Task.cancelling`
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio)
            return await _in_scopes(awaitable, timeout, tool_id, abort)
        task = asyncio.current_task(loop)
        if task is None:
            return await _in_scopes(awaitable, timeout, tool_id, abort)
        stop = _Stop(task)
        cancelling = task.cancelling()
        timer = timer_of(loop)
        timer.enter(stop, loop.time() + timeout, loop)
        end_watch: Callable[[], object] | None = None
        try:
            if abort is not None:
                end_watch = _watch_abort(stop, abort, loop)
            outcome = await awaitable
        except asyncio.CancelledError:
            if stop.reason is not None and task.uncancel() <= cancelling:
                # Ours alone, by the task's count; an enclosing anyio scope cancelled while the handler was
                # shielded has not cancelled the task yet, and this checkpoint lets it.
                await anyio.lowlevel.checkpoint_if_cancelled()
                raise ToolFailure(stop.reason.format(tool=tool_id, timeout=timeout)) from None
            raise
        except BaseException:
            if stop.reason is not None:  # the handler turned our cancellation into a failure of its own
                task.uncancel()
            raise
        else:
            if stop.reason is not None:  # the handler swallowed our cancellation and returned
                task.uncancel()
        finally:
            stop.over = True
            timer.leave(stop)
            if end_watch is not None:
                end_watch()
        return outcome
    return await _in_scopes(awaitable, timeout, tool_id, abort)


async def _in_scopes(awaitable: Awaitable[Any], timeout: float, tool_id: str, abort: anyio.Event | None) -> Any:
    """`stop_in_time` with anyio's cancel scopes (trio; asyncio without `Task.uncancel`)."""
    with anyio.move_on_after(timeout):
        if abort is None:
            return await awaitable
        with anyio.CancelScope() as aborted:
            return await _watched(awaitable, abort, aborted)
        raise ToolFailure(ABORTED)
    raise ToolFailure(TIMED_OUT.format(tool=tool_id, timeout=timeout))


async def _watched(awaitable: Awaitable[Any], abort: anyio.Event, scope: anyio.CancelScope) -> Any:
    """`awaitable`'s outcome; a watcher beside it cancels `scope` when `abort` is set."""
    outcome: list[Any] = []
    failure: list[Exception] = []

    async def watch() -> None:
        await abort.wait()
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            outcome.append(await awaitable)
        except Exception as exc:  # raised below as itself, not wrapped in the task group's ExceptionGroup
            failure.append(exc)
        group.cancel_scope.cancel()  # ends the watcher
    if failure:
        raise failure[0]
    return outcome[0]
