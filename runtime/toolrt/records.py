"""The record step: one audit line per call (who, what, which rules decided, how it ended)."""

from __future__ import annotations

import json
import time
from typing import Any

from .audit import AuditLog
from .calls import CallRequest
from .errors import (
    CallError,
    CorrectedError,
    DeniedError,
    InvalidArgumentsError,
    PermissionBlocked,
    RejectedError,
    UnknownToolError,
)
from .permissions.model import Decision
from .result import ToolResult

__all__ = ["record_call", "status_of"]


def status_of(error: CallError) -> str:
    if isinstance(error, (RejectedError, CorrectedError)):
        return "rejected"
    if isinstance(error, (DeniedError, PermissionBlocked)):
        return "denied"
    if isinstance(error, (InvalidArgumentsError, UnknownToolError)):
        return "invalid"
    return "error"


_SECOND: list[Any] = [0, ""]


def _utc_timestamp() -> str:
    """ISO 8601 UTC with milliseconds; the part up to the second is formatted once per second."""
    now = time.time()
    second = int(now)
    if second != _SECOND[0]:
        _SECOND[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    return f"{_SECOND[1]}.{int((now - second) * 1000):03d}Z"


_REQUEST_RECORDS: dict[int, tuple[Decision, str]] = {}


def _requests_json(decision: Decision | None) -> str:
    """The `requests` field, encoded; memoised for decisions reused across calls (cached allows)."""
    if decision is None:
        return "[]"
    hit = _REQUEST_RECORDS.get(id(decision))
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
    if len(_REQUEST_RECORDS) > 1024:
        _REQUEST_RECORDS.clear()
    _REQUEST_RECORDS[id(decision)] = (decision, encoded)
    return encoded


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))
_json = _ENCODER.encode  # one encoder for every record: `json.dumps(**options)` builds a new one per call
_encode_string = json.encoder.encode_basestring  # the C string escaper


def _string(value: str | None) -> str:
    return "null" if value is None else str(_encode_string(value))


def record_call(
    audit: AuditLog,
    request: CallRequest,
    call_id: str,
    agent: str,
    tool: str,
    args: Any,
    decision: Decision | None,
    duration: float,
    status: str,
    result: ToolResult,
) -> None:
    """Append the call's record: time, session, agent, model, tool, call_id, arguments, requests (each
    permission and pattern with its action and deciding rule), duration_ms, status, output_bytes, error.

    The line is assembled from pre-encoded parts (the per-decision `requests` is memoised), which costs
    a fraction of encoding the whole mapping on every call; `read_records` sees plain JSON.
    """
    if audit.path is None:
        return
    line = (
        f'{{"time":"{_utc_timestamp()}","session":{_string(request.session)},"agent":{_string(agent)},'
        f'"model":{_string(request.model)},"tool":{_string(tool)},"call_id":{_string(call_id)},'
        f'"arguments":{_json(args)},"requests":{_requests_json(decision)},'
        f'"duration_ms":{round(duration * 1000, 3)},"status":"{status}","output_bytes":{len(result.output)},'
        f'"error":{_string(result.error)}}}\n'
    )
    audit.append_line(line)
