"""The record step: one audit line per call (who, what, which rules decided, how it ended)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..audit import AuditLog
from ..errors import (
    CallError,
    CorrectedError,
    DeniedError,
    InputRequired,
    InvalidArgumentsError,
    PermissionBlocked,
    RejectedError,
    ToolrtError,
    UnknownToolError,
)
from ..permissions.model import Decision
from ..result import ToolResult
from ..scope import CallScope
from ..store.model import AuditRow, Store, session_id

__all__ = ["CallRecord", "Recorder", "SessionSave", "status_of"]


def status_of(error: CallError) -> str:
    if isinstance(error, InputRequired):
        return "input_required"
    if isinstance(error, (RejectedError, CorrectedError)):
        return "rejected"
    if isinstance(error, (DeniedError, PermissionBlocked)):
        return "denied"
    if isinstance(error, (InvalidArgumentsError, UnknownToolError)):
        return "invalid"
    return "error"


SessionSave = tuple[str, Mapping[str, Any], float]
"""A session's state to write with a call's record: (store key, state, now)."""


class CallRecord(NamedTuple):
    """One call's audit entry (a tuple: one is built per call)."""

    scope: CallScope
    agent: str
    tool: str
    """The name the model called (the repair target's name after a repair)."""
    call_id: str
    args: Any
    decision: Decision | None
    status: str
    """ok | error | denied | rejected | invalid"""
    result: ToolResult
    duration: float
    """Seconds."""


logger = logging.getLogger("toolrt.audit")

PRUNE_EVERY_SECONDS = 3600.0
"""How often a recorder with a persistent store applies the retention settings."""

_MILLISECONDS = tuple(f".{ms:03d}Z" for ms in range(1000))
"""The end of a timestamp for each millisecond (`.000Z` to `.999Z`)."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))
_encode_string = json.encoder.encode_basestring  # the string escaper the standard encoder uses


_SCALARS: dict[object, str] = {None: "null", True: "true", False: "false"}


def _json(value: Any) -> str:
    """`value` as compact JSON (non-ASCII kept, anything else as its `str`), exactly as `_ENCODER` writes it.

    Arguments are most often a flat object of strings, integers, booleans and nulls; that shape is joined
    here from the standard encoder's own escaped strings and `int`'s text, which costs a fraction of the
    encoder's setup per call. Every other value (floats, nesting, a key that is not text) goes to the
    encoder."""
    if type(value) is dict and len(value) <= 8:
        parts = []
        for key, item in value.items():
            if type(key) is not str:
                return _ENCODER.encode(value)
            kind = type(item)
            if kind is str:
                parts.append(f"{_encode_string(key)}:{_encode_string(item)}")
            elif kind is int:
                parts.append(f"{_encode_string(key)}:{int.__repr__(item)}")
            elif item is None or kind is bool:
                parts.append(f"{_encode_string(key)}:{_SCALARS[item]}")
            else:
                return _ENCODER.encode(value)
        return "{" + ",".join(parts) + "}"
    return _ENCODER.encode(value)


def _arguments_json(args: Any) -> str:
    """The arguments as JSON; what cannot be (a cyclic value, a key that is not text) as a string saying so,
    so that the call is still recorded."""
    try:
        return _json(args)
    except (ValueError, TypeError, RecursionError) as error:
        return _string(f"<arguments not recordable as JSON: {type(error).__name__}: {error}>")


def _storable(text: str) -> str:
    """`text` as a database takes it: lone surrogates (undecodable bytes in arguments) as JSON escapes."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(json.loads(text), ensure_ascii=True, separators=(",", ":"))
    return text


def _string(value: str | None) -> str:
    return "null" if value is None else str(_encode_string(value))


