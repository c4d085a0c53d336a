"""How much one `toolrt serve` process holds and hands out at once (`--page-size`, `--session-idle`,
`--max-sessions`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..call.sessions import DEFAULT_IDLE_SECONDS, DEFAULT_MAX_SESSIONS
from ..errors import UsageError

DEFAULT_PAGE_SIZE = 10_000
"""`tools/list` pages only above this many tools: several clients never follow `nextCursor`."""


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """How much one `toolrt serve` process holds and hands out at once."""

    page_size: int = DEFAULT_PAGE_SIZE
    """Tools per `tools/list` page; a listing this long or shorter is one page without a cursor."""
    session_idle: float | None = DEFAULT_IDLE_SECONDS
    """Seconds after which an unused session (MCP session or token) is released; None: never."""
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """Sessions held at once; past it the most idle one is released (over HTTP its MCP session too, whose
    requests then answer 404)."""

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise UsageError(f"--page-size must be at least 1, not {self.page_size}")
        if self.session_idle is not None and not self.session_idle > 0:
            raise UsageError(f"--session-idle must be a positive number of seconds, not {self.session_idle:g}")
        if self.max_sessions < 1:
            raise UsageError(f"--max-sessions must be at least 1, not {self.max_sessions}")
