"""What a Python handler receives besides its arguments: a read-only view of the call it serves, and
ways to talk back (ask, report, reach the client). The call behind it is the pipeline's `ActiveCall`,
or a `DetachedCall` for a handler run outside a Runtime (a unit test)."""

from __future__ import annotations

import os.path
from collections.abc import Awaitable, Collection, Mapping, MutableMapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from ..attribution import journal_for
from ..permissions.model import PermissionRequest
from ..sandbox.config import call_plan
from ..truncate import tool_output_dir

if TYPE_CHECKING:  # a project's handler module imports this one to type its handlers, `toolrt validate` included
    import anyio

    from ..permissions.denied_reads import ReadDenies
    from ..result import ToolResult
    from ..sandbox.plan import SandboxPlan
    from ..sandbox.policy import SandboxPolicy
    from ..scope import CallScope, Questioner
    from .client import ClientChannel, ClientInfo, ClientRequest, Elicited

__all__ = ["HandlerCall", "LanguageServers", "ToolContext"]


class LanguageServers(Protocol):
    """`ctx.lsp`: the project's language servers (`toolrt.lsp.access.LspAccess`)."""

    async def diagnostics(
        self, files: Sequence[Path], deleted: Sequence[Path] = ()
    ) -> Mapping[Path, Sequence[Any]]: ...

    async def query(
        self, path: Path, operation: Any, timeout: float, text: str | None = None
    ) -> list[tuple[str, Any]]: ...

    def warm(self, path: Path) -> None: ...


