"""The record step: one audit line per call (who, what, which rules decided, how it ended)."""

from __future__ import annotations

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


_REQUEST_RECORDS: dict[int, tuple[Decision, list[dict[str, Any]]]] = {}


def _requests_record(decision: Decision | None) -> list[dict[str, Any]]:
    """The `requests` field of a record; memoised for decisions reused across calls (cached allows)."""
    if decision is None:
        return []
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
    if len(_REQUEST_RECORDS) > 1024:
        _REQUEST_RECORDS.clear()
    _REQUEST_RECORDS[id(decision)] = (decision, entries)
    return entries


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
    if audit.path is None:
        return
    audit.append(
        {
            "time": _utc_timestamp(),
            "session": request.session,
            "agent": agent,
            "model": request.model,
            "tool": tool,
            "call_id": call_id,
            "arguments": args,
            "requests": _requests_record(decision),
            "duration_ms": round(duration * 1000, 3),
            "status": status,
            "output_bytes": len(result.output),
            "error": result.error,
        }
    )
