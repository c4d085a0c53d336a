"""The deadlines of the calls running on one asyncio event loop, kept by one timer at the earliest.

A timer per call (`loop.call_at`, then cancelling it when the call ends) costs more than a short call
itself spends anywhere else. Calls instead enter their deadline here and leave when they end; the loop
holds a timer only at the earliest deadline entered since it last fired. As calls mostly end long before
their timeout, a steady stream of calls arms about one timer per timeout period, not one per call. When a
timer fires, every call whose deadline has passed is expired, and the timer is armed again at the
earliest deadline still running.

One `DeadlineTimer` per loop (`timer_of`), held weakly: nothing here keeps a loop alive once no call
runs on it (the loop's own timer holds the `DeadlineTimer`, not the other way round).
"""

from __future__ import annotations

import asyncio
import math
import weakref
from typing import Protocol

__all__ = ["DeadlineTimer", "Expiring", "timer_of"]


class Expiring(Protocol):
    def expire(self) -> None:
        """The deadline has passed."""


class DeadlineTimer:
    """`enter(call, deadline, loop)` until `leave(call)`: `call.expire()` is called once the loop's clock
    passes `deadline`, never after `leave`."""

    __slots__ = ("__weakref__", "_armed_at", "_running")

    def __init__(self) -> None:
        self._running: dict[Expiring, float] = {}
        self._armed_at = math.inf
        """The earliest time a timer of ours is pending for (infinity: none is)."""

    def enter(self, call: Expiring, deadline: float, loop: asyncio.AbstractEventLoop) -> None:
        self._running[call] = deadline
        if deadline < self._armed_at:
            self._armed_at = deadline
            loop.call_at(deadline, self._fire, loop, deadline)

    def leave(self, call: Expiring) -> None:
        self._running.pop(call, None)

    def _fire(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if when == self._armed_at:
            self._armed_at = math.inf
        now = max(loop.time(), when)
        running = self._running
        due = [call for call, deadline in running.items() if deadline <= now]
        for call in due:
            del running[call]
            call.expire()
        if running:
            earliest = min(running.values())
            if earliest < self._armed_at:
                self._armed_at = earliest
                loop.call_at(earliest, self._fire, loop, earliest)


_timers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, DeadlineTimer] = weakref.WeakKeyDictionary()
_last: tuple[weakref.ref[asyncio.AbstractEventLoop], DeadlineTimer] | None = None
"""The loop asked about last and its timer (a loop asks again and again)."""


def timer_of(loop: asyncio.AbstractEventLoop) -> DeadlineTimer:
    """The `DeadlineTimer` of `loop` (made on first use)."""
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    timer = _timers.get(loop)
    if timer is None:
        timer = _timers[loop] = DeadlineTimer()
    _last = (weakref.ref(loop), timer)
    return timer
