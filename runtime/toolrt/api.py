"""`Runtime`: the public face the CLI, the MCP server and host applications use.

```python
rt = Runtime.load(root=".")
rt.specs("openai", model="gpt-5")
await rt.call("read", {"filePath": "README.md"})
```
A Runtime holds the current Snapshot (swapped whole on reload) and the state that outlives
snapshots: session approvals, session memory, the audit log, host handlers and listeners.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, overload

import anyio
import anyio.to_thread

from .attribution import Hold, digest_of, journal_for
from .audit import AuditLog
from .build.changes import ReloadStatus, SnapshotChange, changes_between
from .build.handler_code import changed_files, compile_code, import_code
from .build.selection import ToolSet, select
from .build.snapshot import Snapshot, build_snapshot, with_tool
from .call.client import ClientChannel
from .call.request import CallRequest
from .config.settings import CommandLineSettings, ResolvedSettings
from .errors import ConfigError, InvalidArgumentsError, Problem, UsageError
from .host.deprecated import DeprecatedNames
from .host.sessions import Sessions
from .host.turns import Turn, one_at_a_time, run_together
from .permissions.ask import Asker
from .permissions.evaluate import check as check_pattern
from .permissions.evaluate import decide
from .permissions.model import Decision, PermissionRequest
from .result import ToolResult
from .sandbox.launcher import hold_fork_server
from .scope import CallScope, Questioner, ScopeFields, scope_of

logger = logging.getLogger("toolrt.reload")

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .call.events import CallEvent
    from .call.state import Services
    from .execute.background import BackgroundProcess
    from .lsp.manager import ServerStatus
    from .store import Store

__all__ = ["ReloadStatus", "Runtime", "SnapshotChange"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
Dispatcher = Callable[[CallRequest, Snapshot, ToolSet, "Services"], Awaitable[ToolResult]]


def _nothing() -> None:
    """What closing releases before a Runtime's first call."""


def _audit_log(snapshot: Snapshot) -> AuditLog:
    return AuditLog(snapshot.resolved.values.audit_path)


def _with_scope_flags(values: Mapping[str, bool], scope_flags: Mapping[str, bool]) -> Mapping[str, bool]:
    unknown = sorted(set(scope_flags) - set(values))
    if unknown:
        known = ", ".join(sorted(values)) or "none"
        raise UsageError(f"unknown flag {', '.join(map(repr, unknown))} (declared flags: {known})")
    return {**values, **scope_flags}