class HandlerCall(Protocol):
    """The call a `ToolContext` shows: what it reads, and what its methods do."""

    @property
    def tool_id(self) -> str: ...
    @property
    def root(self) -> Path: ...
    @property
    def data_dir(self) -> Path: ...
    @property
    def scope(self) -> CallScope: ...
    @property
    def agent(self) -> str: ...
    @property
    def message_id(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def abort(self) -> anyio.Event | None: ...
    @property
    def session_state(self) -> MutableMapping[str, Any]: ...
    @property
    def extra(self) -> Mapping[str, Any]: ...
    @property
    def questioner(self) -> Questioner | None: ...
    @property
    def available_tools(self) -> tuple[str, ...]: ...
    @property
    def sandbox(self) -> SandboxPolicy | None: ...
    @property
    def granted(self) -> Collection[tuple[str, str]]: ...
    @property
    def channel(self) -> ClientChannel: ...

    def ask(self, requests: Sequence[PermissionRequest]) -> Awaitable[None]: ...
    def permits(self, permission: str, pattern: str) -> bool: ...
    def batch(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> Awaitable[list[ToolResult]]: ...
    def switch_agent(self, agent: str) -> None: ...
    def on_metadata(self, title: str | None, metadata: Mapping[str, Any] | None) -> None: ...
    def read_denies(self) -> ReadDenies | None: ...
    def language_servers(self) -> LanguageServers | None: ...


if TYPE_CHECKING:
    _shown = property
else:

    class _shown(property):
        """A `ToolContext` member a handler reads; assigning it says why it cannot."""

        def __set__(self, instance: object, value: object) -> None:
            raise AttributeError(
                f"ToolContext.{self.fget.__name__} is read-only: a handler reads the call it serves and acts "
                "through the context's methods (a title or live output: ctx.metadata(title=..., metadata=...))"
            )


def _answer(request: ClientRequest, raw: Mapping[str, Any] | None) -> Any:
    """A client's result in the shape the context's methods return."""
    from .client import Elicited

    result: Mapping[str, Any] = raw or {}
    if request.method == "elicitation/create":
        action = result.get("action")
        content = result.get("content")
        return Elicited(
            action if action in ("accept", "decline", "cancel") else "cancel",
            dict(content) if action == "accept" and isinstance(content, Mapping) else None,
        )
    if request.method == "roots/list":
        roots = result.get("roots")
        return [dict(root) for root in roots if isinstance(root, Mapping)] if isinstance(roots, list) else []
    return dict(result)


class ToolContext:
    """OpenCode's `Tool.Context`, over the call a handler serves: ids, the agent, an abort signal, live
    metadata, asking, and the client.

    Handlers treat paths relative to `root`, keep per-session state in `session_state`, and
    request extra permissions with `await ctx.ask(...)` (raises a `PermissionBlocked` error).
    Sync handlers run in a worker thread and reach async methods through `anyio.from_thread.run`.
    Members are read-only: `ToolContext(DetachedCall(tool_id=..., root=..., data_dir=...))` gives a
    context outside a Runtime.
    """

    __slots__ = ("_abort", "_call", "_live", "_requests_made", "_title")

    def __init__(self, call: HandlerCall, /) -> None:
        self._call = call
        self._abort = call.abort
        self._title: str | None = None
        self._live: dict[str, Any] | None = None
        self._requests_made = 0

    def __repr__(self) -> str:
        return f"ToolContext(tool={self.tool!r}, call_id={self.call_id!r}, session={self.session!r})"

    # --- the call (read-only) ----------------------------------------------------------------------

    @_shown
    def tool(self) -> str:
        """The tool's id."""
        return self._call.tool_id

    @_shown
    def root(self) -> Path:
        """The project root: relative paths are relative to it (`resolve`)."""
        return self._call.root

    @_shown
    def data_dir(self) -> Path:
        return self._call.data_dir

    @_shown
    def scope(self) -> CallScope:
        """Who is calling, as the caller said it (model, provider, client, session, flags, tool set)."""
        return self._call.scope

    @_shown
    def session(self) -> str:
        return self._call.scope.session

    @_shown
    def agent(self) -> str:
        """The agent whose rules apply: the scope's, or the config's default agent."""
        return self._call.agent

    @_shown
    def message_id(self) -> str:
        return self._call.message_id

    @_shown
    def call_id(self) -> str:
        return self._call.call_id

    @_shown
    def session_state(self) -> MutableMapping[str, Any]:
        """Per-session memory shared by the tools of one session (read times, todos)."""
        return self._call.session_state

    @_shown
    def extra(self) -> Mapping[str, Any]:
        """Host-supplied values (e.g. the `task` tool's runner)."""
        return self._call.extra

    @_shown
    def questioner(self) -> Questioner | None:
        """The host's questioner (the `question` tool's), or None."""
        return self._call.questioner

    @_shown
    def available_tools(self) -> tuple[str, ...]:
        """Ids of the tools this call's model may use (for messages such as batch's "not in registry")."""
        return self._call.available_tools

    @_shown
    def sandbox(self) -> SandboxPolicy | None:
        """The OS sandbox around processes the handler starts through toolrt (`bash`, `rg`); None: none."""
        return self._call.sandbox

    @_shown
    def granted(self) -> Collection[tuple[str, str]]:
        """(permission, pattern) pairs this call was allowed: an allowed `external_directory` widens the sandbox."""
        return self._call.granted

    @_shown
    def reads(self) -> ReadDenies | None:
        """The call's `read` rules when some could deny: the files they deny are masked in the sandbox."""
        return self._call.read_denies()

    @_shown
    def lsp(self) -> LanguageServers | None:
        """The language servers configured for this project (`toolrt.lsp`), or None."""
        return self._call.language_servers()

    @_shown
    def abort(self) -> anyio.Event:
        """Set when the call is aborted: long-running handlers watch it and stop."""
        if self._abort is None:
            import anyio

            self._abort = anyio.Event()
        return self._abort

    @_shown
    def title(self) -> str | None:
        """The title the handler set last (`metadata(title=...)`)."""
        return self._title

    @_shown
    def live_metadata(self) -> Mapping[str, Any]:
        """The live metadata the handler published so far (`metadata(metadata=...)`), merged."""
        return MappingProxyType(self._live if self._live is not None else {})

    @_shown
    def requests_made(self) -> int:
        """Requests `elicit`, `sample` and `roots` sent so far: their keys (`toolrt_1`, ...) follow the
        order, so a handler run again from the start (MCP 2026-07-28) finds its earlier answers."""
        return self._requests_made

    # --- what the handler does through the call ----------------------------------------------------

    def metadata(self, *, title: str | None = None, metadata: Mapping[str, Any] | None = None) -> None:
        """Publish live progress (a title, partial output) to listeners of the call."""
        if title is not None:
            self._title = title
        if metadata:
            if self._live is None:
                self._live = {}
            self._live.update(metadata)
        self._call.on_metadata(title, metadata)

    async def ask(
        self,
        permission: str,
        patterns: Sequence[str],
        *,
        always: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Ask for a permission of the handler's own; returns when allowed, raises when not."""
        request = PermissionRequest(permission, tuple(patterns), tuple(always), dict(metadata or {}))
        await self._call.ask([request])

    async def ask_requests(self, requests: Sequence[PermissionRequest]) -> None:
        """Ask several requests as one decision (any deny denies, all allow runs)."""
        await self._call.ask(requests)

    def permits(self, permission: str, pattern: str) -> bool:
        """Whether the rules allow (permission, pattern) outright, without asking anyone. The search tools
        leave out files `read` would not allow; outside a Runtime nothing is permitted unless the
        `DetachedCall` says so."""
        return self._call.permits(permission, pattern)

    async def batch(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
        """Run other tools in this call's scope (flags and tool set included) with its asker and abort."""
        return await self._call.batch(calls)

    def switch_agent(self, agent: str) -> None:
        """Make `agent` the session's agent: later calls whose host names no agent run under its rules
        and are offered its tools; listeners get an `agent` event (`plan_enter`, `plan_exit`).

        Raises:
            ToolFailure: no such agent, or this context has no session to hold it.
        """
        self._call.switch_agent(agent)

    def sandbox_plan(self) -> SandboxPlan | None:
        """What to enforce on a process this call starts (None: no sandbox; raises ToolFailure when
        the locked file requires one this machine lacks)."""
        call = self._call
        sandbox = call.sandbox
        if sandbox is None:
            return None
        root, data_dir = call.root, call.data_dir
        output_dir = tool_output_dir(data_dir, root)
        journal = journal_for(data_dir)
        return call_plan(
            sandbox, root=root, output_dir=output_dir, granted=call.granted, reads=call.read_denies(), journal=journal
        )

    def resolve(self, path: str) -> Path:
        """A path argument made absolute against the project root (no symlinks resolved)."""
        candidate = Path(os.path.expanduser(path))  # an unknown user's `~name` stays as written, never raises
        if not candidate.is_absolute():
            candidate = self._call.root / candidate
        return Path(os.path.normpath(candidate))

    # --- the client (MCP: the whole protocol; rt.call: the host's channel) -------------------------

    @_shown
    def client(self) -> ClientInfo:
        """`.capabilities`, `.name`, `.version`, `.protocol_version` of the client this call came from."""
        return self._call.channel.info

    def log(self, level: str, message: str, data: Any = None) -> None:
        """A log message to the client (`notifications/message`, under the client's log level)."""
        self._call.channel.log(level, message, data)

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Progress of this call (`notifications/progress` when the client sent a progress token)."""
        self._call.channel.progress(progress, total, message)

    @staticmethod
    def elicit_request(message: str, schema: Mapping[str, Any]) -> ClientRequest:
        """A form for the person: `schema` is a flat JSON Schema object (defaults, enums, multi-select)."""
        from .client import ClientRequest

        return ClientRequest(
            "elicitation/create", {"mode": "form", "message": message, "requestedSchema": dict(schema)}
        )

    @staticmethod
    def sample_request(messages: Sequence[Any], max_tokens: int, **params: Any) -> ClientRequest:
        """A completion by the client's model; a message may be plain text (a user message)."""
        from .client import ClientRequest

        shaped = [
            {"role": "user", "content": {"type": "text", "text": m}} if isinstance(m, str) else dict(m)
            for m in messages
        ]
        return ClientRequest("sampling/createMessage", {"messages": shaped, "maxTokens": max_tokens, **params})

    @staticmethod
    def roots_request() -> ClientRequest:
        from .client import ClientRequest

        return ClientRequest("roots/list")

    async def ask_client(self, requests: Mapping[str, ClientRequest]) -> dict[str, Any]:
        """Several requests in one round: `{key: answer}`, an elicitation's answer an `Elicited`, a
        sampling's the client's `CreateMessageResult`, roots' the list of roots.

        Raises:
            ProtocolError: -32021 when the client did not declare a capability a request needs.
        """
        from .client import check_capabilities

        check_capabilities(self._call.channel.info, requests.values())
        answers = await self._call.channel.request(requests)
        return {key: _answer(request, answers.get(key)) for key, request in requests.items()}

    async def _one(self, request: ClientRequest) -> Any:
        self._requests_made += 1
        key = f"toolrt_{self._requests_made}"
        return (await self.ask_client({key: request}))[key]

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Elicited:
        """Ask the person to fill in a form; `Elicited(action, content)`."""
        answer: Elicited = await self._one(self.elicit_request(message, schema))
        return answer

    async def sample(self, messages: Sequence[Any], max_tokens: int, **params: Any) -> dict[str, Any]:
        """Ask the client's model (`sampling/createMessage`); its `CreateMessageResult` as a dict."""
        answer: dict[str, Any] = await self._one(self.sample_request(messages, max_tokens, **params))
        return answer

    async def roots(self) -> list[dict[str, Any]]:
        """The client's roots (`roots/list`): `[{"uri": ..., "name": ...}]`."""
        answer: list[dict[str, Any]] = await self._one(self.roots_request())
        return answer

    async def continue_as_task(self) -> bool:
        """Let the rest of this call run as a task (MCP's tasks extension): the client gets a task handle
        now and the result when the call ends, and requests made from here on reach it through the task.
        True when the call now runs as a task (or already did); False where the client cannot hold one
        (no tasks extension, an older protocol, `rt.call` without such a host), and the call goes on
        as before. On MCP 2026-07-28, code before it runs again on each round of answers gathered first."""
        escalate = getattr(self._call.channel, "continue_as_task", None)
        if escalate is None:
            return False
        return bool(await escalate())
