"""The locked file's denial of whole tools: by id (`tools: {deny}`) or by handler kind (`handlers: {deny}`).

A denied tool is neither offered (`selection.select` hides it) nor run (the call's requests carry a
`tool` deny). A tool that `overrides:` a denied id is denied with it: it would be offered under that
name.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..config.model import ArgvHandler, HostHandler, PythonHandler, ShellHandler
from ..permissions.model import PermissionRequest
from ..permissions.wildcard import match
from .compiled import CompiledTool
from .snapshot import Snapshot

__all__ = ["handler_kind", "locked_denial"]

_KINDS: Mapping[type, str] = {PythonHandler: "python", ArgvHandler: "argv", ShellHandler: "shell", HostHandler: "host"}


def handler_kind(tool: CompiledTool) -> str:
    """`python`, `argv`, `shell` or `host`: the names `handlers: {deny: [...]}` uses."""
    return _KINDS[type(tool.definition.handler)]


def locked_denial(tool: CompiledTool, snapshot: Snapshot) -> PermissionRequest | None:
    """A deny for a tool the locked file names (`tools: {deny}`, by its id or the id it overrides) or
    whose handler kind it denies."""
    permissions = snapshot.permissions
    if not permissions.denied_tools and not permissions.denied_handlers:
        return None
    kind = handler_kind(tool)
    names = (tool.id,) if tool.definition.overrides is None else (tool.id, tool.definition.overrides)
    named = next((n for n in names if any(match(n, pattern) for pattern in permissions.denied_tools)), None)
    if kind in permissions.denied_handlers:
        reason = f"the locked file denies every {kind} tool (handlers: deny)"
    elif named is not None:
        reason = f"the locked file denies the tool {named} (tools: deny)"
    else:
        return None
    return PermissionRequest("tool", (tool.id,), (), floor="deny", reason=reason)
