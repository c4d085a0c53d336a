"""`rt.sessions`: the sessions a Runtime holds, and what of them a host keeps between processes.

```python
state = rt.sessions.state("chat-42")            # the tools' memory (read times, todos): JSON-able
pairs = rt.sessions.approvals("chat-42")        # the "always" approvals of the default agent
# ... in the next process:
rt.sessions.restore("chat-42", state)
rt.sessions.restore_approvals("chat-42", pairs)
```
A session is created on its first call and released by `release`, by staying idle past the limit
(`limit`), or by being the most idle one when more than the limit are held (see `call.sessions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..call.sessions import SessionStore
    from ..call.state import Services

__all__ = ["Sessions"]


class Sessions:
    """The sessions of one Runtime: which are held, their limits, and their state to keep and restore."""

    def __init__(self, services: Services, default_agent: Callable[[], str]) -> None:
        self._services = services
        self._default_agent = default_agent
        """The current snapshot's default agent: whose approvals `approvals` gives when no agent is named."""

    @property
    def held(self) -> SessionStore[Any]:
        """The session states held in this process (the MCP server watches their release and eviction)."""
        return self._services.sessions

    def __contains__(self, name: object) -> bool:
        """Whether session `name` is held in this process now (idle sessions expire first)."""
        return name in self._services.sessions

    def __len__(self) -> int:
        return len(self._services.sessions)

    def limit(self, *, idle_seconds: float | None, max_sessions: int) -> None:
        """Set how long an unused session lives (None: until released; default 30 minutes) and how many are
        held at once (default 4096: past it the most idle one is released).

        Raises:
            UsageError: a limit that is not positive.
        """
        self._services.sessions.limit(idle_seconds=idle_seconds, max_sessions=max_sessions)

    def release(self, name: str) -> None:
        """End session `name`: its approvals, memory and background processes go; unknown names are ignored."""
        self._services.sessions.release(name)

    def knows(self, name: str) -> bool:
        """Whether session `name` is held here or, with a persistent store, kept there (another process or
        an earlier run of this server issued it): `toolrt serve` honours such a 2026-07-28 token."""
        services = self._services
        return name in services.sessions or (services.keeper is not None and services.keeper.known(name))

    def begin(self, name: str) -> None:
        """Hold a new session `name` (a token just issued; with a persistent store, it is not looked up
        there: nothing can be kept of a name nobody had)."""
        services = self._services
        services.sessions.get(name)
        if services.keeper is not None:
            services.keeper.fresh(name)

    def state(self, name: str) -> dict[str, Any]:
        """The tools' memory of session `name` (read times, todos), to keep between processes.

        Keep it JSON-serialisable; `restore` puts it back (`toolrt call --session` does both).
        """
        return dict(self._services.session(name).tools)

    def restore(self, name: str, state: Mapping[str, Any]) -> None:
        """Put back what `state` returned in an earlier process."""
        self._services.session(name).tools.update(state)

    def approvals(self, name: str, agent: str | None = None) -> list[tuple[str, str]]:
        """The (permission, pattern) pairs the person approved "always" for `agent` (default: the default
        agent) in session `name`, to keep between processes (`toolrt call --session` keeps them per
        session and agent); `restore_approvals` puts them back."""
        return self._services.broker.approvals(name, agent or self._default_agent())

    def restore_approvals(self, name: str, approvals: Iterable[tuple[str, str]], *, agent: str | None = None) -> None:
        """Put back what `approvals` returned in an earlier process."""
        self._services.broker.restore(name, agent or self._default_agent(), approvals)
