"""The ask flow: a call at ask waits for the person's reply; "always" approvals live per session.

`PermissionBroker` is the one mutable piece of the permission engine: one per Runtime, it holds
each session's approvals and the asks still waiting, and it outlives snapshot reloads (a pending
ask keeps the ruleset of the snapshot its call started with). It is meant for one event loop.

Replies, as OpenCode's `PermissionNext.reply`:
- `once`: this call runs;
- `always`: allow rules for the call's `always` patterns join the session, this call runs, and every
  other pending ask of the session that is now fully allowed runs too (its asker is cancelled);
- `reject`: this call fails with `RejectedError` (or `CorrectedError` carrying the person's message)
  and every other pending ask of the session fails with `RejectedError`.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import anyio

from ..errors import CorrectedError, DeniedError, PermissionBlocked, RejectedError, UsageError
from ..telemetry import count_ask
from .evaluate import approval_required_message, decide, denied_message
from .model import Decision, PatternDecision, PermissionRequest, Rule
from .rules import Ruleset

__all__ = ["APPROVAL_SOURCE", "AskRequest", "Asker", "PermissionBroker", "Reply"]

APPROVAL_SOURCE = "session approval"
_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Reply:
    """The person's answer to an ask."""

    kind: Literal["once", "always", "reject"]
    message: str | None = None
    """With `reject`: feedback the model receives (`CorrectedError`)."""


