"""The language servers of one Runtime: started on the first call that needs them, reached through one
`LspAccess` per snapshot's settings, and closed with the Runtime (a call after that starts none)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..build.snapshot import Snapshot
    from .access import LspAccess
    from .manager import LspManager, ServerStatus

__all__ = ["LanguageServers"]

_ACCESSES_KEPT = 16
"""Snapshots whose access is kept (a reload makes a new snapshot; the old ones' accesses go)."""


class LanguageServers:
    """The Runtime's servers (one manager, made on first use) and each snapshot's access to them."""

    def __init__(self) -> None:
        self._manager: LspManager | None = None
        self._accesses: dict[str, LspAccess | None] = {}
        self._closed = False

    def for_snapshot(self, snapshot: Snapshot) -> LspAccess | None:
        """The servers as `snapshot`'s settings declare them; None when none is configured or after `close`."""
        if snapshot.digest in self._accesses:
            return self._accesses[snapshot.digest]
        from .access import LspAccess, lsp_config
        from .manager import LspManager

        config = lsp_config(snapshot)
        access = None
        if config.servers and not self._closed:
            if self._manager is None:
                self._manager = LspManager()
            access = LspAccess(self._manager, config)
        if len(self._accesses) > _ACCESSES_KEPT:
            self._accesses.clear()
        self._accesses[snapshot.digest] = access
        return access

    def status(self) -> list[ServerStatus]:
        """The servers started so far (name, root, state, pid, restarts, last error)."""
        return [] if self._manager is None else self._manager.status()

    def close(self) -> None:
        """Stop every server; later calls get no access and start none. Idempotent."""
        self._closed = True
        self._accesses.clear()
        if self._manager is not None:
            self._manager.close()
