"""The Runtime's 0.2 names of what moved in 0.3, kept for one release: each warns (`DeprecationWarning`, naming
its replacement) and does what the replacement does.

```
rt.session_state(s)             rt.sessions.state(s)
rt.restore_session(s, state)    rt.sessions.restore(s, state)
rt.approvals(s, agent)          rt.sessions.approvals(s, agent)
rt.restore_approvals(s, pairs)  rt.sessions.restore_approvals(s, pairs)
rt.knows_session(s)             rt.sessions.knows(s)
rt.begin_session(s)             rt.sessions.begin(s)
rt.on_swap(listener)            rt.subscribe(listener, to="swaps")
```
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from ..build.changes import SnapshotChange
    from .sessions import Sessions

__all__ = ["DeprecatedNames", "deprecated"]


def deprecated(old: str, new: str) -> None:
    """Warn that `old` is deprecated in favour of `new` (the warning points at the caller's line)."""
    warnings.warn(f"{old} is deprecated: use {new} (the old name goes in the next release)", DeprecationWarning, 3)


class _Host(Protocol):
    @property
    def sessions(self) -> Sessions: ...

    def subscribe(self, listener: Callable[[SnapshotChange], None], *, to: Literal["swaps"]) -> Callable[[], None]: ...


class DeprecatedNames:
    """The Runtime's deprecated names (a base class of `Runtime`)."""

    __slots__ = ()

    def session_state(self: _Host, session: str) -> dict[str, Any]:
        """Deprecated: `rt.sessions.state(session)`."""
        deprecated("Runtime.session_state", "rt.sessions.state")
        return self.sessions.state(session)

    def restore_session(self: _Host, session: str, state: Mapping[str, Any]) -> None:
        """Deprecated: `rt.sessions.restore(session, state)`."""
        deprecated("Runtime.restore_session", "rt.sessions.restore")
        self.sessions.restore(session, state)

    def approvals(self: _Host, session: str, agent: str | None = None) -> list[tuple[str, str]]:
        """Deprecated: `rt.sessions.approvals(session, agent)`."""
        deprecated("Runtime.approvals", "rt.sessions.approvals")
        return self.sessions.approvals(session, agent)

    def restore_approvals(
        self: _Host, session: str, approvals: Iterable[tuple[str, str]], *, agent: str | None = None
    ) -> None:
        """Deprecated: `rt.sessions.restore_approvals(session, approvals, agent=agent)`."""
        deprecated("Runtime.restore_approvals", "rt.sessions.restore_approvals")
        self.sessions.restore_approvals(session, approvals, agent=agent)

    def knows_session(self: _Host, name: str) -> bool:
        """Deprecated: `rt.sessions.knows(name)`."""
        deprecated("Runtime.knows_session", "rt.sessions.knows")
        return self.sessions.knows(name)

    def begin_session(self: _Host, name: str) -> None:
        """Deprecated: `rt.sessions.begin(name)`."""
        deprecated("Runtime.begin_session", "rt.sessions.begin")
        self.sessions.begin(name)

    def on_swap(self: _Host, listener: Callable[[SnapshotChange], None]) -> Callable[[], None]:
        """Deprecated: `rt.subscribe(listener, to="swaps")`."""
        deprecated("Runtime.on_swap", 'rt.subscribe(listener, to="swaps")')
        return self.subscribe(listener, to="swaps")
