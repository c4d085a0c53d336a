"""What the calls of one Runtime share across snapshots (`Services`): sessions, approvals, the audit log,
listeners, caches, and what calls start and leave running (language servers, background processes).

One `Services` per Runtime; nothing here is shared between Runtimes. Every cache is bounded. The Runtime tells
it of a swap (`code_reloaded`, `snapshot_swapped`) and closes it (`close`) without reaching into its caches.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..audit import AuditLog
from ..lsp.held import LanguageServers
from ..permissions.ask import PermissionBroker
from ..permissions.denied_reads import ReadDenies
from ..permissions.model import Decision
from ..permissions.rules import Ruleset
from ..result import ToolResult
from .events import CallEvent, Listener
from .record import Recorder
from .request import CallRequest
from .sessions import SessionStore

if TYPE_CHECKING:
    from ..build.snapshot import Snapshot
    from ..execute.background import BackgroundProcesses
    from ..lsp.access import LspAccess
    from ..store.model import Store
    from .persist import SessionKeeper

__all__ = ["DOOM_LOOP_THRESHOLD", "BatchRunner", "Runnable", "Services", "SessionState"]

DOOM_LOOP_THRESHOLD = 3

BatchRunner = Callable[[CallRequest, Sequence[tuple[str, Mapping[str, Any]]]], Awaitable[list[ToolResult]]]
"""Runs a batch's sub-calls in the scope of the call that made them."""


class Runnable(NamedTuple):
    """A handler function and how it runs, read once when it is resolved."""

    function: Callable[..., Any]
    is_async: bool
    """A coroutine function (else: run in a worker thread, or inline with `blocking: false`)."""


@dataclass
class SessionState:
    tools: dict[str, Any] = field(default_factory=dict)
    """`ToolContext.session_state`: shared by the tools of one session (read times, todos)."""
    recent: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    """The session's last calls (at most `DOOM_LOOP_THRESHOLD`), oldest first, for the doom-loop check: a
    tuple replaced on each call, since a deque's block is ~0.6 KiB of every session `toolrt serve` holds."""
    agent: str | None = None
    """The session-held agent (`plan_enter`/`plan_exit` set it): the agent of calls whose host names none."""

    def repeated(self, key: tuple[str, Mapping[str, Any]]) -> bool:
        """Record the call `key` (tool, arguments); whether it is the session's `DOOM_LOOP_THRESHOLD`th
        identical call in a row."""
        recent = self.recent = (*self.recent[1 - DOOM_LOOP_THRESHOLD :], key)
        return len(recent) == DOOM_LOOP_THRESHOLD and all(k == key for k in recent)


@dataclass
class Services:
    """What calls share within one Runtime, across snapshots."""

    broker: PermissionBroker = field(default_factory=PermissionBroker)
    recorder: Recorder = field(default_factory=lambda: Recorder(AuditLog(None)))
    host_handlers: MutableMapping[str, Callable[..., Any]] = field(default_factory=dict)
    listeners: list[Listener] = field(default_factory=list)
    sessions: SessionStore[SessionState] = field(default_factory=lambda: SessionStore(SessionState))
    results: dict[tuple[str, str, str], tuple[float, ToolResult]] = field(default_factory=dict)
    """`cache: {ttl}` tools' results by (tool, arguments, snapshot digest): (expiry, result)."""
    allowed: dict[tuple[str, str, str], tuple[Any, Any, Any, Decision]] = field(default_factory=dict)
    """Reusable allow decisions of argument-independent requests (see `call.permissions.authorize`)."""
    read_denies: dict[tuple[int, int, int], tuple[Ruleset, Ruleset, Ruleset, ReadDenies | None]] = field(
        default_factory=dict
    )
    """Each call's `read` rules for the sandbox by the identity of (agent rules, locked rules, approvals), the
    three kept with the answer (see `ActiveCall.read_denies`)."""
    handlers: dict[str, Runnable] = field(default_factory=dict)
    """Imported Python handlers by reference (`module:function`), each with how it runs; a reload that
    changes a module clears it."""
    host_runnables: dict[str, Runnable] = field(default_factory=dict)
    """How each host handler runs, by name (read again when the name is registered to another function)."""
    cleaned: set[Path] = field(default_factory=set)
    """Output directories whose old saved outputs were already swept."""
    run_batch: BatchRunner | None = None
    doom_loop_warns: bool = False
    """Development mode (`toolrt serve --dev`): the doom-loop guard adds a warning instead of asking."""
    call_counter: int = 0
    call_prefix: str = field(default_factory=lambda: f"call_{secrets.token_hex(4)}_")
    """What a generated call id starts with: random per Runtime, so ids never repeat across runs or
    processes (the audit log and the attribution journal outlive a process), then the counter."""
    language_servers: LanguageServers = field(default_factory=LanguageServers)
    """The Runtime's language servers, started on the first call that needs them."""
    keeper: SessionKeeper | None = None
    """Sessions loaded from and saved to a persistent state store; None with the `memory` store."""
    _background: BackgroundProcesses | None = None

    def __post_init__(self) -> None:
        self.sessions.on_release(self.broker.forget)
        self.sessions.on_release(self._end_background)

    def background(self) -> BackgroundProcesses:
        """The Runtime's background processes (made on first use: most Runtimes start none)."""
        if self._background is None:
            from ..execute.background import BackgroundProcesses

            self._background = BackgroundProcesses()
        return self._background

    def _end_background(self, session: str) -> None:
        """A released session's background processes end (in a thread: a release may happen mid-call)."""
        if self._background is not None and self._background.running(session=session):
            self._background.end(session=session, wait=False)

    def keep_sessions_in(self, store: Store) -> None:
        """Load each session from the persistent `store` before its calls and save it after them (another
        process, a replica or an earlier run shares it)."""
        from .persist import SessionKeeper

        sessions = self.sessions
        self.keeper = SessionKeeper(store, self.broker, lambda: sessions.idle_seconds)

    def code_reloaded(self) -> None:
        """The project's handler modules were imported again: the handlers resolved from the old ones go."""
        self.handlers.clear()

    def snapshot_swapped(self, tools: Set[str]) -> None:
        """A new snapshot serves: the old one's read rules go with it, and `tools` (changed, removed, or whose
        code changed) leave every session's doom-loop history: their earlier calls are no loop of the new ones."""
        self.read_denies.clear()
        for state in self.sessions.states():
            state.recent = tuple(entry for entry in state.recent if entry[0] not in tools)

    def session(self, name: str) -> SessionState:
        """The state of session `name` (see `sessions.SessionStore`: idle and surplus sessions are released).

        With a persistent store the state is read from the store first: another process (a replica, an
        earlier run) may have changed it since this one last used it."""
        state = self.sessions.get(name)
        if self.keeper is not None:
            self.keeper.load(name, state)
        return state

    def lsp_for(self, snapshot: Snapshot) -> LspAccess | None:
        """The language servers as `snapshot`'s settings declare them; None when none is configured."""
        return self.language_servers.for_snapshot(snapshot)

    def close(self) -> None:
        """End what the calls started and left running: background processes and language servers (later
        calls start neither)."""
        self.background().close()
        self.language_servers.close()

    def emit(self, event: CallEvent) -> None:
        for listener in tuple(self.listeners):
            listener(event)
