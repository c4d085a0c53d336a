"""The record step: one audit line per call (who, what, which rules decided, how it ended)."""

from __future__ import annotations

import functools
import json
import time
from typing import Any, NamedTuple

from ..audit import AuditLog
from ..errors import (
    CallError,
    CorrectedError,
    DeniedError,
    InvalidArgumentsError,
    PermissionBlocked,
    RejectedError,
    UnknownToolError,
)
from ..permissions.model import Decision
from ..result import ToolResult
from .request import CallScope

__all__ = ["CallRecord", "Recorder", "status_of"]


def status_of(error: CallError) -> str:
    if isinstance(error, (RejectedError, CorrectedError)):
        return "rejected"
    if isinstance(error, (DeniedError, PermissionBlocked)):
        return "denied"
    if isinstance(error, (InvalidArgumentsError, UnknownToolError)):
        return "invalid"
    return "error"


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


@functools.lru_cache(maxsize=2)
def _second_text(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def _utc_timestamp() -> str:
    """ISO 8601 UTC with milliseconds; the part up to the second is formatted once per second."""
    now = time.time()
    second = int(now)
    return f"{_second_text(second)}.{int((now - second) * 1000):03d}Z"


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))
_json = _ENCODER.encode  # one encoder for every record: `json.dumps(**options)` builds a new one per call
_encode_string = json.encoder.encode_basestring  # the C string escaper


def _string(value: str | None) -> str:
    return "null" if value is None else str(_encode_string(value))


class Recorder:
    """The record step of one Runtime: its audit log, and the encoded `requests` of decisions that
    calls reuse (cached allows), so a repeated call does not encode them again."""

    MEMO_LIMIT = 1024

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit
        self._requests: dict[int, tuple[Decision, str]] = {}

    def record(self, entry: CallRecord) -> None:
        """Append the call's record: time, session, agent, model, tool, call_id, arguments, requests (each
        permission and pattern with its action and deciding rule), duration_ms, status, output_bytes, error.

        The line is assembled from pre-encoded parts, which costs a fraction of encoding the whole
        mapping on every call; `read_records` sees plain JSON.
        """
        if self.audit.path is None:
            return
        scope, result = entry.scope, entry.result
        line = (
            f'{{"time":"{_utc_timestamp()}","session":{_string(scope.session)},"agent":{_string(entry.agent)},'
            f'"model":{_string(scope.model)},"tool":{_string(entry.tool)},"call_id":{_string(entry.call_id)},'
            f'"arguments":{_json(entry.args)},"requests":{self._requests_json(entry.decision)},'
            f'"duration_ms":{round(entry.duration * 1000, 3)},"status":"{entry.status}",'
            f'"output_bytes":{len(result.output)},"error":{_string(result.error)}}}\n'
        )
        self.audit.append_line(line)

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