@dataclass(frozen=True, slots=True)
class AskRequest:
    """What the person is asked about: the call, the patterns still at ask, and the tool's own words."""

    id: str
    session: str
    tool: str
    call_id: str
    pending: tuple[PatternDecision, ...]
    """The (permission, pattern) verdicts that are at ask, each with the rule that said so."""
    requests: tuple[PermissionRequest, ...]
    title: str | None = None
    """What the call is about: the tool's `confirm:` title, else the call's title (`Read src/a.py`; for
    bash, the model's description of the command); None only for a tool without either."""
    message: str | None = None
    """The tool's `confirm:` text: what the call is about to do."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    agent: str = ""
    """The agent the call runs as: an "always" reply approves for this agent of the session only."""


Asker = Callable[[AskRequest], Awaitable[Reply]]


@dataclass(slots=True)
class _Pending:
    request: AskRequest
    ruleset: Ruleset
    locked: Ruleset
    settled: anyio.Event = field(default_factory=anyio.Event)
    error: PermissionBlocked | None = None
    done: bool = False


_NO_APPROVALS = Ruleset()
"""Shared by every session without approvals, so its per-permission index is built once."""


class PermissionBroker:
    """Per-session approvals and pending asks; `authorize` is the permission step of every call."""

    def __init__(self) -> None:
        self._approved: dict[tuple[str, str], Ruleset] = {}
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        self.on_always: Callable[[str, str, list[tuple[str, str]]], None] | None = None
        """Told (session, agent, [(permission, pattern)]) when an "always" reply adds approvals, before the
        call goes on (a persistent state store keeps them there)."""

    def approved(self, session: str, agent: str) -> Ruleset:
        """The allow rules "always" replies added for `agent` in `session`, oldest first.

        Approvals are scoped to (session, agent), unlike OpenCode's project-wide ones: what the
        build agent was allowed does not carry over to the plan agent of the same session."""
        return self._approved.get((session, agent), _NO_APPROVALS)

    def approvals(self, session: str, agent: str) -> list[tuple[str, str]]:
        """The (permission, pattern) pairs "always" approved for `agent` in `session`, in the order given."""
        return [(rule.permission, rule.pattern) for rule in self.approved(session, agent).rules]

    def restore(self, session: str, agent: str, approvals: Iterable[tuple[str, str]]) -> None:
        """Put back approvals that `approvals(session, agent)` returned in an earlier process."""
        added = [Rule(p, pattern, "allow", source=APPROVAL_SOURCE, layer="approved") for p, pattern in approvals]
        if added:
            self._approved[(session, agent)] = Ruleset.concat(self.approved(session, agent), Ruleset(added))

    def forget(self, session: str) -> None:
        """Drop the approvals of `session` (it ended), for every agent; its pending asks, if any, still settle."""
        for key in [key for key in self._approved if key[0] == session]:
            del self._approved[key]

    def pending(self, session: str) -> tuple[AskRequest, ...]:
        """The asks of `session` still waiting for a reply, in the order they were asked."""
        return tuple(p.request for p in self._pending.values() if p.request.session == session and not p.done)

    def reply(self, request_id: str, reply: Reply) -> None:
        """Answer a pending ask from outside its asker (a UI). Unknown or answered id → `UsageError`."""
        pending = self._pending.get(request_id)
        if pending is None or pending.done:
            waiting = ", ".join(p.request.id for p in self._pending.values() if not p.done) or "none"
            raise UsageError(f'no pending permission request "{request_id}"; pending requests: {waiting}')
        self._settle(pending, reply)

    async def authorize(
        self,
        requests: Sequence[PermissionRequest],
        *,
        ruleset: Ruleset,
        locked: Ruleset,
        session: str,
        agent: str,
        asker: Asker | None,
        tool: str = "",
        call_id: str = "",
        title: str | None = None,
        message: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Decision:
        """Return the call's decision when it may run; raise a `PermissionBlocked` error when not.

        deny → `DeniedError`; ask without an asker → `DeniedError` saying approval was required;
        ask with an asker → the reply decides. After an approval the returned decision's action is
        `allow` and its pattern verdicts still show what asked.
        """
        decision = decide(requests, ruleset, locked=locked, approved=self.approved(session, agent))
        if decision.action == "deny":
            raise DeniedError(denied_message(decision))
        if decision.action == "allow":
            return decision
        if asker is None:
            count_ask("unanswered")
            raise DeniedError(approval_required_message(decision))
        merged: dict[str, Any] = {}
        for request in requests:
            merged.update(request.metadata)
        ask = AskRequest(
            id=f"perm_{next(self._ids)}",
            session=session,
            tool=tool,
            call_id=call_id,
            pending=tuple(d for d in decision.decisions if d.action == "ask"),
            requests=tuple(requests),
            title=title,
            message=message,
            metadata=MappingProxyType(dict(metadata) if metadata is not None else merged),
            agent=agent,
        )
        pending = _Pending(ask, ruleset, locked)
        self._pending[ask.id] = pending
        try:
            await self._wait(pending, asker)
        finally:
            del self._pending[ask.id]
        if pending.error is not None:
            raise pending.error
        return Decision("allow", decision.decisions)

    async def _wait(self, pending: _Pending, asker: Asker) -> None:
        failure: list[Exception] = []

        async def ask_person() -> None:
            try:
                reply = await asker(pending.request)
            except Exception as error:  # a broken asker must not leave the call hanging
                failure.append(error)
                pending.settled.set()
                return
            if not pending.done:
                self._settle(pending, reply)

        # Race the asker against the event another reply may set (an "always" or a "reject" given to
        # a sibling ask, or `reply()` from a UI); whichever comes first settles, the other is cancelled.
        async with anyio.create_task_group() as group:
            group.start_soon(ask_person)
            await pending.settled.wait()
            group.cancel_scope.cancel()
        if failure:
            raise failure[0]

    def _settle(self, pending: _Pending, reply: Reply) -> None:
        count_ask(reply.kind)
        session = pending.request.session
        if reply.kind == "reject":
            self._finish(pending, CorrectedError(reply.message) if reply.message else RejectedError())
            for other in self._others(pending):
                self._finish(other, RejectedError())
            return
        self._finish(pending, None)
        if reply.kind == "once":
            return
        added = [
            Rule(request.permission, pattern, "allow", source=APPROVAL_SOURCE, layer="approved")
            for request in pending.request.requests
            for pattern in request.always
        ]
        if not added:
            return
        agent = pending.request.agent
        approved = Ruleset.concat(self.approved(session, agent), Ruleset(added))
        self._approved[(session, agent)] = approved
        if self.on_always is not None:
            self.on_always(session, agent, [(rule.permission, rule.pattern) for rule in added])
        for other in self._others(pending):
            if other.request.agent != agent:
                continue
            verdict = decide(other.request.requests, other.ruleset, locked=other.locked, approved=approved)
            if verdict.action == "allow":
                self._finish(other, None)

    def _others(self, pending: _Pending) -> list[_Pending]:
        session = pending.request.session
        return [p for p in self._pending.values() if p is not pending and not p.done and p.request.session == session]

    @staticmethod
    def _finish(pending: _Pending, error: PermissionBlocked | None) -> None:
        pending.done = True
        pending.error = error
        pending.settled.set()
