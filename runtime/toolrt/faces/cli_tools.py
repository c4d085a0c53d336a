"""`toolrt list`, `specs` and `check`: the tools a selection offers, their specs, what the rules decide."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from .cli_runtime import load_runtime, selected_scope

if TYPE_CHECKING:
    from ..api import Runtime
    from ..permissions.model import Decision

__all__ = ["cmd_check", "cmd_list", "cmd_specs"]


def cmd_list(options: argparse.Namespace, out: TextIO) -> int:
    rt = load_runtime(options)
    scope = selected_scope(options)
    toolset = rt.tools(scope)
    if options.client_capabilities is not None and not options.offer_unaskable:
        if not _declares_elicitation(options.client_capabilities):
            from ..build.unaskable import without_unaskable

            toolset = without_unaskable(toolset, rt.snapshot, scope.agent)
    if options.json:
        json.dump(
            {
                "tools": [
                    {"name": o.name, "id": o.tool.id, "source": o.tool.definition.source} for o in toolset.offered
                ],
                "hidden": [{"id": h.id, "reason": h.reason} for h in toolset.hidden],
            },
            out,
            indent=2,
        )
        out.write("\n")
        return 0
    width = max((len(o.name) for o in toolset.offered), default=4)
    for offered in toolset.offered:
        first = offered.tool.description.strip().splitlines()[0] if offered.tool.description.strip() else ""
        alias = f" (as override {offered.tool.id})" if offered.name != offered.tool.id else ""
        out.write(f"{offered.name:<{width}}  {first[:90]}{alias}\n")
    if toolset.hidden:
        out.write("\nhidden:\n")
        for hidden in toolset.hidden:
            out.write(f"  {hidden.id}: {hidden.reason}\n")
    return 0


def _declares_elicitation(text: str) -> bool:
    """Whether `--client-capabilities` (an MCP `ClientCapabilities` object as JSON) declares elicitation."""
    from ..errors import UsageError

    try:
        capabilities = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(
            f"--client-capabilities: not JSON ({error.msg}); e.g. '{{}}' or '{{\"elicitation\": {{}}}}'"
        ) from None
    if not isinstance(capabilities, dict):
        raise UsageError("--client-capabilities: expected a JSON object, e.g. '{}' or '{\"elicitation\": {}}'")
    return capabilities.get("elicitation") is not None


def cmd_specs(options: argparse.Namespace, out: TextIO) -> int:
    rt = load_runtime(options)
    json.dump(rt.specs(options.format, selected_scope(options)), out, indent=2, ensure_ascii=False)
    out.write("\n")
    return 0


def _decision_json(decision: Decision) -> dict[str, Any]:
    return {
        "action": decision.action,
        "requests": [
            {
                "permission": d.permission,
                "pattern": d.pattern,
                "action": d.action,
                "rule": None
                if d.rule is None
                else {
                    "permission": d.rule.permission,
                    "pattern": d.rule.pattern,
                    "action": d.rule.action,
                    "source": d.rule.source,
                },
                **({"reason": d.reason} if d.reason else {}),
            }
            for d in decision.decisions
        ],
    }


def cmd_check(options: argparse.Namespace, out: TextIO) -> int:
    from ..errors import UsageError
    from ..permissions.model import unmatched_basis
    from .terminal import painter

    paint = painter(options.color, out)
    rt = load_runtime(options, blocked_ok=False)
    if options.tool:
        if options.permission or options.pattern:
            raise UsageError("give either PERMISSION PATTERN or --tool ID --args JSON, not both")
        try:
            args = json.loads(options.args)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--args is not valid JSON: {exc.msg} at position {exc.pos}") from None
        decision, _ = rt.check_call(options.tool, args, selected_scope(options))
        hidden = next((h.reason for h in rt.tools(selected_scope(options)).hidden if h.id == options.tool), None)
    else:
        if not (options.permission and options.pattern):
            raise UsageError("give PERMISSION PATTERN, or --tool ID --args JSON")
        decision = rt.check(options.permission, options.pattern, agent=options.agent)
        hidden = None
    unasked = None if options.tool else _unasked_permission(rt, options.permission)
    if options.json:
        notes = {**({"hidden": hidden} if hidden else {}), **({"note": unasked} if unasked else {})}
        json.dump({**_decision_json(decision), **notes}, out, indent=2)
        out.write("\n")
        return 0
    for d in decision.decisions:
        why = (
            f'rule {d.rule.permission} "{d.rule.pattern}": {d.rule.action} ({d.rule.source})'
            if d.rule
            else unmatched_basis(d.permission)
        )
        extra = f" [{d.reason}]" if d.reason else ""
        out.write(f"{paint(f'{d.action:<5}', d.action)}  {d.permission} {d.pattern!r}  ← {why}{extra}\n")
    if not decision.decisions:
        out.write(f"{paint('allow', 'allow')}  (the call makes no permission request)\n")
    out.write(f"decision: {paint(decision.action, decision.action)}\n")
    if hidden:
        out.write(f"note: {options.tool} is not offered for this selection: {hidden}\n")
    if unasked:
        out.write(f"note: {unasked}\n")
    return 0


def _unasked_permission(rt: Runtime, permission: str) -> str | None:
    """What to say when no tool of the config asks `permission` (a typo such as `bsh`): the verdict
    stands for the rules, but no call will ever meet it."""
    import difflib

    from .project_checks import RUNTIME_PERMISSIONS

    tools = rt.snapshot.tools.values()
    known = sorted({tool.permission_key for tool in tools} | {tool.id for tool in tools} | RUNTIME_PERMISSIONS)
    if permission in known:
        return None
    close = difflib.get_close_matches(permission, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no tool asks the permission {permission!r}{hint} (the rules above decide it, but no call will ask it)"
