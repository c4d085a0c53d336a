"""The record step: one audit line per call (who, what, which rules decided, how it ended)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
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
    UnknownToolError,
)
from ..permissions.model import Decision
from ..result import ToolResult
from ..scope import CallScope

__all__ = ["CallRecord", "Recorder", "status_of"]


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


_MILLISECONDS = tuple(f".{ms:03d}Z" for ms in range(1000))
"""The end of a timestamp for each millisecond (`.000Z` to `.999Z`)."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))
_encode_string = json.encoder.encode_basestring  # the C string escaper


def _c_encoder() -> Callable[[Any, int], Sequence[str]] | None:
    """The C encoder with `_ENCODER`'s options, built once: `JSONEncoder.encode` builds one per call (its
    largest cost). No cycle check: a cyclic value hits the recursion limit and takes the slow path."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator (another Python implementation)
        return None
    try:
        encoder: Callable[[Any, int], Sequence[str]] = make(
            None, str, _encode_string, None, ":", ",", False, False, True
        )
        if "".join(encoder({"a": [1.5, None, "é"]}, 0)) != '{"a":[1.5,null,"é"]}':
            return None
    except Exception:  # a Python whose private encoder takes other arguments
        return None
    return encoder


_C_ENCODE = _c_encoder()


def _json(value: Any) -> str:
    """`value` as compact JSON (non-ASCII kept, anything else as its `str`)."""
    if _C_ENCODE is not None:
        try:
            return "".join(_C_ENCODE(value, 0))
        except (RecursionError, ValueError):  # a cyclic value: the slow path says so as it always did
            pass
    return _ENCODER.encode(value)


def _string(value: str | None) -> str:
    return "null" if value is None else str(_encode_string(value))


class Recorder:
    """The record step of one Runtime: its audit log, and the encoded `requests` of decisions that
    calls reuse (cached allows), so a repeated call does not encode them again."""

    MEMO_LIMIT = 1024

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit
        self._requests: dict[int, tuple[Decision, str]] = {}
        self._who: dict[tuple[str, str, str | None, str], str] = {}
        self._second = -1
        self._second_text = ""

    def record(self, entry: CallRecord) -> None:
        """Append the call's record: time, session, agent, model, tool, call_id, arguments, requests (each
        permission and pattern with its action and deciding rule), duration_ms, status, output_bytes, error.

        The line is assembled from pre-encoded parts (who called which tool, the decision, the time up
        to the second), which costs a fraction of encoding the whole mapping on every call;
        `read_records` sees plain JSON.
        """
        if self.audit.path is None:
            return
        scope, result = entry.scope, entry.result
        line = (
            f'{{"time":"{self._timestamp()}",{self._who_json(scope.session, entry.agent, scope.model, entry.tool)},'
            f'"call_id":{_string(entry.call_id)},"arguments":{_json(entry.args)},'
            f'"requests":{self._requests_json(entry.decision)},"duration_ms":{entry.duration * 1000:.3f},'
            f'"status":"{entry.status}","output_bytes":{len(result.output)},"error":{_string(result.error)}}}\n'
        )
        self.audit.append_line(line)

    def _timestamp(self) -> str:
        """ISO 8601 UTC with milliseconds; the part up to the second is formatted once per second."""
        now = time.time()
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
