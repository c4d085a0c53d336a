"""What listeners (`Runtime.subscribe`, the MCP server's progress) see of a call in flight."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CallEvent", "Listener"]


@dataclass(frozen=True, slots=True)
class CallEvent:
    """`running` (data: input), `metadata` (title, metadata), then `completed` or `error` (data: the result,
    and the call's `start` and `end` as Unix times). `agent` (data: `agent`, `previous`): the call made
    `agent` the session-held agent (`plan_enter`, `plan_exit`), which later calls use when the host
    names none."""

    kind: str
    call_id: str
    tool: str
    session: str
    data: Mapping[str, Any]
    time: float


Listener = Callable[[CallEvent], None]
