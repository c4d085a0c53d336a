"""Which offered tools run without asking: what `toolrt serve` and `toolrt call` tell the person first.

A tool runs without asking when its permission's catch-all (the pattern `*`) is allowed for the agent,
the locked rules included. The built-in rules allow everything (OpenCode's default), so a project
without rules of its own offers `bash`, `edit`, `write` and `webfetch` unasked; a desktop client shows
no stderr, so `toolrt serve` also says it in the server's instructions and a log message.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..permissions.evaluate import check
from .selection import ToolSet
from .snapshot import Snapshot

__all__ = ["runs_without_asking", "unasked_notice"]


def runs_without_asking(snapshot: Snapshot, toolset: ToolSet, agent: str | None) -> tuple[str, ...]:
    """Names of the offered tools whose permission is `allow` for any argument the rules do not single out."""
    permissions = snapshot.permissions
    ruleset = permissions.ruleset(agent)
    names = []
    for offered in toolset.offered:
        decision = check(offered.tool.permission_key, "*", ruleset, locked=permissions.locked)
        if decision.action == "allow":
            names.append(offered.name)
    return tuple(names)


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
