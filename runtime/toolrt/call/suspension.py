"""How a resolved handler runs, and whether it can suspend, which decides whether its call needs a
timeout scope.

A timeout stops a handler only at a suspension (an `await` that waits): code between two suspensions
runs to its end whatever the deadline. A cancel scope with a deadline costs a timer on the event loop
per call (about 6 µs), so a coroutine function whose own body has no suspension point (an `async
def` that awaits nothing, as many small handlers are) runs without one: the timeout could never have
fired inside it. The answer is read once from the function's bytecode, when the handler is resolved,
and kept with it for the Runtime's life.
"""

from __future__ import annotations

import dis
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["Runnable", "can_suspend", "runnable"]

_SUSPENDING = frozenset(
    {"YIELD_VALUE", "YIELD_FROM", "SEND", "GET_AWAITABLE", "BEFORE_ASYNC_WITH", "GET_AITER", "GET_ANEXT"}
)
"""The opcodes of `await`, `async with` and `async for` (a frame suspends only at a yield)."""


class Runnable(NamedTuple):
    """A handler function and how it runs."""

    function: Callable[..., Any]
    is_async: bool
    """A coroutine function (else: run in a worker thread, or inline with `blocking: false`)."""
    suspends: bool
    """False only for a coroutine function whose body never suspends (see `can_suspend`)."""


def runnable(function: Callable[..., Any]) -> Runnable:
    is_async = inspect.iscoroutinefunction(function)
    return Runnable(function, is_async, not is_async or can_suspend(function))


def can_suspend(function: Callable[..., Any]) -> bool:
    """Whether a call of the coroutine function `function` can suspend: False only when its own code has
    no `await`, `async with` or `async for`; True when that cannot be read (a partial, a callable object)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return True
    return any(instruction.opname in _SUSPENDING for instruction in dis.get_instructions(code))
