"""What a snapshot swap reports: `ReloadStatus` (a Runtime's reload state) and `SnapshotChange` (what one
swap changed, for listeners such as `toolrt watch` and the MCP server)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from .handler_code import changed_files
from .snapshot import Snapshot

__all__ = ["ReloadStatus", "SnapshotChange", "changes_between"]


@dataclass(frozen=True, slots=True)
class ReloadStatus:
    generation: int
    digest: str
    loaded_at: float
    last_error: ConfigError | None = None


@dataclass(frozen=True, slots=True)
class SnapshotChange:
    """What a swap changed, for listeners (`toolrt watch`, the MCP server)."""

    old: Snapshot
    new: Snapshot
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    permissions_changed: bool
    code_changed: tuple[str, ...] = ()
    """Tools whose handler code (their module, or a project module it imports) changed."""
    code_files: tuple[str, ...] = ()
    """The project module files that changed, relative to the root."""
    settings_changed: bool = False
    """`toolrt.yaml`, the environment, the host's settings or the sandbox gave other values."""


def changes_between(old: Snapshot, snapshot: Snapshot) -> SnapshotChange:
    """What swapping `old` for `snapshot` changed."""
    added = tuple(sorted(set(snapshot.tools) - set(old.tools)))
    removed = tuple(sorted(set(old.tools) - set(snapshot.tools)))
    changed = tuple(
        sorted(
            t
            for t in set(snapshot.tools) & set(old.tools)
            if snapshot.tools[t] is not old.tools[t]  # unchanged files keep their compiled tool
            and (
                snapshot.tools[t].definition != old.tools[t].definition
                or snapshot.tools[t].description != old.tools[t].description
            )
        )
    )
    permissions_changed = [layer.rules for layer in snapshot.permissions.layers] != [
        layer.rules for layer in old.permissions.layers
    ]
    files = changed_files(snapshot.handler_files, old.handler_files)
    code_changed = tuple(
        sorted(
            t
            for t, code in snapshot.tool_code.items()
            if t in old.tools and t not in changed and not code.isdisjoint(files)
        )
    )
    settings_changed = (
        snapshot.settings != old.settings
        or snapshot.sandbox != old.sandbox
        or list(snapshot.resolved.items()) != list(old.resolved.items())
    )
    root = snapshot.root
    shown = tuple(sorted(str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in files))
    return SnapshotChange(
        old, snapshot, added, removed, changed, permissions_changed, code_changed, shown, settings_changed
    )