class Recorder:
    """The record step of one Runtime: its audit log, its persistent store if one is configured, and the
    encoded `requests` of decisions that calls reuse (cached allows), so a repeated call does not encode
    them again.

    With a persistent `store`, each record is written there before the call's result returns, naming
    the session by `session_id` (never its token); a write that fails raises `StoreError` and the call
    fails closed. Without one (the `memory` store), only the JSON-lines file records, and recording
    never fails a call."""

    MEMO_LIMIT = 1024

    def __init__(
        self,
        audit: AuditLog,
        store: Store | None = None,
        *,
        audit_days: float | None = None,
        session_days: float | None = None,
    ) -> None:
        self.audit = audit
        self.store = store if store is not None and store.persistent else None
        self.retention = (audit_days, session_days)
        self._next_prune = time.time() + PRUNE_EVERY_SECONDS
        self._session_ids: dict[str, str] = {}
        self._requests: dict[int, tuple[Decision, str]] = {}
        self._who: dict[tuple[str, str, str | None, str], str] = {}
        self._second = -1
        self._second_text = ""

    def record(self, entry: CallRecord, saving: SessionSave | None = None) -> None:
        """Append the call's record: time, session (`session_id` of its name: never a token), agent, model,
        tool, call_id, arguments, requests (each permission and pattern with its action and deciding rule),
        duration_ms, status, output_bytes, error, and the connections toolrt's network proxy refused the
        call's process (`network_refused`), if any.

        The line is assembled from pre-encoded parts (who called which tool, the decision, the time up
        to the second), which costs a fraction of encoding the whole mapping on every call;
        `read_records` sees plain JSON.
        """
        store = self.store
        if self.audit.path is None and store is None:
            return
        scope, result = entry.scope, entry.result
        now = time.time()
        stamp = self._timestamp(now)
        rest = (
            f'"call_id":{_string(entry.call_id)},"arguments":{_arguments_json(entry.args)},'
            f'"requests":{self._requests_json(entry.decision)},"duration_ms":{entry.duration * 1000:.3f},'
            f'"status":"{entry.status}","output_bytes":{len(result.output)},"error":{_string(result.error)}'
        )
        refused = result.metadata.get("network_refused")
        rest += f',"network_refused":{_json(refused)}}}' if refused else "}"
        if scope.principal is not None:  # who called over authenticated HTTP
            rest = f'"principal":{_string(scope.principal)},{rest}'
        session = self._session_id(scope.session)  # a 2026-07-28 token is a credential: no record holds it
        who = self._who_json(session, entry.agent, scope.model, entry.tool)
        if self.audit.path is not None:
            self.audit.append_line(f'{{"time":"{stamp}",{who},{rest}\n')
        if store is not None:
            text = _storable(f'{{"time":"{stamp}",{who},{rest}')
            decision = entry.decision.action if entry.decision is not None else None
            row = AuditRow(now, session, entry.tool, entry.status, decision, text)
            if saving is None:
                store.append_audit(row)
            else:  # the session's state goes with it (one round trip where the engine can)
                store.append_audit_saving_session(row, *saving)
            if now >= self._next_prune:
                self._prune(store, now)

    def _session_id(self, token: str) -> str:
        found = self._session_ids.get(token)
        if found is None:
            if len(self._session_ids) >= self.MEMO_LIMIT:
                self._session_ids.clear()
            found = self._session_ids[token] = session_id(token)
        return found

    def _prune(self, store: Store, now: float) -> None:
        """Apply the retention settings (a failure is logged: the record itself was written)."""
        self._next_prune = now + PRUNE_EVERY_SECONDS
        audit_days, session_days = self.retention
        try:
            store.prune(now, audit_days=audit_days, session_days=session_days)
        except ToolrtError as error:
            logger.warning("Cannot apply the store's retention settings: %s", error)

    def _timestamp(self, now: float) -> str:
        """ISO 8601 UTC with milliseconds; the part up to the second is formatted once per second."""
        second = int(now)
        if second != self._second:
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return self._second_text + _MILLISECONDS[int((now - second) * 1000) % 1000]

    def _who_json(self, session: str, agent: str, model: str | None, tool: str) -> str:
        """The session, agent, model and tool members, encoded once per combination."""
        key = (session, agent, model, tool)
        found = self._who.get(key)
        if found is None:
            found = (
                f'"session":{_string(session)},"agent":{_string(agent)},"model":{_string(model)},"tool":{_string(tool)}'
            )
            if len(self._who) >= self.MEMO_LIMIT:
                self._who.clear()
            self._who[key] = found
        return found

    def _requests_json(self, decision: Decision | None) -> str:
        if decision is None:
            return "[]"
        memo = self._requests
        hit = memo.get(id(decision))
        if hit is not None and hit[0] is decision:
            return hit[1]
        entries = [
            {
                "permission": d.permission,
                "pattern": d.pattern,
                "action": d.action,
                "rule": d.rule.describe() if d.rule is not None else None,
            }
            for d in decision.decisions
        ]
        encoded = _json(entries)
        if len(memo) >= self.MEMO_LIMIT:
            memo.clear()
        memo[id(decision)] = (decision, encoded)
        return encoded
