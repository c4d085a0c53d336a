"""Sessions: the unit that holds approvals, read-before-edit stamps, the doom-loop history and todos.

A `SessionStore` maps session names to their state. A name's state is created on first use and kept
until one of three things releases it: its owner ends it (`release`, e.g. an MCP client closing its
session), it stays idle longer than `idle_seconds`, or the store holds more than `max_sessions` and it
is the most idle one not busy (a session with work still running, as a `busy` listener says: a new
session releases an idle one before it ends another's running work; the most idle of all when every
one is busy). Releasing a session also tells the `on_release` listener (the permission broker
drops the session's approvals there), so nothing a session held outlives it.

Expiry needs no timer: every use looks at the most idle sessions first and drops the expired ones,
so the cost is constant per use and memory stays bounded without a background task.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from ..errors import UsageError

__all__ = ["DEFAULT_IDLE_SECONDS", "DEFAULT_MAX_SESSIONS", "SessionStore"]

DEFAULT_IDLE_SECONDS = 30 * 60.0
"""A session unused this long is released (the MCP SDK closes idle HTTP sessions after the same time)."""
DEFAULT_MAX_SESSIONS = 4096
"""Sessions held at once; past it the most idle one is released."""

State = TypeVar("State")


class SessionStore(Generic[State]):
    """Session states by name, the most recently used last."""

    def __init__(
        self,
        factory: Callable[[], State],
        *,
        idle_seconds: float | None = DEFAULT_IDLE_SECONDS,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = factory
        self._clock = clock
        self._states: OrderedDict[str, tuple[State, float]] = OrderedDict()
        self._listeners: list[Callable[[str], None]] = []
        self._busy: list[Callable[[str], bool]] = []
        self.idle_seconds = idle_seconds
        self.max_sessions = max_sessions
        self.limit(idle_seconds=idle_seconds, max_sessions=max_sessions)

    def limit(self, *, idle_seconds: float | None, max_sessions: int) -> None:
        """Set how long an unused session lives (None: until released) and how many are held at once.

        Raises:
            UsageError: a limit that is not positive.
        """
        if idle_seconds is not None and not idle_seconds > 0:
            raise UsageError(f"the session idle time must be a positive number of seconds, not {idle_seconds}")
        if max_sessions < 1:
            raise UsageError(f"the session limit must be at least 1, not {max_sessions}")
        self.idle_seconds = idle_seconds
        self.max_sessions = max_sessions
        self._expire(self._clock())
        while len(self._states) > max_sessions:
            self._drop(next(iter(self._states)))

    def on_release(self, listener: Callable[[str], None]) -> None:
        """Call `listener(name)` whenever a session is released (ended, expired or evicted)."""
        self._listeners.append(listener)

    def on_busy(self, busy: Callable[[str], bool]) -> None:
        """Ask `busy(name)` whether a session has work still running, before evicting it for a new one."""
        self._busy.append(busy)

    def _evictee(self) -> str:
        """The session a new one replaces: the most idle not busy, else the most idle."""
        for name in self._states:
            if not any(busy(name) for busy in self._busy):
                return name
        return next(iter(self._states))

    def get(self, name: str) -> State:
        """The state of `name`, created on first use; marks it as just used."""
        now = self._clock()
        self._expire(now)
        states = self._states
        found = states.get(name)
        if found is None:
            state = self._factory()
            if len(states) >= self.max_sessions:
                self._drop(self._evictee())
        else:
            state = found[0]
            states.move_to_end(name)
        states[name] = (state, now)
        return state

    def peek(self, name: str) -> State | None:
        """The state of `name` if it is held (idle sessions expire first), without marking it as used."""
        self._expire(self._clock())
        found = self._states.get(name)
        return None if found is None else found[0]

    def release(self, name: str) -> None:
        """Forget `name` and everything it held; unknown names are ignored."""
        if name in self._states:
            self._drop(name)
        else:
            for listener in tuple(self._listeners):
                listener(name)  # e.g. approvals given before the session's first call

    def states(self) -> list[State]:
        """The states held now (without marking any as used)."""
        return [state for state, _ in self._states.values()]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        self._expire(self._clock())
        return name in self._states

    def __len__(self) -> int:
        return len(self._states)

    def _expire(self, now: float) -> None:
        idle = self.idle_seconds
        if idle is None:
            return
        states = self._states
        while states:
            name, (_, used) = next(iter(states.items()))
            if now - used <= idle:
                return
            self._drop(name)

    def _drop(self, name: str) -> None:
        del self._states[name]
        for listener in tuple(self._listeners):
            listener(name)
