"""Denies bind every process: the command an `argv:` or `shell:` tool is about to run meets the deny rules.

A tool's own permission key decides whether it runs (allow, ask); what its process does is checked
too. The rendered command (a shell tool's script with every value substituted as a quoted literal,
`ShellCommand.shown`; an argv tool's words joined as quoted shell words) goes through the bash
analyzer, which unwraps `sh -c`, `eval`-like commands and the wrapper table, and its requests are
judged by the rules that bind every process: the locked file, and the bash rules that name a
command (the bare `*` fallback does not bind, so a project allow-list `bash: {"*": deny, …}` leaves
its own tools working). Only their denies count: each becomes a request with floor `deny` whose
reason names the command and the rule.

The locked file can also deny tools by id and by handler kind, whatever their permission key
(`locked_tools`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..build.compiled import CompiledTool
from ..build.snapshot import Snapshot
from ..build.templates import render, render_argv, render_shell
from ..config.model import ArgvHandler, ShellHandler
from ..permissions.evaluate import decide
from ..permissions.model import PermissionRequest, Rule
from ..permissions.rules import Ruleset

__all__ = ["process_denies"]


def _binding(rules: Ruleset) -> Ruleset:
    """The agent's bash rules that name a command: they bind every process, the bare `*` does not."""
    return Ruleset(rule for rule in rules if rule.permission == "bash" and rule.pattern not in ("*", ""))


def _command_text(tool: CompiledTool, args: Mapping[str, Any], snapshot: Snapshot) -> str | None:
    handler = tool.definition.handler
    names, root = tool.parameter_names, snapshot.root
    try:
        if isinstance(handler, ShellHandler):
            return render_shell(tool.shell, args, names, root).shown
        if isinstance(handler, ArgvHandler) and tool.argv is not None:
            return shlex.join(render_argv(tool.argv, args, names, root))
    except Exception:  # a template that cannot render fails the call when it runs; nothing runs to check
        return None
    return None


def process_denies(
    tool: CompiledTool, args: Mapping[str, Any], snapshot: Snapshot, agent: str | None
) -> list[PermissionRequest]:
    """Deny requests for what the tool's process would run that a binding rule denies (none for tools
    that start no process, or when no rule could deny anything)."""
    handler = tool.definition.handler
    if not isinstance(handler, (ArgvHandler, ShellHandler)):
        return []
    permissions = snapshot.permissions
    binding = _binding(permissions.ruleset(agent))
    locked = permissions.locked
    if not binding and not any(rule.action == "deny" for rule in locked):
        return []
    text = _command_text(tool, args, snapshot)
    if text is None:
        return []
    from ..shell import analyze_command

    site = snapshot.site
    if tool.cwd is not None:
        site = replace(site, cwd=snapshot.root / render(tool.cwd, args, tool.parameter_names, snapshot.root))
    decision = decide(analyze_command(text, site), binding, locked=locked)
    return [
        PermissionRequest(
            verdict.permission, (verdict.pattern,), (), floor="deny", reason=_reason(tool, text, verdict.rule)
        )
        for verdict in decision.decisions
        if verdict.action == "deny"
    ]


def _reason(tool: CompiledTool, text: str, rule: Rule | None) -> str:
    shown = text if len(text) <= 200 else text[:200] + "…"
    by = f"rule {rule.describe()}" if rule is not None else "a rule"
    return f"the {tool.id} tool would run `{shown}`, and {by} denies it (deny rules bind every process)"
