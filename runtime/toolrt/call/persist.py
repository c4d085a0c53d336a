"""Sessions kept in a persistent state store, so that a restarted server (or another replica) goes on
where the last one stopped: the tools' memory (read-before-edit stamps, todos), the session-held agent
and the "always" approvals.

A session's state is read from the store before each call (another replica may have changed it) and
saved after it, and an approval is written the moment the person gives it (before the call it approved
goes on). Two replicas running calls of one session at the same moment: the later save wins. The
store names the session by `session_id` of its name, never the name (a 2026-07-28 token is a
credential). Only a persistent store gets a keeper: with `memory` nothing here runs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..permissions.ask import PermissionBroker
from ..store.model import Store, session_id

if TYPE_CHECKING:
    from .state import SessionState

__all__ = ["TOUCH_EVERY_SECONDS", "SessionKeeper"]

TOUCH_EVERY_SECONDS = 3600.0
"""A session whose state no call changed is still written this often (retention sees it used), or a
quarter of the sessions' idle time when that is shorter."""

READ_REUSE_SECONDS = 1.0
"""How long what `known` read stands in for the `load` of the request's call (the same request)."""

logger = logging.getLogger("toolrt.store")


class SessionKeeper:
    """Loads and saves one Runtime's sessions through `store`."""

    MEMO_LIMIT = 4096

    def __init__(self, store: Store, broker: PermissionBroker, idle: Callable[[], float | None] = lambda: None) -> None:
        self.store = store
        self._broker = broker
        self._idle = idle
        self._read: tuple[str, float, dict[str, Any] | None, list[tuple[str, str, str]]] | None = None
        """What `known` (or `fresh`) just learnt of a session, for the `load` of the call that follows."""
        """The sessions' idle time (`--session-idle`): a session no replica used for that long has expired
        for all of them."""
        self._held: dict[str, tuple[str, float]] = {}
        """Session name → the state the store holds for it as last read or written here (as JSON), and
        when: a call that changed nothing is not written again (but once an hour, so that retention
        counts the session as used)."""
        broker.on_always = self.approved

    def known(self, name: str) -> bool:
        """Whether the store holds a state for session `name` (a token another process issued).

        Raises:
            StoreError: the store cannot be read (a token must not be taken as unknown, and replaced by a
                new session, because the store is briefly away).
        """
        key = session_id(name)
        saved, approvals = self.store.load_session_and_approvals(key)
        if saved is None:
            return False
        if self._expired(saved, time.time()):  # idle on every replica: its token opens a new session
            self.store.drop_session(key)
            return False
        self._read = (name, time.monotonic(), saved, approvals)  # the call that follows need not read again
        return True

    def fresh(self, name: str) -> None:
        """Session `name` was just made (a token just issued): the store holds nothing of it yet."""
        self._read = (name, time.monotonic(), None, [])

    def _expired(self, saved: dict[str, Any], now: float) -> bool:
        idle, touched = self._idle(), saved.get("touched")
        return idle is not None and isinstance(touched, (int, float)) and touched < now - idle

    def _touch_every(self) -> float:
        """How often a session whose state did not change is written all the same (its `touched` time):
        often enough that no replica takes a session in use elsewhere as idle."""
        idle = self._idle()
        return TOUCH_EVERY_SECONDS if idle is None else min(TOUCH_EVERY_SECONDS, idle / 4)

    def load(self, name: str, state: SessionState) -> None:
        """Bring `state` up to what the store holds of session `name` (kept approvals are added).

        Raises:
            StoreError: the store cannot be read: the call must not run (its approvals, read stamps and
                audit record live there).
        """
        read, self._read = self._read, None
        if read is not None and read[0] == name and time.monotonic() - read[1] < READ_REUSE_SECONDS:
            saved, approvals = read[2], read[3]
        else:
            saved, approvals = self.store.load_session_and_approvals(session_id(name))
        if saved is not None:
            saved.pop("touched", None)
        text = _encoded(saved) if saved is not None else None
        held = self._held.get(name)
        if held is None or held[0] != text:  # changed elsewhere (or first seen): when it was written is unknown
            self._remember(name, text, 0.0)
        if saved is not None:
            tools = saved.get("tools")
            if isinstance(tools, dict):
                state.tools.clear()
                state.tools.update(tools)
            agent = saved.get("agent")
            state.agent = agent if isinstance(agent, str) else None
        by_agent: dict[str, list[tuple[str, str]]] = {}
        for agent_name, permission, pattern in approvals:
            by_agent.setdefault(agent_name, []).append((permission, pattern))
        for agent_name, pairs in by_agent.items():
            given = set(self._broker.approvals(name, agent_name))
            self._broker.restore(name, agent_name, [pair for pair in pairs if pair not in given])

    def pending(self, name: str, state: SessionState) -> tuple[str, dict[str, Any], float, str] | None:
        """What `save` would write, for the call's record to carry in the same write (`Recorder.record`):
        (store key, state, now, encoded state); None when nothing need be written (or it cannot be encoded).
        `saved` afterwards."""
        value = {"tools": state.tools, "agent": state.agent}
        now = time.time()
        try:
            text = _encoded(value)
        except (TypeError, ValueError) as error:
            logger.error("cannot save session state to the store: %s", error)
            return None
        held = self._held.get(name)
        if held is not None and held[0] == text and now - held[1] < self._touch_every():
            return None
        return session_id(name), {**value, "touched": now}, now, text

    def saved(self, name: str, text: str, now: float) -> None:
        """A `pending` state was written."""
        self._remember(name, text, now)

    def _remember(self, name: str, text: str | None, now: float) -> None:
        if text is None:
            self._held.pop(name, None)
            return
        if len(self._held) >= self.MEMO_LIMIT:
            self._held.clear()
        self._held[name] = (text, now)

    def approved(self, name: str, agent: str, pairs: list[tuple[str, str]]) -> None:
        """Keep "always" approvals the moment they are given."""
        now = time.time()
        key = session_id(name)
        try:
            for permission, pattern in pairs:
                self.store.add_approval(key, agent, permission, pattern, now)
        except StoreError as error:
            logger.error("cannot keep an approval in the store (it holds in this process only): %s", error)


def _encoded(state: object) -> str:
    return json.dumps(state, separators=(",", ":"), default=str)
