"""`ActiveCall`: one call once repaired, as the permission, run, truncation and record steps see it."""

from __future__ import annotations

import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio

from ..build.compiled import CompiledTool
from ..build.selection import ToolSet
from ..build.snapshot import Snapshot
from ..errors import ToolFailure
from ..permissions.denied_reads import ReadDenies, read_denies
from ..permissions.evaluate import decide
from ..permissions.model import Decision, PermissionRequest
from ..permissions.protected import PROTECTED
from ..result import ToolResult
from ..sandbox.policy import SandboxPolicy
from ..scope import CallScope, Questioner
from .client import NO_CLIENT, ClientChannel
from .events import CallEvent
from .request import CallRequest
from .state import Services, SessionState

if TYPE_CHECKING:
    from .context import LanguageServers

__all__ = ["ActiveCall"]


READ_DENIES_KEPT = 256
"""The `read_denies` answers a Runtime keeps (the memo holds their rules alive, so ids stay theirs)."""


class ActiveCall(NamedTuple):
    """One call in flight, against the snapshot it started with (a tuple: one is built per call).

    A handler's `ToolContext` shows it (`context.HandlerCall`): the properties below are what the
    context reads, computed when a handler reads them, never copied per call."""

    request: CallRequest
    snapshot: Snapshot
    toolset: ToolSet
    services: Services
    call_id: str
    agent: str
    """The agent whose rules apply: the scope's, or the config's default agent."""
    name: str
    """The name the model called the tool by (the base tool's name for an override)."""
    tool: CompiledTool
    state: SessionState
    """The session's memory (read times, todos, the doom-loop history)."""
    granted: set[tuple[str, str]]
    """(permission, pattern) pairs the permission step allowed; a handler asking them again is not re-asked."""

    @property
    def session(self) -> str:
        return self.request.scope.session

    # --- what a handler's ToolContext reads (`context.HandlerCall`) --------------------------------

    @property
    def tool_id(self) -> str:
        return self.tool.id

    @property
    def root(self) -> Path:
        return self.snapshot.root

    @property
    def data_dir(self) -> Path:
        return self.snapshot.data_dir

    @property
    def scope(self) -> CallScope:
        return self.request.scope

    @property
    def message_id(self) -> str:
        return self.request.message_id

    @property
    def abort(self) -> anyio.Event | None:
        return self.request.abort

    @property
    def session_state(self) -> MutableMapping[str, Any]:
        return self.state.tools

    @property
    def extra(self) -> Mapping[str, Any]:
        return self.request.extra

    @property
    def questioner(self) -> Questioner | None:
        return self.request.questioner

    @property
    def available_tools(self) -> tuple[str, ...]:
        return self.toolset.names()

    @property
    def sandbox(self) -> SandboxPolicy | None:
        return self.snapshot.sandbox_for(self.tool.id)

    @property
    def channel(self) -> ClientChannel:
        return self.request.client or NO_CLIENT

    def language_servers(self) -> LanguageServers | None:
        return self.services.lsp_for(self.snapshot)

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
            session=self.session,
            agent=self.agent,
            asker=self.request.ask,
            tool=self.tool.id,
            call_id=self.call_id,
        )
        self.granted.update((d.permission, d.pattern) for d in decision.decisions)

    def permits(self, permission: str, pattern: str) -> bool:
        """`ToolContext.permits`: the agent's rules, the locked file and the session's approvals allow it.

        For `protected` the pattern is an absolute path: permitted when it is not protected, when this call
        was granted it, or when the rules allow writing it without asking."""
        if permission == PROTECTED:
            protection = self.snapshot.site.protected
            request = protection.request([pattern]) if protection is not None else None
            if request is None or all((PROTECTED, p) in self.granted for p in request.patterns):
                return True
            pattern = request.patterns[0]
        return self.rules_decide((PermissionRequest(permission, (pattern,), ()),)).action == "allow"

    def rules_decide(self, requests: Sequence[PermissionRequest]) -> Decision:
        """What this call's agent's rules, the locked rules and the session's approvals decide for
        `requests`, with no one asked."""
        permissions = self.snapshot.permissions
        return decide(
            requests,
            permissions.ruleset(self.agent),
            locked=permissions.locked,
            approved=self.services.broker.approved(self.session, self.agent),
        )

    def read_denies(self) -> ReadDenies | None:
        """The `read` rules of this call for the sandbox's masks (None when none could deny); built once per
        (agent rules, locked rules, approvals), which change only with a snapshot or an approval."""
        permissions = self.snapshot.permissions
        ruleset, locked = permissions.ruleset(self.agent), permissions.locked
        approved = self.services.broker.approved(self.session, self.agent)
        memo = self.services.read_denies
        key = (id(ruleset), id(locked), id(approved))
        hit = memo.get(key)
        if hit is not None and hit[0] is ruleset and hit[1] is locked and hit[2] is approved:
            return hit[3]
        found = read_denies(ruleset, locked, approved)
        if len(memo) >= READ_DENIES_KEPT:
            memo.clear()
        memo[key] = (ruleset, locked, approved, found)
        return found

    def emit(self, kind: str, data: Mapping[str, Any], at: float | None = None) -> None:
        """Tell listeners about this call (no-op without listeners); `at` is the event's time (default: now)."""
        services = self.services
        if services.listeners:
            when = time.time() if at is None else at
            services.emit(CallEvent(kind, self.call_id, self.name, self.session, data, when))

    def switch_agent(self, agent: str) -> None:
        """`ToolContext.switch_agent`: hold `agent` for the session and tell listeners (`agent` event)."""
        agents = self.snapshot.permissions.agents
        if agent not in agents:
            raise ToolFailure(f"There is no {agent} agent in this configuration (agents: {', '.join(sorted(agents))}).")
        self.state.agent = agent
        self.emit("agent", {"agent": agent, "previous": self.agent})

    def on_metadata(self, title: str | None, metadata: Mapping[str, Any] | None) -> None:
        self.emit("metadata", {"title": title, "metadata": metadata})

    async def batch(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
        """Run sub-calls in this call's scope (flags and tool set included) with its asker and abort."""
        run_batch = self.services.run_batch
        if run_batch is None:
            raise ToolFailure("batch calls are not available in this runtime")
        return await run_batch(self.request, calls)