class Runtime(DeprecatedNames):
    """A loaded toolrt configuration that answers spec, check and call requests."""

    def __init__(self, snapshot: Snapshot, *, cli: CommandLineSettings | None = None) -> None:
        self._snapshot = snapshot
        self._cli = cli or CommandLineSettings()
        """What the command line (or the host) set: every reload resolves the settings with it again."""
        self._host_handlers: dict[str, Callable[..., Any]] = {}
        self._services_: Services | None = None
        self._store: Store | None = None
        self._sessions: Sessions | None = None
        self.default_store = "memory"
        """The store opened when no layer sets the `store` setting: `memory` for hosts, `sqlite` for
        `toolrt serve` (set before the store's first use)."""
        self._release_fork_server: Callable[[], None] = _nothing
        self._selections: dict[tuple[Any, ...], ToolSet] = {}
        self._dispatcher: Dispatcher | None = None
        self._generation = 1
        self._last_error: ConfigError | None = ConfigError(snapshot.problems) if snapshot.problems else None
        self._code_problems: list[Problem] = []
        self._code_imported = False
        """The serving snapshot's handler code that did not import (`import_code`), until changed code imports."""
        self._swap_listeners: list[Callable[[SnapshotChange], None]] = []
        self._lock = threading.Lock()
        self._development = False

    @classmethod
    def load(
        cls,
        root: str | os.PathLike[str] = ".",
        *,
        flags: Mapping[str, bool] | None = None,
        settings: Mapping[str, Any] | None = None,
        partial: bool = False,
    ) -> Runtime:
        """Read, validate and compile the config at `root` (built-in layer included).

        `flags` and `settings` (dotted keys: `data_dir`, `audit`, `truncate.max_lines`, `serve.host`)
        are the host's own values: they beat the environment and every file but what the locked file's
        `settings:` section fixes (see `toolrt.config.settings`).

        With `partial=True` a broken config still loads and fails closed (what `toolrt serve`, `watch`,
        `list` and `call` do): the tools of invalid tool files are left out (`snapshot.withheld`), and
        an invalid `permissions.yaml`, `toolrt.yaml` or locked file lets no call run
        (`snapshot.blocked`); `status().last_error` holds the problems until a save fixes them.

        Raises:
            ConfigError: the config is invalid (and `partial` is false); `.problems` locate every finding.
            UsageError: `root` is not a directory, or a flag is unknown.
        """
        path = Path(root)
        if not path.is_dir():
            raise UsageError(f"--root {root}: not a directory")
        cli = CommandLineSettings(dict(settings or {}), dict(flags or {}))
        return cls(build_snapshot(path, cli=cli, partial=partial), cli=cli)

    @property
    def _services(self) -> Services:
        # Built on first use: the call pipeline's imports are not needed by specs, list or check.
        if self._services_ is None:
            from .call.record import Recorder
            from .call.state import Services

            retention = self._snapshot.resolved.values.retention
            self._services_ = Services(
                recorder=Recorder(
                    _audit_log(self._snapshot),
                    self.store,
                    audit_days=retention.audit_days,
                    session_days=retention.session_days,
                ),
                host_handlers=self._host_handlers,
                run_batch=self._batch,
                doom_loop_warns=self._development,
            )
            if self.store.persistent:
                self._services_.keep_sessions_in(self.store)
            # A Runtime that runs calls holds the process's sandbox fork server: the last one closed (or
            # collected unclosed) ends it.
            self._release_fork_server = hold_fork_server()
            weakref.finalize(self, self._release_fork_server)
        return self._services_

    # --- state ------------------------------------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        """The current snapshot; a call keeps the one it started with."""
        return self._snapshot

    @property
    def root(self) -> Path:
        return self._snapshot.root

    @property
    def flags(self) -> Mapping[str, bool]:
        return self._snapshot.resolved.flags

    @property
    def settings(self) -> ResolvedSettings:
        """Every setting's effective value and where it came from (`toolrt settings`)."""
        return self._snapshot.resolved

    @property
    def store(self) -> Store:
        """The state store the host-only `store` setting names (else `default_store`), opened on first use
        (its migrations applied, its retention settings applied once) and kept for the Runtime's life.

        Raises:
            StoreError: the store cannot be opened (unreachable, a newer schema); the text names the setting.
        """
        if self._store is None:
            from .store.uri import open_configured

            self._store = open_configured(self._snapshot.resolved, self._snapshot.data_dir, self.default_store)
        return self._store

    @property
    def audit(self) -> AuditLog:
        return self._services.recorder.audit

    @property
    def sessions(self) -> Sessions:
        """The sessions this Runtime holds: `release`, `limit`, `len`, `in`, and their state and approvals
        to keep between processes (`state`/`restore`, `approvals`/`restore_approvals`)."""
        if self._sessions is None:
            self._sessions = Sessions(self._services, lambda: self._snapshot.permissions.default_agent)
        return self._sessions

    @overload
    def subscribe(
        self, listener: Callable[[CallEvent], None], *, to: Literal["calls"] = "calls"
    ) -> Callable[[], None]: ...

    @overload
    def subscribe(self, listener: Callable[[SnapshotChange], None], *, to: Literal["swaps"]) -> Callable[[], None]: ...

    def subscribe(
        self, listener: Callable[[Any], None], *, to: Literal["calls", "swaps"] = "calls"
    ) -> Callable[[], None]:
        """Receive call events (`to="calls"`: running, metadata, completed, error, agent) or, with
        `to="swaps"`, a `SnapshotChange` after every snapshot swap (reload or register); returns a function
        that unsubscribes.

        Raises:
            UsageError: `to` is neither `calls` nor `swaps`.
        """
        if to == "calls":
            listeners: list[Callable[[Any], None]] = self._services.listeners
        elif to == "swaps":
            listeners = self._swap_listeners
        else:
            raise UsageError(f"subscribe(to={to!r}): a listener subscribes to 'calls' or 'swaps'")
        listeners.append(listener)
        return lambda: listeners.remove(listener)

    @property
    def development(self) -> bool:
        """Development mode (`toolrt serve --dev`, `toolrt watch`): the doom-loop guard warns instead of
        stopping the third identical call. A reload always clears the loop history of the tools it changed."""
        return self._development

    @development.setter
    def development(self, value: bool) -> None:
        self._development = value
        if self._services_ is not None:
            self._services_.doom_loop_warns = value

    def status(self) -> ReloadStatus:
        return ReloadStatus(self._generation, self._snapshot.digest, self._snapshot.loaded_at, self._last_error)

    def language_servers(self) -> list[ServerStatus]:
        """The language servers this Runtime started (name, root, state, pid, restarts, last error)."""
        services = self._services_
        return [] if services is None else services.language_servers.status()

    def background_processes(
        self, *, session: str | None = None, call_id: str | None = None
    ) -> tuple[BackgroundProcess, ...]:
        """The processes `background: true` tools left running (pid, tool, call, session, command, output
        file, start time), oldest first; of one session or call when given."""
        services = self._services_
        if services is None:
            return ()
        return services.background().running(session=session, call_id=call_id)

    def end_processes(
        self, *, session: str | None = None, call_id: str | None = None, pid: int | None = None
    ) -> tuple[BackgroundProcess, ...]:
        """End the background processes of a session, a call or a pid (every one when none is given):
        SIGTERM to each, SIGKILL half a second later; returns those it ended, once they are reaped. A
        call still running is ended by cancelling it (or its `abort` event): its processes end with it."""
        services = self._services_
        if services is None:
            return ()
        return services.background().end(session=session, call_id=call_id, pid=pid)

    # --- closing ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Shut down what the Runtime started and keeps running (its language servers and background
        processes); idempotent.

        The sandbox's fork server ends when the last Runtime that ran calls closes. Calls after `close`
        still run, without language servers and without starting a background process (with a persistent
        store, which closing closes, they fail closed: their records cannot be written). `with
        Runtime.load(...) as rt:` and `async with` close on exit; an interpreter that exits closes every
        Runtime left open.
        """
        store, self._store = self._store, None
        if store is not None:
            store.close()
        services = self._services_
        if services is None:
            return
        services.close()
        self._release_fork_server()

    async def aclose(self) -> None:
        """`close` from async code, without blocking the event loop."""
        await anyio.to_thread.run_sync(self.close)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- selection and specs ----------------------------------------------------------------------

    def _selection(self, scope: CallScope, snapshot: Snapshot | None = None) -> ToolSet:
        # A call passes the snapshot it read once: a reload swapping in between must not mix two configs.
        snapshot = snapshot or self._snapshot
        # Swaps and handler registrations clear the cache, so the key holds only what a call varies.
        key = (snapshot.digest, scope.selection_key())
        found = self._selections.get(key)
        if found is None:
            values = snapshot.resolved.flags
            if scope.flags:
                values = _with_scope_flags(values, scope.flags)
            if len(self._selections) > 256:
                self._selections.clear()
            found = select(snapshot, scope, flags=values, host_handlers=self._host_handlers)
            self._selections[key] = found
        return found

    def _held(self, scope: CallScope, snapshot: Snapshot) -> CallScope:
        """`scope` with its session's held agent (`plan_enter`/`plan_exit` set it) when the host names none."""
        services = self._services_
        if scope.agent is not None or services is None:
            return scope
        state = services.sessions.peek(scope.session)
        held = None if state is None else state.agent
        if held is None or held not in snapshot.permissions.agents:
            return scope
        return dataclasses.replace(scope, agent=held)

    def session_agent(self, session: str) -> str | None:
        """The agent `session` holds (switched to by `plan_enter`/`plan_exit`), used by calls and specs whose
        scope names no agent; None while it holds none."""
        return self._held(CallScope(session=session), self._snapshot).agent

    def tools(self, scope: CallScope | None = None, **fields: Unpack[ScopeFields]) -> ToolSet:
        """The tools offered to `scope` (or the keyword fields), and each hidden tool with its reason."""
        return self._selection(self._held(scope_of(scope, fields), self._snapshot))

    def specs(self, format: str, scope: CallScope | None = None, **fields: Unpack[ScopeFields]) -> list[dict[str, Any]]:
        """Provider function specs (`openai`, `openai-responses`, `anthropic`, `gemini`, `mcp`) for `scope`.

        Compiled once per snapshot and selection. Each spec is a new dict whose top-level keys the caller
        may change (e.g. add Anthropic's `cache_control`); the values below it are shared with the cache:
        `copy.deepcopy` a spec before changing anything nested.
        """
        toolset_ = self._selection(self._held(scope_of(scope, fields), self._snapshot))
        return [dict(spec) for spec in toolset_.specs(format)]

    # --- permissions ------------------------------------------------------------------------------

    def check(self, permission: str, pattern: str, *, agent: str | None = None) -> Decision:
        """The decision for one (permission, pattern) as the agent's rules give it (no session approvals)."""
        snapshot = self._snapshot
        permissions = snapshot.permissions
        from .call.permissions import pattern_requests

        analysed = pattern_requests(snapshot)(permission, pattern)
        if analysed is not None:  # `check bash "COMMAND"` analyses the command, as a bash call would
            return decide(analysed, permissions.ruleset(agent), locked=permissions.locked)
        return check_pattern(permission, pattern, permissions.ruleset(agent), locked=permissions.locked)

    def check_call(
        self,
        tool: str,
        args: Mapping[str, Any] | str | None,
        scope: CallScope | None = None,
        *,
        approvals: bool = False,
        **fields: Unpack[ScopeFields],
    ) -> tuple[Decision, list[PermissionRequest]]:
        """Every request a call would make and the decision on them, without running anything
        (the scope's rules; with `approvals`, also the "always" approvals of the scope's session)."""
        from .call.arguments import parse_arguments
        from .call.permissions import permission_requests

        scope = scope_of(scope, fields)
        agent = scope.agent
        snapshot = self._snapshot
        compiled = snapshot.tools.get(tool)
        if compiled is None:
            raise UsageError(f"unknown tool '{tool}' (tools: {', '.join(sorted(snapshot.tools))})")
        try:
            arguments = parse_arguments(compiled, args)
        except InvalidArgumentsError as exc:  # the caller's arguments; anything else is a bug, raised as itself
            raise UsageError(str(exc)) from exc
        requests = permission_requests(compiled, arguments, snapshot, agent)
        permissions = snapshot.permissions
        approved = None
        if approvals:
            approved = self._services.broker.approved(scope.session, agent or permissions.default_agent)
        return decide(requests, permissions.ruleset(agent), locked=permissions.locked, approved=approved), requests

    # --- registration -----------------------------------------------------------------------------

    def register(self, definition: Mapping[str, Any]) -> None:
        """Add or replace one tool from a mapping validated exactly like a tool file."""
        with self._lock:
            self._swap(with_tool(self._snapshot, definition))

    # --- trust ------------------------------------------------------------------------------------

    def held(self) -> tuple[Hold, ...]:
        """The project's config files and modules the model changed and the person has not approved
        (see `toolrt.attribution`): no build loads them until `approve`."""
        from .build.trusted import held_files
        from .config.layers import read_config

        return held_files(read_config(self.root), journal_for(self._snapshot.data_dir))

    def approve(self, hold: Hold) -> ReloadStatus:
        """The person approves the content `hold` showed: it is theirs from now on, and the config is
        reloaded with it.

        Raises:
            UsageError: the file changed since (or is gone): what was shown is not what would load.
        """
        try:
            data = hold.path.read_bytes()
        except OSError as error:
            raise UsageError(f"{hold.path}: cannot read it: {error.strerror}") from error
        if digest_of(data) != hold.digest:
            raise UsageError(f"{hold.path} changed since it was shown: review it again")
        journal_for(self._snapshot.data_dir).approve(hold.path, data, via="toolrt trust")
        return self.reload()

    def register_handler(self, name: str, handler: Callable[..., Any]) -> None:
        """Supply the handler of `handler: {host: NAME}` tools (e.g. `task`); they become visible."""
        self._host_handlers[name] = handler
        self._selections.clear()

    # --- reload -----------------------------------------------------------------------------------

    def reload(self) -> ReloadStatus:
        """Rebuild from disk; on success swap atomically, on failure keep serving the last good snapshot.

        A runtime that is serving a broken config (loaded with `partial=True`) takes each new partial
        build instead, so a save that fixes one file brings its tools back without a restart.
        """
        try:
            snapshot = build_snapshot(self._snapshot.root, cli=self._cli, partial=True, previous=self._snapshot)
        except ConfigError as error:
            self._last_error = error
            return self.status()
        except Exception as exc:  # any failure, even a bug, keeps the last good snapshot serving
            logger.exception("reload failed; still serving generation %d", self._generation)
            problem = Problem(str(self._snapshot.root), 0, 0, "", f"reload failed: {type(exc).__name__}: {exc}")
            self._last_error = ConfigError([problem])
            return self.status()
        problems = snapshot.problems
        if problems and not self._snapshot.problems:
            self._last_error = ConfigError(problems)  # keep the last good snapshot
            return self.status()
        code_problems = self._load_code(snapshot)
        if code_problems:
            self._last_error = ConfigError(code_problems)  # the previous code and snapshot keep serving
            return self.status()
        with self._lock:
            standing = [*problems, *self._code_problems]  # code that never imported stays reported
            self._last_error = ConfigError(standing) if standing else None
            if snapshot.digest != self._snapshot.digest:
                self._swap(snapshot)
        return self.status()

    def import_code(self) -> list[Problem]:
        """Import the current snapshot's project handler code now (a long-lived host does it once at start, so
        that a reload that finds the code broken keeps this code serving); the located failures, if any.

        Once per Runtime: a later host of the same Runtime is told the problems of the code in use (a reload
        since may have fixed them) instead of importing again what a broken save left on disk."""
        with self._lock:
            if self._code_imported:
                return list(self._code_problems)
        problems = import_code(self._snapshot.root, self._snapshot.tools)
        with self._lock:
            self._code_imported = True
            self._code_problems = problems
            if problems:
                self._last_error = ConfigError([*self._snapshot.problems, *problems])
        return list(problems)

    def _load_code(self, snapshot: Snapshot) -> list[Problem]:
        """Load the snapshot's changed handler code before it may swap in: compile each changed project
        module, then import the project's handler modules afresh (`build.handler_code`). Problems mean the
        previous modules and snapshot keep serving."""
        changed = changed_files(snapshot.handler_files, self._snapshot.handler_files)
        if not changed:
            return []
        problems = compile_code(snapshot.root, changed & snapshot.handler_files.keys())
        if problems:
            return problems
        problems = import_code(snapshot.root, snapshot.tools, changed)
        if not problems:
            self._code_problems = []
        return problems

    def _swap(self, snapshot: Snapshot) -> None:
        old, services = self._snapshot, self._services_
        if services is not None and changed_files(snapshot.handler_files, old.handler_files):
            services.code_reloaded()  # the modules were imported again before the swap
        self._snapshot = snapshot
        self._generation += 1
        self._selections.clear()
        change = changes_between(old, snapshot)
        if services is not None:
            services.snapshot_swapped({*change.changed, *change.code_changed, *change.removed})
        for listener in tuple(self._swap_listeners):
            listener(change)

    # --- calls ------------------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        args: Mapping[str, Any] | str | None = None,
        scope: CallScope | None = None,
        *,
        ask: Asker | None = None,
        questioner: Questioner | None = None,
        abort: anyio.Event | None = None,
        call_id: str = "",
        message_id: str = "",
        extra: Mapping[str, Any] | None = None,
        channel: ClientChannel | None = None,
        **fields: Unpack[ScopeFields],
    ) -> ToolResult:
        """Run one call through repair, arguments, permission, execution, truncation and the audit log.

        `scope` says who is calling; keyword fields (`agent=`, `session=`, `flags=`, ...) override
        single fields of it. `ask` and `questioner` reach the person, `abort` stops the call, `channel`
        is what the handler's `ctx.client`, `ctx.log`, `ctx.elicit`, `ctx.sample`, ... reach (none: the
        client declares nothing, and those requests are `ProtocolError(-32021)` error results).
        Failures come back as results with `error` set (a message written for the model).

        Raises:
            UsageError: the scope names an agent or tool set the config does not define.
        """
        request = CallRequest(
            tool,
            args,
            scope_of(scope, fields),
            call_id,
            message_id,
            ask,
            abort,
            questioner,
            _EMPTY if extra is None else extra,
            client=channel,
        )
        return await self._dispatch(request)

    def _dispatch(self, request: CallRequest) -> Awaitable[ToolResult]:
        """The pipeline's coroutine for `request` (returned, not awaited here: one coroutine less per call)."""
        snapshot = self._snapshot
        scope = self._held(request.scope, snapshot)
        if scope is not request.scope:
            request = request._replace(scope=scope)
        toolset = self._selection(request.scope, snapshot)
        snapshot.permissions.ruleset(request.scope.agent)  # an unknown agent is the caller's mistake, not the model's
        if self._dispatcher is None:
            from .call.pipeline import dispatch

            self._dispatcher = dispatch
        return self._dispatcher(request, snapshot, toolset, self._services)

    def call_sync(
        self,
        tool: str,
        args: Mapping[str, Any] | str | None = None,
        scope: CallScope | None = None,
        *,
        ask: Asker | None = None,
        questioner: Questioner | None = None,
        abort: anyio.Event | None = None,
        call_id: str = "",
        message_id: str = "",
        extra: Mapping[str, Any] | None = None,
        channel: ClientChannel | None = None,
        **fields: Unpack[ScopeFields],
    ) -> ToolResult:
        """`call` for scripts without an event loop (the same arguments).

        Raises:
            UsageError: the scope names an agent or tool set the config does not define.
        """
        request = CallRequest(
            tool,
            args,
            scope_of(scope, fields),
            call_id,
            message_id,
            ask,
            abort,
            questioner,
            extra or _EMPTY,
            client=channel,
        )
        return anyio.run(lambda: self._dispatch(request))

    async def call_many(
        self,
        calls: Sequence[tuple[str, Mapping[str, Any] | str | None]],
        scope: CallScope | None = None,
        *,
        ask: Asker | None = None,
        questioner: Questioner | None = None,
        abort: anyio.Event | None = None,
        extra: Mapping[str, Any] | None = None,
        **fields: Unpack[ScopeFields],
    ) -> list[ToolResult]:
        """Independent calls in one scope: `parallel: true` tools run concurrently, the rest in order;
        results in call order."""
        base = CallRequest("", None, scope_of(scope, fields), "", "", ask, abort, questioner, extra or _EMPTY)
        return await self._run_many(base, calls)

    async def _run_many(
        self, base: CallRequest, calls: Sequence[tuple[str, Mapping[str, Any] | str | None]]
    ) -> list[ToolResult]:
        return await run_together(
            self._snapshot,
            [tool for tool, _ in calls],
            lambda i: self._dispatch(base._replace(tool=calls[i][0], args=calls[i][1])),
        )

    async def run_tool_calls(
        self,
        format: str,
        response: Any,
        scope: CallScope | None = None,
        *,
        ask: Asker | None = None,
        questioner: Questioner | None = None,
        abort: anyio.Event | None = None,
        extra: Mapping[str, Any] | None = None,
        **fields: Unpack[ScopeFields],
    ) -> list[dict[str, Any]]:
        """Run every tool call of one model turn; return what to append to the next request.

        `format` is a provider format (`openai`, `openai-responses`, `anthropic`, `gemini`);
        `response` is that provider's response for the turn (the SDK object or the same as plain
        dicts), or the `ToolCall`s a stream accumulator collected. `scope` (and the keyword fields) and
        the other options are `call`'s. Calls run through the pipeline
        like `call_many` (`parallel` tools concurrently, results in call order); asks and questions
        of concurrent calls reach `ask` and `questioner` one at a time. Malformed calls (arguments
        that are not JSON, an unknown, empty or hidden name) come back as error results for the
        model; a call without an id (which every format but `gemini` needs to match its result) is
        not run (its result could not reach the model) but is recorded like every call, as `invalid`
        under a generated id (`call_<n>`). Calls whose id the response repeats are none of them run
        (each is recorded as `invalid`) and each such id is answered once (Gemini: once per call).
        No tool calls → `[]`.

        Raises:
            UsageError: `format` is unknown, or `agent` names no agent.
        """
        turn = Turn.of(format, response)
        if not turn.calls:
            return []
        who = scope_of(scope, fields)
        self._snapshot.permissions.ruleset(who.agent)  # an unknown agent: the host's mistake, raised
        lock = anyio.Lock()
        base = CallRequest(
            "",
            None,
            who,
            ask=None if ask is None else one_at_a_time(ask, lock),
            abort=abort,
            questioner=None if questioner is None else one_at_a_time(questioner, lock),
            extra=_EMPTY if extra is None else extra,
        )
        requests = turn.requests(base)
        results = await run_together(self._snapshot, [r.tool for r in requests], lambda i: self._dispatch(requests[i]))
        return turn.messages(results)

    async def _batch(self, request: CallRequest, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
        # Sub-calls keep the whole scope (flags and tool set too), the asker, the questioner and the abort.
        return await self._run_many(request._replace(call_id="", message_id=""), calls)
