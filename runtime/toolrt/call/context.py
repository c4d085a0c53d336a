"""What a Python handler receives besides its arguments: who is calling, and ways to talk back."""

from __future__ import annotations

import os.path
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..attribution import journal_for
from ..errors import DeniedError, ToolFailure
from ..permissions.denied_reads import ReadDenies
from ..permissions.evaluate import unapprovable
from ..permissions.model import PermissionRequest
from ..result import ToolResult
from ..sandbox.config import call_plan
from ..sandbox.policy import SandboxPolicy
from ..scope import DEFAULT_SCOPE, CallScope, Questioner
from ..truncate import tool_output_dir
from .client import NO_CLIENT, ClientChannel, ClientInfo, ClientRequest, Elicited, check_capabilities

if TYPE_CHECKING:
    from ..sandbox.plan import SandboxPlan

__all__ = ["LanguageServers", "ToolContext"]


MetadataSink = Callable[[str | None, Mapping[str, Any] | None], None]
PermissionAsker = Callable[[Sequence[PermissionRequest]], Awaitable[None]]
SubcallRunner = Callable[[Sequence[tuple[str, Mapping[str, Any]]]], Awaitable[list[ToolResult]]]
AgentSwitch = Callable[[str], None]
Permits = Callable[[str, str], bool]
"""Whether the rules allow (permission, pattern) outright, without asking anyone."""


class LanguageServers(Protocol):
    """`ctx.lsp`: the project's language servers (`toolrt.lsp.access.LspAccess`)."""

    async def diagnostics(
        self, files: Sequence[Path], deleted: Sequence[Path] = ()
    ) -> Mapping[Path, Sequence[Any]]: ...

    async def query(
        self, path: Path, operation: Any, timeout: float, text: str | None = None
    ) -> list[tuple[str, Any]]: ...

    def warm(self, path: Path) -> None: ...


