"""`tests:` of permissions.yaml: expected verdicts checked by `toolrt validate`.

`{permission, pattern}` entries are checked against the agent's ruleset; `{tool, args}` entries
first turn the call into requests with the caller's `analyze_tool` (the same analysis dispatch
uses: the tool's `permission:` block, bash parsing, external paths), then decide them.
A failing test is an error at the test's file:line that says what was expected, what came out,
and which rule decided instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import Problem, ToolrtError
from .config import PermissionConfig
from .evaluate import check, decide
from .model import Decision, PermissionRequest, unmatched_basis
from .parse import PermissionTest

__all__ = ["ToolAnalyzer", "run_permission_tests"]

ToolAnalyzer = Callable[[str, Mapping[str, Any], str], Sequence[PermissionRequest]]
"""`(tool id, arguments, agent name) -> requests`: what a call asks, as dispatch would compute it."""
PatternAnalyzer = Callable[[str, str], Sequence[PermissionRequest] | None]
"""`(permission, pattern) -> requests` for permissions whose patterns are analysed (a `bash` command
runs the bash analyzer), or None to check the pattern as it stands."""


def _explain(decision: Decision) -> str:
    parts: list[str] = []
    for verdict in decision.decisions:
        if verdict.action != decision.action:
            continue
        basis = f"rule {verdict.rule.describe()}" if verdict.rule is not None else unmatched_basis(verdict.permission)
        if verdict.reason:
            basis += f"; {verdict.reason}"
        parts.append(f'{verdict.permission} "{verdict.pattern}" → {basis}')
    return "; ".join(dict.fromkeys(parts)) or "the call asks no permission"


def _run(
    test: PermissionTest, config: PermissionConfig, analyze_tool: ToolAnalyzer, analyze_pattern: PatternAnalyzer | None
) -> Problem | None:
    agent = test.agent or config.default_agent
    ruleset = config.ruleset(agent)
    try:
        if test.tool is not None:
            requests = analyze_tool(test.tool, test.args or {}, agent)
            decision = decide(requests, ruleset, locked=config.locked)
        else:
            permission, pattern = test.permission or "", test.pattern or ""
            analysed = analyze_pattern(permission, pattern) if analyze_pattern is not None else None
            if analysed is not None:
                decision = decide(analysed, ruleset, locked=config.locked)
            else:
                decision = check(permission, pattern, ruleset, locked=config.locked)
    except ToolrtError as error:
        return test.location.problem(f"permission test {test.describe()} (agent {agent}) could not run: {error}")
    if decision.action == test.expect:
        return None
    return test.location.problem(
        f"permission test failed: {test.describe()} for agent {agent}: expected {test.expect}, "
        f"got {decision.action} ({_explain(decision)})"
    )


def run_permission_tests(
    config: PermissionConfig, analyze_tool: ToolAnalyzer, analyze_pattern: PatternAnalyzer | None = None
) -> list[Problem]:
    """Run every test of the config; one error per failing test, none when all pass.

    `analyze_pattern` turns `{permission, pattern}` entries into requests where the permission has
    an analyzer (`bash`: the command is analysed as the bash tool's would be).
    """
    return [
        problem for test in config.tests if (problem := _run(test, config, analyze_tool, analyze_pattern)) is not None
    ]
