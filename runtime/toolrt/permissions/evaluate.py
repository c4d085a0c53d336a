"""Deciding a call: every pattern of every request, the last matching rule, the locked layer apart.

Order of a verdict for one (permission, pattern):
1. the last matching rule of the agent's ruleset followed by the session's approvals (approvals
   last, so they win); no match means ask;
2. the request's `floor` raises an allow (or an ask, for a deny floor) to the floor; an `opaque`
   request (an analyzer could not see what it runs) gets the ruleset's fallback instead, at least
   ask, and deny when a rule denies its pattern or a command it names;
3. the locked layer, evaluated on its own: its deny beats everything, its ask is a floor that
   neither rules nor approvals lift.
The call: any deny denies it, all allow runs it, otherwise one ask covers the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .model import (
    Action,
    Decision,
    PatternDecision,
    PermissionRequest,
    Rule,
    strictest,
    unmatched_action,
    unmatched_basis,
)
from .rules import Ruleset

__all__ = ["approval_required_message", "check", "decide", "denied_message", "disabled", "unapprovable"]

DENIED_OPENING = "The user has specified a rule which prevents you from using this specific tool call."


def _decide_pattern(
    request: PermissionRequest, pattern: str, ruleset: Ruleset, locked: Ruleset, approved: Ruleset | None
) -> PatternDecision:
    permission = request.permission
    rule: Rule | None = ruleset.evaluate(permission, pattern)
    action: Action
    reason: str | None = None
    if request.opaque:
        action, rule, reason = _opaque(request, rule, ruleset, locked)
        return _locked(PatternDecision(permission, pattern, action, rule, reason), locked)
    if approved is not None:
        rule = approved.evaluate(permission, pattern) or rule
    action = rule.action if rule is not None else unmatched_action(permission)
    if request.floor is not None and strictest(action, request.floor) == request.floor:
        action = request.floor
        reason = request.reason
    return _locked(PatternDecision(permission, pattern, action, rule, reason), locked)


def _locked(decision: PatternDecision, locked: Ruleset) -> PatternDecision:
    """The locked layer over a verdict: a locked deny or ask at least as strict as the verdict so far
    becomes the deciding rule, so explanations show that approvals cannot lift it; a locked allow
    never decides."""
    locked_rule = locked.evaluate(decision.permission, decision.pattern) if locked else None
    if locked_rule is None or locked_rule.action == "allow":
        return decision
    if strictest(decision.action, locked_rule.action) != locked_rule.action:
        return decision
    reason = decision.reason if locked_rule.action == decision.action else None
    return PatternDecision(decision.permission, decision.pattern, locked_rule.action, locked_rule, reason)


def _opaque(
    request: PermissionRequest, rule: Rule | None, ruleset: Ruleset, locked: Ruleset
) -> tuple[Action, Rule | None, str | None]:
    """What the analyzer could not see: a deny on the pattern or on a command it names, else the
    ruleset's fallback for the permission, never weaker than ask (nor than the request's floor, which
    is `deny` where the commands it may run could not all be named: denied when any rule could deny)."""
    reason = request.reason
    if rule is not None and rule.action == "deny":
        return "deny", rule, reason
    for named in request.named:
        for rules in (ruleset, locked):
            denial = rules.evaluate(request.permission, named) if rules else None
            if denial is not None and denial.action == "deny":
                said = f"it names `{named}`, which a rule denies"
                return "deny", denial, f"{reason}; {said}" if reason else said
    fallback = ruleset.fallback(request.permission)
    floor = request.floor or "ask"
    if floor == "deny" and not (ruleset.can_deny(request.permission) or locked.can_deny(request.permission)):
        floor = "ask"  # text not checked against every rule is denied only where a rule could deny it
    action: Action = strictest("ask", fallback.action if fallback is not None else "ask", floor)
    return action, fallback if fallback is not None and fallback.action == action else None, reason


def _overall(decisions: Sequence[PatternDecision]) -> Action:
    actions = {decision.action for decision in decisions}
    if "deny" in actions:
        return "deny"
    return "ask" if "ask" in actions else "allow"


def decide(
    requests: Sequence[PermissionRequest],
    ruleset: Ruleset,
    *,
    locked: Ruleset,
    approved: Ruleset | None = None,
) -> Decision:
    """Evaluate every pattern of every request first, then combine: any deny, else any ask, else allow.

    A request without patterns asks nothing (OpenCode's bash tool with only `cd`).
    """
    decisions = tuple(
        _decide_pattern(request, pattern, ruleset, locked, approved)
        for request in requests
        for pattern in request.patterns
    )
    return Decision(_overall(decisions), decisions)


def check(permission: str, pattern: str, ruleset: Ruleset, *, locked: Ruleset) -> Decision:
    """The verdict for one (permission, pattern) pair, as `toolrt check PERMISSION PATTERN` shows it."""
    return decide([PermissionRequest(permission, (pattern,))], ruleset, locked=locked)


def disabled(tool_permissions: Mapping[str, str], ruleset: Ruleset) -> frozenset[str]:
    """Tool ids to hide: the last rule matching the tool's permission (pattern ignored) is `*` + deny.

    `tool_permissions` maps tool id → permission key (edit/write/apply_patch → `edit`). A tool with
    `bash: {"*": deny, "echo *": allow}` stays visible, since some calls can still run.
    """
    hidden: set[str] = set()
    for tool, permission in tool_permissions.items():
        rule = ruleset.last_rule_for_permission(permission)
        if rule is not None and rule.pattern == "*" and rule.action == "deny":
            hidden.add(tool)
    return frozenset(hidden)


def _basis(decision: PatternDecision) -> str:
    rule = decision.rule
    if rule is None:
        if decision.action == unmatched_action(decision.permission):
            return unmatched_basis(decision.permission)
        return f"raised to {decision.action}"
    if rule.action == decision.action:
        return f"by rule {rule.describe()}"
    return f"rule {rule.describe()}, raised to {decision.action}"


def _verdict_lines(decisions: Sequence[PatternDecision]) -> list[str]:
    lines: list[str] = []
    for decision in decisions:
        line = f"- {decision.permission} `{decision.pattern}`: {decision.action}, {_basis(decision)}"
        if decision.reason:
            line += f"; {decision.reason}"
        lines.append(line)
    return list(dict.fromkeys(lines))


def denied_message(decision: Decision) -> str:
    """The model-facing text of a denied call: OpenCode's sentence, then the deciding rules, readable."""
    denied = [d for d in decision.decisions if d.action == "deny"]
    return "\n".join(
        [
            DENIED_OPENING,
            "Denied:",
            *_verdict_lines(denied),
            "Do not retry this call as it is; do the task another way, or ask the user to change the rule.",
        ]
    )


def unapprovable(asked: str) -> str:
    """The opening of every refusal of a call that needs approval (`asked` names what) when no one can give it."""
    return f"This call needs approval ({asked}) but no one is available to approve it, so it was not run."


def approval_required_message(decision: Decision) -> str:
    """The model-facing text of an ask that nobody can answer (headless runs)."""
    asking = [d for d in decision.decisions if d.action == "ask"]
    summary = ", ".join(dict.fromkeys(f"{d.permission} `{d.pattern}`" for d in asking[:3]))
    if len(asking) > 3:
        summary += f" and {len(asking) - 3} more"
    return "\n".join(
        [
            unapprovable(summary),
            *_verdict_lines(asking),
            "Use a call the rules allow instead, or ask the user to run it or to allow it in permissions.yaml.",
        ]
    )
