"""Tools a client cannot use: those whose every call asks (or is denied) when the client cannot be asked.

An MCP client that declared no elicitation has nobody toolrt can ask, so a call that asks is denied ("no one
is available to approve"). A tool whose calls under the scope's rules can only ask or be denied is of no use
to it; `toolrt serve` leaves such tools out of `tools/list` (unless `--offer-unaskable`), and `toolrt list
--client-capabilities` shows the same choice. Only the listing changes: a call to such a tool is still
dispatched and decided by its rules.

A tool counts as usable when some call of it could be allowed: its argument-independent requests are all
allowed, or (when its requests depend on the arguments) some rule for its permission can allow, no later
catch-all covering it, and the locked rules put no ask or deny over every pattern.
"""

from __future__ import annotations

from ..permissions.config import PermissionConfig
from .compiled import CompiledTool
from .selection import Hidden, ToolSet
from .snapshot import Snapshot
from .verdicts import ToolVerdicts

__all__ = ["only_asks", "without_unaskable"]


def only_asks(tool: CompiledTool, permissions: PermissionConfig, agent: str | None) -> bool:
    """Whether every call of `tool` asks or is denied under `agent`'s rules (no call can be allowed)."""
    from ..permissions.evaluate import decide
    from ..permissions.model import unmatched_action

    ruleset, locked = permissions.ruleset(agent), permissions.locked
    if tool.static_requests is not None:
        return decide(list(tool.static_requests), ruleset, locked=locked).action != "allow"
    key = tool.permission_key
    floor = locked.fallback(key) if locked else None
    if floor is not None and floor.action != "allow":
        return True
    if ruleset.can_allow(key):
        return False
    return not (unmatched_action(key) == "allow" and ruleset.fallback(key) is None)


def without_unaskable(
    toolset: ToolSet, snapshot: Snapshot, agent: str | None, verdicts: ToolVerdicts | None = None
) -> ToolSet:
    """`toolset` without the tools whose calls can only ask or be denied, each hidden with its reason;
    `verdicts` (of `only_asks`) keeps the answers for the tools a reload left unchanged."""
    permissions = snapshot.permissions
    name = agent or permissions.default_agent
    asks = (verdicts or ToolVerdicts(only_asks)).answers(snapshot, toolset, agent)
    kept = []
    hidden = list(toolset.hidden)
    for offered, asking in zip(toolset.offered, asks, strict=True):
        if asking:
            reason = (
                f"every call asks or is denied under the rules of agent {name}, and the client cannot be asked "
                "(it declared no elicitation); `toolrt serve --offer-unaskable` offers it anyway"
            )
            hidden.append(Hidden(offered.tool.id, reason))
        else:
            kept.append(offered)
    if len(kept) == len(toolset.offered):
        return toolset
    return ToolSet(offered=tuple(kept), hidden=tuple(sorted(hidden, key=lambda h: h.id)))
