"""Which offered tools run without asking: what `toolrt serve` and `toolrt call` tell the person first.

A tool runs without asking when its permission's catch-all (the pattern `*`) is allowed for the agent,
the locked rules included. The built-in rules allow everything (OpenCode's default), so a project
without rules of its own offers `bash`, `edit`, `write` and `webfetch` unasked; a desktop client shows
no stderr, so `toolrt serve` also says it in the server's instructions and a log message.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..permissions.config import PermissionConfig
from ..permissions.evaluate import check
from .compiled import CompiledTool
from .selection import ToolSet
from .snapshot import Snapshot
from .verdicts import ToolVerdicts

__all__ = ["runs_unasked", "runs_without_asking", "unasked_notice"]


def runs_unasked(tool: CompiledTool, permissions: PermissionConfig, agent: str | None) -> bool:
    """Whether `tool`'s permission is `allow` for any argument `agent`'s rules do not single out."""
    ruleset = permissions.ruleset(agent)
    return check(tool.permission_key, "*", ruleset, locked=permissions.locked).action == "allow"


def runs_without_asking(
    snapshot: Snapshot, toolset: ToolSet, agent: str | None, verdicts: ToolVerdicts | None = None
) -> tuple[str, ...]:
    """Names of the offered tools whose permission is `allow` for any argument the rules do not single out;
    `verdicts` (of `runs_unasked`) keeps the answers for the tools a reload left unchanged."""
    permissions = snapshot.permissions
    permissions.ruleset(agent)  # an unknown agent is a usage error even with nothing offered
    unasked = (verdicts or ToolVerdicts(runs_unasked)).answers(snapshot, toolset, agent)
    return tuple(offered.name for offered, allowed in zip(toolset.offered, unasked, strict=True) if allowed)


def unasked_notice(names: Sequence[str]) -> str | None:
    """One paragraph naming the tools that run without asking, and how to make them ask; None when none do."""
    if not names:
        return None
    risky = [name for name in names if name in ("bash", "edit", "write", "apply_patch", "webfetch")]
    warning = f" (including {', '.join(risky)})" if risky else ""
    return (
        f"toolrt: {len(names)} tool(s) run without asking for permission{warning}: {', '.join(names)}. "
        "To make a tool ask, give it a rule in permissions.yaml, e.g. `bash: ask`, `edit: ask`, `webfetch: ask` "
        "(`toolrt init` writes such a file; see docs/permissions.md)."
    )
