"""The MCP client as a call's `ClientChannel`, on both kinds of protocol version.

- Handshake-era (2025-11-25 and earlier): requests are server-to-client requests on the call's
  stream (`elicitation/create`, `sampling/createMessage`, `roots/list`), sent together and awaited.
- 2026-07-28: a server cannot send requests; a call that needs answers stops at its first request
  not yet answered (`InputRequired`) and its result becomes an input-required result (SEP-2322)
  carrying every request of that round and a `requestState`. The client answers and sends the call
  again with its `inputResponses` and the state; the call runs again from the start (replay), and each
  request made before returns its answer from the state. The state is sealed by the SDK's
  `RequestStateBoundary` (AES-256-GCM under a versioned key ring: bound to the tool, the digest of the
  exact arguments, the authenticated principal where there is one, and short-lived); inside it toolrt
  binds the toolrt session and a nonce, consumed when a retry carrying it is accepted (`NonceLedger`),
  so a replayed, foreign, tampered or expired state is a JSON-RPC error, never a run.

The key survives a restart: it is kept in the data directory (`mcp-request-state.key`, created 0600 on
first use) unless the host gives keys in `TOOLRT_SERVE_STATE_KEYS` (comma-separated, the first seals,
every one unseals: rotation). A server restarted between two round trips resumes the call.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, ValidationError

from ..call.client import ClientInfo, ClientRequest, check_capabilities
from ..errors import InputRequired
from ..store.model import Store

__all__ = [
    "StoreNonces",
    "NONCE_FILE",
    "STATE_KEY_ENV",
    "STATE_TTL_SECONDS",
    "ClientNote",
    "McpChannel",
    "NonceLedger",
    "ReplayState",
    "RequestContext",
    "client_info",
    "state_security",
    "valid_answer",
    "wire_request",
]

STATE_TTL_SECONDS = 600.0
"""How long an input-required result's `requestState` is accepted (a person may take a while to answer)."""
STATE_KEY_ENV = "TOOLRT_SERVE_STATE_KEYS"
_KEY_FILE = "mcp-request-state.key"
NONCE_FILE = "mcp-request-state.nonces"
_STATE_VERSION = 2

RequestContext = ServerRequestContext[Any, Any]
"""The MCP SDK's context of one request, as every serve module's handlers receive it."""
ClientNote = tuple[str, Any]
"""A notification a channel queued for the call's forwarder: ("log", (level, data, logger)) or
("progress", (progress, total, message))."""

_MODELS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}
"""Each request's wire model and the model its answer must satisfy."""


def state_security(data_dir: Path, store: Store | None = None) -> RequestStateSecurity:
    """The sealing policy: the host's keys (`TOOLRT_SERVE_STATE_KEYS`), else the persistent state store's
    key (one for every replica), else the data directory's key."""
    given = [key.strip() for key in os.environ.get(STATE_KEY_ENV, "").split(",") if key.strip()]
    if not given and store is not None and store.persistent:
        given = [store.signing_key(1, lambda: secrets.token_hex(32))]
    return RequestStateSecurity(keys=given or [_stored_key(data_dir)], ttl=STATE_TTL_SECONDS)


def _stored_key(data_dir: Path) -> str:
    """The data directory's key, made (32 random bytes, hex, owner-only) on first use."""
    path = data_dir / _KEY_FILE
    try:
        key = path.read_text(encoding="ascii").strip()
        if len(key) >= 64:
            return key
    except FileNotFoundError:
        pass
    data_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_hex(32)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as stream:
        stream.write(key)
    try:
        os.link(temporary, path)  # another process may have made one meanwhile: theirs wins
    except FileExistsError:
        key = path.read_text(encoding="ascii").strip()
    finally:
        temporary.unlink()
    return key