async def _no_batch(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
    raise RuntimeError("this context cannot run other tools")


async def _deny_without_asker(requests: Sequence[PermissionRequest]) -> None:
    """The default asker: nobody can approve, so every request is denied (fail closed)."""
    wanted = ", ".join(f"{r.permission} `{p}`" for r in requests for p in r.patterns) or "a permission"
    raise DeniedError(unapprovable(wanted))


def _permit_nothing(permission: str, pattern: str) -> bool:
    return False


def _answer(request: ClientRequest, raw: Mapping[str, Any] | None) -> Any:
    """A client's result in the shape the context's methods return."""
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


@dataclass(slots=True)
class ToolContext:
    """OpenCode's `Tool.Context`: ids, the agent, an abort signal, live metadata and ask.

    Handlers treat paths relative to `root`, keep per-session state in `session_state`, and
    request extra permissions with `await ctx.ask(...)` (raises a `PermissionBlocked` error).
    Sync handlers run in a worker thread and reach async methods through `anyio.from_thread.run`.
    """

    tool: str
    root: Path
    data_dir: Path
    scope: CallScope = DEFAULT_SCOPE
    """Who is calling, as the caller said it (model, provider, client, session, flags, tool set)."""
    agent: str = "build"
    """The agent whose rules apply: the scope's, or the config's default agent."""
    message_id: str = ""
    call_id: str = ""
    abort_event: anyio.Event | None = None
    """The caller's abort signal; None until a handler asks for `abort` (most never do)."""
    session_state: MutableMapping[str, Any] = field(default_factory=dict)
    """Per-session memory shared by the tools of one session (read times, todos)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Host-supplied values (e.g. the `task` tool's runner)."""
    on_metadata: MetadataSink | None = None
    asker: PermissionAsker = _deny_without_asker
    """How the handler's own requests are decided; without one, every request is denied."""
    batch: SubcallRunner = _no_batch
    permits: Permits = _permit_nothing
    """`permits(permission, pattern)`: whether the rules allow it without asking. The search tools leave
    out files `read` would not allow; without a pipeline behind the context nothing is permitted."""
    questioner: Questioner | None = None
    available_tools: tuple[str, ...] = ()
    """Ids of the tools this call's model may use (for messages such as batch's "not in registry")."""
    title: str | None = None
    live_metadata: dict[str, Any] = field(default_factory=dict)
    sandbox: SandboxPolicy | None = field(default_factory=SandboxPolicy)
    """The OS sandbox around processes the handler starts through toolrt (`bash`, `rg`); None: none.
    A context built without a Runtime gets the default policy, never none."""
    granted: Collection[tuple[str, str]] = ()
    """(permission, pattern) pairs this call was allowed: an allowed `external_directory` widens the sandbox."""
    reads: ReadDenies | None = None
    """The call's `read` rules when some could deny: the files they deny are masked in the sandbox."""
    language_servers: Callable[[], LanguageServers | None] | None = None
    """How `lsp` finds the Runtime's language servers (None: this context has none)."""
    on_agent: AgentSwitch | None = None
    """Makes an agent the session-held one (see `switch_agent`); None when nothing can hold it."""
    channel: ClientChannel = NO_CLIENT
    """The client the call came from (MCP), or the host's callbacks (`rt.call(..., client=...)`)."""
    requests_made: int = 0
    """Requests `elicit`, `sample` and `roots` sent so far: their keys (`toolrt_1`, ...) follow the
    order, so a handler run again from the start (MCP 2026-07-28) finds its earlier answers."""

    # --- the client (MCP: the whole protocol; rt.call: the host's channel) -------------------------

    @property
    def client(self) -> ClientInfo:
        """`.capabilities`, `.name`, `.version`, `.protocol_version` of the client this call came from."""
        return self.channel.info

    def log(self, level: str, message: str, data: Any = None) -> None:
        """A log message to the client (`notifications/message`, under the client's log level)."""
        self.channel.log(level, message, data)

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Progress of this call (`notifications/progress` when the client sent a progress token)."""
        self.channel.progress(progress, total, message)

    @staticmethod
    def elicit_request(message: str, schema: Mapping[str, Any]) -> ClientRequest:
        """A form for the person: `schema` is a flat JSON Schema object (defaults, enums, multi-select)."""
        return ClientRequest(
            "elicitation/create", {"mode": "form", "message": message, "requestedSchema": dict(schema)}
        )

    @staticmethod
    def sample_request(messages: Sequence[Any], max_tokens: int, **params: Any) -> ClientRequest:
        """A completion by the client's model; a message may be plain text (a user message)."""
        shaped = [
            {"role": "user", "content": {"type": "text", "text": m}} if isinstance(m, str) else dict(m)
            for m in messages
        ]
        return ClientRequest("sampling/createMessage", {"messages": shaped, "maxTokens": max_tokens, **params})

    @staticmethod
    def roots_request() -> ClientRequest:
        return ClientRequest("roots/list")

    async def ask_client(self, requests: Mapping[str, ClientRequest]) -> dict[str, Any]:
        """Several requests in one round: `{key: answer}`, an elicitation's answer an `Elicited`, a
        sampling's the client's `CreateMessageResult`, roots' the list of roots.

        Raises:
            ProtocolError: -32021 when the client did not declare a capability a request needs.
        """
        check_capabilities(self.channel.info, requests.values())
        answers = await self.channel.request(requests)
        return {key: _answer(request, answers.get(key)) for key, request in requests.items()}

    async def _one(self, request: ClientRequest) -> Any:
        self.requests_made += 1
        key = f"toolrt_{self.requests_made}"
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
        escalate = getattr(self.channel, "continue_as_task", None)
        if escalate is None:
            return False
        return bool(await escalate())

    @property
    def lsp(self) -> LanguageServers | None:
        """The language servers configured for this project (`toolrt.lsp`), or None."""
        return self.language_servers() if self.language_servers is not None else None

    @property
    def session(self) -> str:
        return self.scope.session

    @property
    def abort(self) -> anyio.Event:
        """Set when the call is aborted: long-running handlers watch it and stop."""
        if self.abort_event is None:
            self.abort_event = anyio.Event()
        return self.abort_event

    def metadata(self, *, title: str | None = None, metadata: Mapping[str, Any] | None = None) -> None:
        """Publish live progress (a title, partial output) to listeners of the call."""
        if title is not None:
            self.title = title
        if metadata:
            self.live_metadata.update(metadata)
        if self.on_metadata is not None:
            self.on_metadata(title, metadata)

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
        await self.asker([request])

    async def ask_requests(self, requests: Sequence[PermissionRequest]) -> None:
        """Ask several requests as one decision (any deny denies, all allow runs)."""
        await self.asker(requests)

    def switch_agent(self, agent: str) -> None:
        """Make `agent` the session's agent: later calls whose host names no agent run under its rules
        and are offered its tools; listeners get an `agent` event (`plan_enter`, `plan_exit`).

        Raises:
            ToolFailure: no such agent, or this context has no session to hold it.
        """
        if self.on_agent is None:
            raise ToolFailure("This call cannot switch agents: it runs outside a session.")
        self.on_agent(agent)

    def sandbox_plan(self) -> SandboxPlan | None:
        """What to enforce on a process this call starts (None: no sandbox; raises ToolFailure when
        the locked file requires one this machine lacks)."""
        if self.sandbox is None:
            return None
        output_dir = tool_output_dir(self.data_dir, self.root)
        journal = journal_for(self.data_dir)
        return call_plan(
            self.sandbox, root=self.root, output_dir=output_dir, granted=self.granted, reads=self.reads, journal=journal
        )

    def resolve(self, path: str) -> Path:
        """A path argument made absolute against the project root (no symlinks resolved)."""
        candidate = Path(os.path.expanduser(path))  # an unknown user's `~name` stays as written, never raises
        if not candidate.is_absolute():
            candidate = self.root / candidate
        return Path(os.path.normpath(candidate))
