"""A call in flight and the state that outlives snapshots: requests, events, sessions, services.

`CallRequest` is what a model (or host) asked; `ActiveCall` is that call once repaired and allowed,
as the handler, command and record steps see it; `Services` is the mutable side of a Runtime
(approvals, session memory, audit log, listeners) that survives every reload.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio

from .audit import AuditLog
from .compiled import CompiledTool
from .context import Questioner
from .errors import ToolFailure
from .permissions.ask import Asker, PermissionBroker
from .permissions.evaluate import decide
from .permissions.model import Decision, PermissionRequest
from .result import ToolResult
from .selection import ToolSet
from .sessions import SessionStore
from .snapshot import Snapshot
from .templates import render

__all__ = ["ActiveCall", "CallEvent", "CallRequest", "Services", "SessionState", "call_title", "render_optional"]

DOOM_LOOP_THRESHOLD = 3
_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CallRequest:
    """One call as the model (or a host) made it."""

    tool: str
    args: Any
    agent: str | None = None
    model: str | None = None
    provider: str | None = None
    client: str | None = None
    session: str = "default"
    call_id: str = ""
    message_id: str = ""
    ask: Asker | None = None
    abort: anyio.Event | None = None
    questioner: Questioner | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class CallEvent:
    """`running` (data: input), `metadata` (title, metadata), then `completed` or `error` (data: the result,
    and the call's `start` and `end` as Unix times)."""

    kind: str
    call_id: str
    tool: str
    session: str
    data: Mapping[str, Any]
    time: float


@dataclass
class SessionState:
    tools: dict[str, Any] = field(default_factory=dict)
    """`ToolContext.session_state`: shared by the tools of one session (read times, todos)."""
    recent: deque[tuple[str, Mapping[str, Any]]] = field(default_factory=lambda: deque(maxlen=DOOM_LOOP_THRESHOLD))


@dataclass
class Services:
    """The mutable side of a Runtime that outlives snapshots: approvals, sessions, audit, listeners."""

    broker: PermissionBroker = field(default_factory=PermissionBroker)
    audit: AuditLog = field(default_factory=lambda: AuditLog(None))
    host_handlers: MutableMapping[str, Callable[..., Any]] = field(default_factory=dict)
    listeners: list[Callable[[CallEvent], None]] = field(default_factory=list)
    sessions: SessionStore[SessionState] = field(default_factory=lambda: SessionStore(SessionState))
    cache: dict[tuple[str, str, str], tuple[float, ToolResult]] = field(default_factory=dict)
    allowed: dict[tuple[str, str, str], tuple[Any, Any, Any, Decision]] = field(default_factory=dict)
    """Reusable allow decisions of argument-independent requests (see `call_permissions.authorize`)."""
    batch: Callable[[CallRequest, Sequence[tuple[str, Mapping[str, Any]]]], Awaitable[list[ToolResult]]] | None = None
    call_counter: int = 0

    def __post_init__(self) -> None:
        self.sessions.on_release(self.broker.forget)

    def session(self, name: str) -> SessionState:
        """The state of session `name` (see `sessions.SessionStore`: idle and surplus sessions are released)."""
        return self.sessions.get(name)

    def emit(self, event: CallEvent) -> None:
        for listener in tuple(self.listeners):
            listener(event)


@dataclass(frozen=True, slots=True)
class ActiveCall:
    """One call in flight: what every step after repair needs to know."""

    request: CallRequest
    snapshot: Snapshot
    toolset: ToolSet
    services: Services
    call_id: str
    agent: str
    tool: str
    granted: set[tuple[str, str]] = field(default_factory=set)
    """(permission, pattern) pairs the permission step allowed; a handler asking them again is not re-asked."""

    async def ask(self, requests: Sequence[PermissionRequest]) -> None:
        """`ToolContext.ask`: a handler's own requests, minus what this call was already allowed."""
        remaining = []
        for req in requests:
            patterns = tuple(p for p in req.patterns if (req.permission, p) not in self.granted)
            if patterns:
                remaining.append(replace(req, patterns=patterns))
        if not remaining:
            return
        decision = await self.services.broker.authorize(
            remaining,
            ruleset=self.snapshot.permissions.ruleset(self.agent),
            locked=self.snapshot.permissions.locked,
            session=self.request.session,
            asker=self.request.ask,
            tool=self.tool,
            call_id=self.call_id,
        )
        self.granted.update((d.permission, d.pattern) for d in decision.decisions)

    def permits(self, permission: str, pattern: str) -> bool:
        """`ToolContext.permits`: the agent's rules, the locked file and the session's approvals allow it."""
        permissions = self.snapshot.permissions
        decision = decide(
            (PermissionRequest(permission, (pattern,), ()),),
            permissions.ruleset(self.agent),
            locked=permissions.locked,
            approved=self.services.broker.approved(self.request.session),
        )
        return decision.action == "allow"

    def on_metadata(self, title: str | None, metadata: Mapping[str, Any] | None) -> None:
        if self.services.listeners:
            data = {"title": title, "metadata": metadata}
            self.services.emit(CallEvent("metadata", self.call_id, self.tool, self.request.session, data, time.time()))

    async def batch(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
        if self.services.batch is None:
            raise ToolFailure("batch calls are not available in this runtime")
        return await self.services.batch(self.request, calls)


def call_title(tool: CompiledTool, args: Mapping[str, Any], root: Path) -> str | None:
    """The tool's `title:` template rendered over the arguments; None without one or when it fails."""
    if tool.title is None:
        return None
    try:
        return render(tool.title, args, tool.parameter_names, root)
    except Exception:  # a title must never fail a call
        return None


def render_optional(template: Any, tool: CompiledTool, args: Mapping[str, Any], root: Path) -> str | None:
    return None if template is None else render(template, args, tool.parameter_names, root)
