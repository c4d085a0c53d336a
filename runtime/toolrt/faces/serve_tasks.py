"""Long-running tools as MCP tasks: the tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`).

A client that declares the extension in a request's capabilities (MCP 2026-07-28) may get a task handle
instead of a result: `tools/call` answers `{"resultType": "task", "taskId", "status", "createdAt",
"lastUpdatedAt", "ttlMs", "pollIntervalMs"}` and the call goes on in the server. The client polls
`tasks/get` (the status; `inputRequests` while the call waits for answers; the call's `result` once
completed, or the protocol `error` it failed with), answers with `tasks/update` (`inputResponses`, all at
once or some at a time) and stops it with `tasks/cancel`.

Which calls become tasks: every call of a tool whose YAML says `task: true` (or `task: required`, which
refuses a client without the extension with -32021) or that the host names in `serve.task_tools`; and a
call whose handler says `await ctx.continue_as_task()` (the built-in `bash` with `background: true`),
from that point on. Only for clients that declared the extension; any other client gets the result when
the call ends, as before.

A task is its call: permissions, the tool's timeout, truncation and the audit log apply as to any call.
An ask, `ctx.elicit`, `ctx.sample` or `ctx.roots` inside it sets the task to `input_required` with the
requests, and the call resumes (not replayed: it is still running) when `tasks/update` brings valid
answers. `tasks/cancel` cancels the call (its process tree is killed, its record says cancelled), as do
the release of the toolrt session that owns it (an MCP session's end, the idle timeout, eviction) and the
server's shutdown. A task is visible only to requests of the session that created it: another session's,
an unknown or a made-up task id is -32602.

The records are kept behind `TaskStore` (`MemoryTaskStore` today, with the sessions); the running calls
stay in this process.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal, Protocol

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..call.client import MISSING_CAPABILITY, ClientRequest
from ..call.sessions import SessionStore
from ..result import ToolResult
from .serve_client import RequestContext, valid_answer, wire_request

__all__ = [
    "EXTENSION",
    "MemoryTaskStore",
    "McpTasks",
    "TaskRecord",
    "TaskStart",
    "TaskStore",
    "check_task_name_header",
    "register",
]

EXTENSION = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 500
"""The `pollIntervalMs` suggested to clients."""
KEPT_AFTER_TIMEOUT_S = 3600
"""A task's record is kept this long past its tool's timeout (`ttlMs` counts from creation)."""
MAX_RUNNING = 256
"""Tasks running at once; past it a call is not made a task (it runs until its result, as before)."""
MAX_RECORDS = 4096
"""Task records kept at once; past it the oldest finished ones are dropped."""

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset(("completed", "failed", "cancelled"))
METHODS = ("tasks/get", "tasks/update", "tasks/cancel")

Owns = Callable[[RequestContext, str], bool]
"""Whether a request reaches what a toolrt session holds (`serve_sessions.McpSessions.owns`)."""
Finish = Callable[[ToolResult], "dict[str, Any] | MCPError"]
"""A call's result as the wire result of `tools/call`, or the protocol error it ended with."""


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """What is known of one task: everything `tasks/get` answers, and who may ask."""

    task_id: str
    session: str
    """The toolrt session that created it: the only one that sees it."""
    tool: str
    created_at: float
    updated_at: float
    ttl_ms: int
    status: Status = "working"
    status_message: str | None = None
    input_requests: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Requests waiting for the client's answers, by key (wire form: `{"method", "params"}`)."""
    result: Mapping[str, Any] | None = None
    """The `tools/call` result (wire form) of a completed task."""
    error: Mapping[str, Any] | None = None
    """The JSON-RPC error (`code`, `message`, `data`) of a failed task."""

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def expired(self, now: float) -> bool:
        return now > self.created_at + self.ttl_ms / 1000

    def wire(self, *, detailed: bool) -> dict[str, Any]:
        """The task on the wire: a `CreateTaskResult`'s fields, or with `detailed` `tasks/get`'s."""
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": _iso(self.created_at),
            "lastUpdatedAt": _iso(self.updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if self.status_message is not None:
            task["statusMessage"] = self.status_message
        if detailed:
            if self.status == "input_required" and self.input_requests:
                task["inputRequests"] = {key: dict(request) for key, request in self.input_requests.items()}
            if self.status == "completed" and self.result is not None:
                task["result"] = dict(self.result)
            if self.status == "failed" and self.error is not None:
                task["error"] = dict(self.error)
        return task


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskStore(Protocol):
    """Where task records are kept: with the sessions (in this process today, a shared store later)."""

    def put(self, record: TaskRecord) -> None:
        """Keep `record` (a new task, or a newer state of one)."""
        ...

    def get(self, task_id: str) -> TaskRecord | None:
        """The record of `task_id`; None when unknown or expired."""
        ...

    def of_session(self, session: str) -> list[str]:
        """The ids of the tasks `session` created that are still kept."""
        ...

    def remove(self, task_id: str) -> None: ...


class MemoryTaskStore:
    """Task records in this process's memory, bounded: expired records go first, then the oldest finished
    of the session holding the most."""

    def __init__(self, max_records: int = MAX_RECORDS, clock: Callable[[], float] = time.time) -> None:
        self._records: dict[str, TaskRecord] = {}
        self._max = max_records
        self._clock = clock

    def put(self, record: TaskRecord) -> None:
        new = record.task_id not in self._records
        self._records[record.task_id] = record
        if new and len(self._records) > self._max:
            self._trim()

    def get(self, task_id: str) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is not None and record.expired(self._clock()):
            del self._records[task_id]
            return None
        return record

    def of_session(self, session: str) -> list[str]:
        return [task_id for task_id, record in self._records.items() if record.session == session]

    def remove(self, task_id: str) -> None:
        self._records.pop(task_id, None)

    def _trim(self) -> None:
        """Past the bound: the expired records, then the oldest finished record of the session that holds
        the most, one at a time, so a client creating task after task drops its own records, never the
        result another session is still to poll."""
        now = self._clock()
        for task_id in [t for t, r in self._records.items() if r.expired(now)]:
            del self._records[task_id]
        finished: dict[str, list[str]] = {}
        held: Counter[str] = Counter()
        for task_id, record in self._records.items():  # in the order created
            held[record.session] += 1
            if record.finished:
                finished.setdefault(record.session, []).append(task_id)
        while len(self._records) > self._max and finished:
            session = max(finished, key=lambda name: held[name])
            del self._records[finished[session].pop(0)]
            held[session] -= 1
            if not finished[session]:
                del finished[session]


class _Waiting:
    """A running task's requests to the client and the answers `tasks/update` brought."""

    def __init__(self) -> None:
        self.pending: dict[str, str] = {}
        """Key → method of each request not answered yet."""
        self.answers: dict[str, Any] = {}
        self.wake = anyio.Event()


class McpTasks:
    """The tasks of one `toolrt serve`: their records (`store`), their running calls, the `tasks/*` handlers."""

    def __init__(self, store: TaskStore, sessions: SessionStore[Any], owns: Owns) -> None:
        self._store = store
        self._owns = owns
        self._running: dict[str, asyncio.Task[None]] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running_in: Counter[str] = Counter()
        """Running tasks by session: a session with one is evicted for a new session only last."""
        sessions.on_release(self._session_released)
        sessions.on_busy(lambda session: self._running_in[session] > 0)

    # --- who gets tasks ---------------------------------------------------------------------------

    @staticmethod
    def supported(ctx: RequestContext) -> bool:
        """Whether this request's client declared the tasks extension (MCP 2026-07-28 only)."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return False
        capabilities = ctx.session.client_capabilities
        return capabilities is not None and EXTENSION in (capabilities.extensions or {})

    def start(
        self,
        ctx: RequestContext,
        session: str,
        tool: str,
        timeout: float,
        mode: Literal["never", "optional", "required"],
    ) -> TaskStart | None:
        """How a call of `tool` may become a task; None when this client cannot hold one.

        Raises:
            MCPError: -32021 for a `task: required` tool and a client without the extension.
        """
        if not self.supported(ctx):
            if mode == "required":
                raise MCPError(
                    MISSING_CAPABILITY,
                    f"The {tool} tool runs only as a task: declare the {EXTENSION} extension to call it.",
                    {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
                )
            return None
        return TaskStart(self, session, tool, timeout, at_once=mode != "never")

    # --- the records ------------------------------------------------------------------------------

    def _create(self, session: str, tool: str, timeout: float) -> TaskRecord | None:
        if len(self._running) >= MAX_RUNNING:
            return None
        self._loop = asyncio.get_running_loop()
        now = time.time()
        ttl_ms = int(math.ceil(timeout + KEPT_AFTER_TIMEOUT_S)) * 1000
        record = TaskRecord(secrets.token_urlsafe(18), session, tool, now, now, ttl_ms)
        self._store.put(record)
        self._waiting[record.task_id] = _Waiting()
        return record

    def _change(self, task_id: str, **changes: Any) -> TaskRecord | None:
        """Store a newer state of a task that has not finished (a finished one stays as it ended)."""
        record = self._store.get(task_id)
        if record is None or record.finished:
            return None
        record = replace(record, updated_at=time.time(), **changes)
        self._store.put(record)
        return record

    def _launch(self, task_id: str, session: str, call: Awaitable[ToolResult], finish: Finish) -> None:
        """Let the call go on as the task's, and record how it ends."""
        runner = asyncio.ensure_future(self._ended(task_id, call, finish))
        self._running[task_id] = runner
        self._running_in[session] += 1

        def ended(_: object) -> None:
            self._running.pop(task_id, None)
            self._running_in[session] -= 1
            if self._running_in[session] <= 0:
                del self._running_in[session]

        runner.add_done_callback(ended)

    async def _ended(self, task_id: str, call: Awaitable[ToolResult], finish: Finish) -> None:
        """Await the call and record how it ended."""
        try:
            result = await call
        except asyncio.CancelledError:
            self._change(task_id, status="cancelled", input_requests={}, status_message="The task was cancelled.")
            raise
        except Exception as error:  # a failure of toolrt itself: the protocol-level end of the task
            self._change(task_id, status="failed", input_requests={}, error=_error(types.INTERNAL_ERROR, str(error)))
            return
        finally:
            self._waiting.pop(task_id, None)
        wire = finish(result)
        if isinstance(wire, MCPError):
            self._change(task_id, status="failed", input_requests={}, error=_error(wire.code, wire.message, wire.data))
        else:
            self._change(task_id, status="completed", input_requests={}, result=wire)

    def _cancel(self, task_id: str) -> None:
        """Stop a task's call (its process tree is killed) and record it as cancelled."""
        self._change(task_id, status="cancelled", input_requests={}, status_message="The task was cancelled.")
        runner = self._running.get(task_id)
        if runner is not None and not runner.done():
            runner.cancel()

    def _session_released(self, session: str) -> None:
        """A toolrt session ended: its tasks stop and are forgotten (any thread)."""
        task_ids = self._store.of_session(session)
        if not task_ids:
            return

        def release() -> None:
            for task_id in task_ids:
                self._cancel(task_id)
                self._store.remove(task_id)

        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or loop.is_closed():
            release()
        else:
            loop.call_soon_threadsafe(release)

    def close(self) -> None:
        """The server stops: every running task is cancelled."""
        for task_id in list(self._running):
            self._cancel(task_id)

    # --- a running task's requests to the client ---------------------------------------------------

    async def _request(self, task_id: str, requests: Mapping[str, ClientRequest]) -> dict[str, Any]:
        waiting = self._waiting.setdefault(task_id, _Waiting())
        for key, request in requests.items():
            waiting.pending[key] = request.method
        shown = dict(self._shown_requests(task_id))
        shown.update({key: wire_request(request) for key, request in requests.items()})
        self._change(task_id, status="input_required", input_requests=shown)
        while any(key not in waiting.answers for key in requests):
            await waiting.wake.wait()
        return {key: waiting.answers.pop(key) for key in requests}

    def _shown_requests(self, task_id: str) -> Mapping[str, Mapping[str, Any]]:
        record = self._store.get(task_id)
        return record.input_requests if record is not None else {}

    def _progress(self, task_id: str, progress: float, total: float | None, message: str | None) -> None:
        text = message or (f"{progress:g} of {total:g}" if total is not None else f"{progress:g}")
        record = self._store.get(task_id)
        if record is not None and record.status == "working":
            self._change(task_id, status_message=text)

    # --- tasks/get, tasks/update, tasks/cancel ---------------------------------------------------

    def _owned(self, ctx: RequestContext, task_id: str) -> TaskRecord:
        """The task `task_id` of this request's session.

        Raises:
            MCPError: -32021 without the extension; -32602 for a task this session does not have.
        """
        if not self.supported(ctx):
            raise MCPError(
                MISSING_CAPABILITY,
                f"tasks/* needs the {EXTENSION} extension in the request's client capabilities.",
                {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )
        record = self._store.get(task_id)
        if record is None or not self._owns(ctx, record.session):
            raise MCPError(types.INVALID_PARAMS, f"Unknown task: {task_id[:80]!r}")
        return record

    async def get(self, ctx: RequestContext, params: TaskParams) -> dict[str, Any]:
        record = self._owned(ctx, params.task_id)
        if not record.finished and record.task_id not in self._running:
            # Its call is not running in this process (a server restart; a shared store later).
            record = self._change(
                record.task_id,
                status="failed",
                input_requests={},
                error=_error(types.INTERNAL_ERROR, "The server that ran this task stopped before it finished."),
            ) or self._owned(ctx, params.task_id)
        return record.wire(detailed=True)

    async def update(self, ctx: RequestContext, params: UpdateTaskParams) -> dict[str, Any]:
        """Answers to a waiting task's requests: valid ones for requests still pending resume it; answers
        to other keys are ignored; an answer of the wrong shape is -32602 and nothing is taken."""
        record = self._owned(ctx, params.task_id)
        waiting = self._waiting.get(record.task_id)
        if record.finished or waiting is None:
            return {}
        taken: dict[str, Any] = {}
        for key, raw in params.input_responses.items():
            method = waiting.pending.get(key)
            if method is None:
                continue
            answer = valid_answer(method, raw)
            if answer is None:
                raise MCPError(types.INVALID_PARAMS, f"The answer to {key!r} is not a valid {method} result.")
            taken[key] = answer
        if not taken:
            return {}
        for key, answer in taken.items():
            del waiting.pending[key]
            waiting.answers[key] = answer
        remaining = {key: request for key, request in record.input_requests.items() if key in waiting.pending}
        self._change(record.task_id, status="input_required" if remaining else "working", input_requests=remaining)
        waiting.wake.set()
        waiting.wake = anyio.Event()
        return {}

    async def cancel(self, ctx: RequestContext, params: TaskParams) -> dict[str, Any]:
        record = self._owned(ctx, params.task_id)
        if not record.finished:
            self._cancel(record.task_id)
        return {}


def _error(code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


class TaskParams(types.RequestParams):
    """`tasks/get` and `tasks/cancel` params."""

    task_id: str


class UpdateTaskParams(TaskParams):
    """`tasks/update` params: answers by the keys of the task's `inputRequests`."""

    input_responses: dict[str, Any]


class TaskStart:
    """One call that may become a task: at once (a task tool), or when its handler asks (`continue_as_task`)."""

    def __init__(self, tasks: McpTasks, session: str, tool: str, timeout: float, *, at_once: bool) -> None:
        self._tasks = tasks
        self._session = session
        self._tool = tool
        self._timeout = timeout
        self.at_once = at_once
        self.record: TaskRecord | None = None
        """The task, once the call became one."""
        self._became = anyio.Event()

    async def continue_as_task(self) -> bool:
        """Make the call a task (the handler's `ctx.continue_as_task()`); False when no more can run."""
        if self.record is None:
            self.record = self._tasks._create(self._session, self._tool, self._timeout)
            if self.record is None:
                return False
            self._became.set()
        return True

    async def run(self, call: Awaitable[ToolResult], finish: Finish) -> ToolResult | TaskRecord:
        """The call's result when it ends as a plain call; its task when it became one (it goes on)."""
        if self.at_once and not await self.continue_as_task():
            return await call  # no room for another task: a plain call
        if self.record is None:  # a plain call until its handler says otherwise
            runner = asyncio.ensure_future(call)
            became = asyncio.ensure_future(self._became.wait())
            try:
                await asyncio.wait({runner, became}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                runner.cancel()
                raise
            finally:
                became.cancel()
            if self.record is None or runner.done():
                return await runner
            call = runner
        self._tasks._launch(self.record.task_id, self._session, call, finish)
        return self.record

    # --- the channel of a call that became a task ----------------------------------------------------

    @property
    def running(self) -> bool:
        return self.record is not None

    async def request(self, requests: Mapping[str, ClientRequest]) -> dict[str, Any]:
        assert self.record is not None
        return await self._tasks._request(self.record.task_id, requests)

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.record is not None:
            self._tasks._progress(self.record.task_id, progress, total, message)


async def check_task_name_header(ctx: RequestContext, call_next: CallNext) -> HandlerResult:
    """Server middleware: over HTTP, `tasks/get`, `tasks/update` and `tasks/cancel` carry `Mcp-Name` equal to
    their `taskId` (SEP-2663's routing header; the SDK checks it for `tools/call` only): else -32020."""
    if ctx.method in METHODS and ctx.request is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        params: Mapping[str, Any] = ctx.params or {}
        headers = getattr(ctx.request, "headers", None)
        raw = headers.get(MCP_NAME_HEADER) if headers is not None else None
        named = decode_header_value(raw.strip()) if isinstance(raw, str) else None
        if named is None or named != params.get("taskId"):
            raise MCPError(types.HEADER_MISMATCH, "The Mcp-Name header must equal params.taskId")
    return await call_next(ctx)


def register(server: Server[Any], tasks: McpTasks) -> None:
    """Serve the extension on `server`: advertise it, answer `tasks/get`, `tasks/update`, `tasks/cancel`
    (`tasks/result` and `tasks/list`, gone from this version of tasks, stay -32601), check their `Mcp-Name`."""
    server.extensions[EXTENSION] = {}
    server.add_request_handler("tasks/get", TaskParams, tasks.get)
    server.add_request_handler("tasks/update", UpdateTaskParams, tasks.update)
    server.add_request_handler("tasks/cancel", TaskParams, tasks.cancel)
    server.middleware.append(check_task_name_header)