class NonceLedger:
    """The nonces of accepted retries, until their state would have expired anyway.

    With a `path` (the data directory's `mcp-request-state.nonces`) each consumed nonce is also appended
    there, under an exclusive lock of `<path>.lock`, after reading what other processes appended since:
    every `toolrt serve` of a project shares its data directory's state key, so a state one server
    accepted is refused by every other (running now, or started later). The file is rewritten without
    the expired entries each time it doubles.
    """

    def __init__(self, path: Path | None = None, ttl: float = STATE_TTL_SECONDS) -> None:
        self._ttl = ttl
        self._path = path
        self._used: dict[str, float] = {}
        """Nonce → wall-clock time after which its state is expired anyway."""
        self._read_to: tuple[int, int] = (-1, 0)
        """(inode, offset) of the ledger file read so far."""
        self._compact_at = _MIN_COMPACT
        if path is not None:
            self._catch_up(time.time())

    def consume(self, nonce: str) -> bool:
        """Mark `nonce` used; False when it already was (a replayed state, here or in another process)."""
        if self._path is None:
            return self._take(nonce, time.time()) is not None
        self._path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(self._path.with_name(self._path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            now = time.time()
            self._catch_up(now)
            until = self._take(nonce, now)
            if until is None:
                return False
            if len(self._used) > self._compact_at:
                self._used = {n: t for n, t in self._used.items() if t > now}
                self._rewrite()
                self._compact_at = max(_MIN_COMPACT, 2 * len(self._used))
            else:
                line = f"{nonce} {until:.0f}\n".encode("ascii")
                with self._path.open("ab") as ledger:
                    ledger.write(line)
                    inode = os.fstat(ledger.fileno()).st_ino
                if inode == self._read_to[0]:
                    self._read_to = (inode, self._read_to[1] + len(line))
            return True
        finally:
            os.close(lock)  # releases the lock

    def _take(self, nonce: str, now: float) -> float | None:
        if nonce in self._used and self._used[nonce] > now:
            return None
        until = self._used[nonce] = now + self._ttl + 60  # the boundary accepts a minute of clock skew
        return until

    def _catch_up(self, now: float) -> None:
        """Read what was appended to the ledger file since last read (all of it, when it was rewritten)."""
        assert self._path is not None
        try:
            with self._path.open("rb") as ledger:
                inode = os.fstat(ledger.fileno()).st_ino
                known, offset = self._read_to
                if inode != known:
                    offset = 0
                ledger.seek(offset)
                data = ledger.read()
        except FileNotFoundError:
            return
        complete = data.rfind(b"\n") + 1
        self._used.update(_read_nonces(data[:complete].decode("ascii", errors="replace"), now))
        self._read_to = (inode, offset + complete)

    def _rewrite(self) -> None:
        assert self._path is not None
        temporary = self._path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text("".join(f"{n} {t:.0f}\n" for n, t in self._used.items()), encoding="ascii")
        temporary.replace(self._path)
        self._read_to = (os.stat(self._path).st_ino, os.stat(self._path).st_size)


class StoreNonces(NonceLedger):
    """The ledger kept in a persistent state store: a nonce one replica accepted no replica accepts again."""

    def __init__(self, store: Store, ttl: float = STATE_TTL_SECONDS) -> None:
        super().__init__(None, ttl)
        self._store = store

    def consume(self, nonce: str) -> bool:
        now = time.time()
        return self._store.consume_nonce(nonce, now + self._ttl + 60, now)  # a minute of clock skew, as above


_MIN_COMPACT = 1024
"""Nonces kept before the first compaction of the ledger."""


def _read_nonces(text: str, now: float) -> dict[str, float]:
    used: dict[str, float] = {}
    for line in text.splitlines():
        nonce, _, until = line.partition(" ")
        try:
            if float(until) > now:
                used[nonce] = float(until)
        except ValueError:
            continue
    return used


class ReplayState:
    """What a 2026-07-28 call carries between rounds inside its sealed `requestState`."""

    def __init__(self, session: str, answers: dict[str, Any] | None = None) -> None:
        self.session = session
        self.answers: dict[str, Any] = answers or {}
        """Every answer gathered so far, by request key: `{"d": the digest of the request it answers,
        "r": the answer}` (`answer_to` gives it only to that same request)."""
        self.needed: dict[str, ClientRequest] = {}
        """The round the call stopped at: the requests still unanswered."""

    @classmethod
    def resume(cls, plaintext: str, session: str, responses: Mapping[str, Any], ledger: NonceLedger) -> ReplayState:
        """The state of a retry: the earlier answers and the valid responses to the pending requests.

        Raises:
            MCPError: the state is not toolrt's, belongs to another session, or was used before.
        """
        try:
            inner = json.loads(plaintext)
            version, owner, nonce = inner["v"], inner["s"], inner["n"]
            answers, pending = dict(inner["a"]), dict(inner["p"])
        except (ValueError, KeyError, TypeError):
            raise MCPError(types.INVALID_PARAMS, "Invalid or expired requestState") from None
        if version != _STATE_VERSION or owner != session:
            raise MCPError(
                types.INVALID_PARAMS,
                "This requestState belongs to another session; call the tool again without it.",
                {"reason": "invalid_request_state"},
            )
        if not isinstance(nonce, str) or not ledger.consume(nonce):
            raise MCPError(
                types.INVALID_PARAMS,
                "This requestState was already used; call the tool again without it.",
                {"reason": "invalid_request_state"},
            )
        for key, asked in pending.items():
            method, digest = asked if isinstance(asked, list) and len(asked) == 2 else (None, None)
            answer = valid_answer(method, responses.get(key))
            if answer is not None:
                answers[key] = {"d": digest, "r": answer}
        return cls(session, answers)

    def answer_to(self, key: str, request: ClientRequest) -> Mapping[str, Any] | None:
        """The answer carried for `key` when it was given to exactly `request`; None otherwise (the call,
        run again, asks something else under that key now: the files it looks at changed meanwhile)."""
        carried = self.answers.get(key)
        if not isinstance(carried, dict) or carried.get("d") != request_digest(request):
            return None
        answer = carried.get("r")
        return answer if isinstance(answer, Mapping) else None

    @staticmethod
    def owner(plaintext: Any) -> str | None:
        """The session a (verified) state names, to hold it again after a restart; None when unreadable."""
        try:
            owner = json.loads(plaintext)["s"]
        except (ValueError, KeyError, TypeError):
            return None
        return owner if isinstance(owner, str) else None

    def seal_plaintext(self) -> str:
        """The state of the next round (sealed by the SDK's boundary on the way out)."""
        pending = {key: [request.method, request_digest(request)] for key, request in self.needed.items()}
        inner = {
            "v": _STATE_VERSION,
            "s": self.session,
            "n": secrets.token_urlsafe(12),
            "a": self.answers,
            "p": pending,
        }
        return json.dumps(inner, separators=(",", ":"))

    def input_required(self, meta: Mapping[str, Any] | None = None) -> types.InputRequiredResult:
        """The input-required result of the round the call stopped at (`meta`: the result's `_meta`)."""
        requests: dict[str, Any] = {
            key: _MODELS[request.method][0].model_validate({"method": request.method, "params": dict(request.params)})
            for key, request in self.needed.items()
        }
        return types.InputRequiredResult(
            input_requests=requests, request_state=self.seal_plaintext(), _meta=dict(meta) if meta else None
        )


def request_digest(request: ClientRequest) -> str:
    """What binds an answer to the request it answers: the SHA-256 of the request's canonical JSON."""
    canonical = json.dumps(
        [request.method, dict(request.params)], sort_keys=True, separators=(",", ":"), default=_plain_json
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _plain_json(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else str(value)


def wire_request(request: ClientRequest) -> dict[str, Any]:
    """A request to the client in its wire form (`{"method", "params"}`), as an input request carries it."""
    model = _MODELS[request.method][0].model_validate({"method": request.method, "params": dict(request.params)})
    wire: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire


def valid_answer(method: Any, raw: Any) -> Any:
    """A client's response as plain JSON when it satisfies the request's result model, else None."""
    models = _MODELS.get(method) if isinstance(method, str) else None
    if models is None or not isinstance(raw, Mapping):
        return None
    try:
        return models[1].model_validate(raw).model_dump(by_alias=True, mode="json", exclude_none=True)
    except ValidationError:
        return None


def client_info(ctx: RequestContext) -> ClientInfo:
    """`ctx.client` for an MCP request: the capabilities, name and version the client declared."""
    session = ctx.session
    capabilities = session.client_capabilities
    declared = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True) if capabilities else {}
    params = session.client_params
    implementation = params.client_info if params is not None else None
    return ClientInfo(
        declared,
        implementation.name if implementation is not None else None,
        implementation.version if implementation is not None else None,
        ctx.protocol_version,
    )


class TaskHook(Protocol):
    """A call that may become an MCP task (`serve_tasks.TaskStart`): once `running`, its requests and
    progress go through the task."""

    @property
    def running(self) -> bool: ...

    async def continue_as_task(self) -> bool: ...

    async def request(self, requests: Mapping[str, ClientRequest]) -> dict[str, Any]: ...

    def progress(self, progress: float, total: float | None, message: str | None) -> None: ...


class McpChannel:
    """A call's client: server requests on handshake-era versions, replay on 2026-07-28 (`replay`), and
    the task's input requests once the call runs as a task (`task`)."""

    def __init__(
        self,
        ctx: RequestContext,
        post: Callable[[ClientNote], None] | None,
        replay: ReplayState | None,
        log_allowed: Callable[[str], bool],
        tool: str,
    ) -> None:
        self._ctx = ctx
        self._post = post
        """Queues a notification for the call's forwarder (from any thread); None: the call has none."""
        self.replay = replay
        self._log_allowed = log_allowed
        self._tool = tool
        self._info: ClientInfo | None = None
        self.task: TaskHook | None = None
        """How the call becomes a task; None when this client cannot hold one."""

    async def continue_as_task(self) -> bool:
        """`ctx.continue_as_task()`: the rest of the call runs as a task when the client can hold one."""
        return self.task is not None and await self.task.continue_as_task()

    @property
    def info(self) -> ClientInfo:
        """What the client declared, read from the request when a handler first asks."""
        if self._info is None:
            self._info = client_info(self._ctx)
        return self._info

    async def request(self, requests: Mapping[str, ClientRequest]) -> dict[str, Mapping[str, Any]]:
        check_capabilities(self.info, requests.values())
        if self.task is not None and self.task.running:
            delivered: dict[str, Mapping[str, Any]] = await self.task.request(requests)
            return delivered
        if self.replay is not None:
            found = {key: self.replay.answer_to(key, request) for key, request in requests.items()}
            missing = {key: request for key, request in requests.items() if found[key] is None}
            if missing:
                self.replay.needed = missing
                raise InputRequired("The call waits for the client's answers.")
            return {key: answer for key, answer in found.items() if answer is not None}
        results: dict[str, Mapping[str, Any]] = {}

        async def send(key: str, request: ClientRequest) -> None:
            request_model, result_model = _MODELS[request.method]
            typed = request_model.model_validate({"method": request.method, "params": dict(request.params) or None})
            metadata = ServerMessageMetadata(related_request_id=self._ctx.request_id)
            result = await self._ctx.session.send_request(typed, result_model, metadata=metadata)  # type: ignore[arg-type]
            results[key] = result.model_dump(by_alias=True, mode="json", exclude_none=True)

        async with anyio.create_task_group() as group:
            for key, request in requests.items():
                group.start_soon(send, key, request)
        return results

    def log(self, level: str, message: str, data: Any = None) -> None:
        if level not in _LEVELS or not self._log_allowed(level) or self._post is None:
            return
        payload = message if data is None else {"message": message, "data": data}
        self._post(("log", (level, payload, self._tool)))

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.task is not None and self.task.running:
            self.task.progress(progress, total, message)
        elif self._post is not None:
            self._post(("progress", (progress, total, message)))


_LEVELS = frozenset(("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"))
