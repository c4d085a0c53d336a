"""`tests:` in permissions.yaml, run by `toolrt validate`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from test_permissions_support import FIXTURES, build

from toolrt.errors import UsageError
from toolrt.permissions.model import PermissionRequest
from toolrt.permissions.selftests import run_permission_tests


def fake_bash(tool: str, args: Mapping[str, Any], agent: str) -> Sequence[PermissionRequest]:
    """Splits on `&&` only: a stand-in for the real analyzer, enough to drive the runner."""
    if tool != "bash":
        raise UsageError(f'unknown tool "{tool}"; tools: bash')
    commands = tuple(part.strip() for part in str(args["command"]).split("&&"))
    return [PermissionRequest("bash", commands)]


def test_the_builtin_tests_pass() -> None:
    assert run_permission_tests(build(), fake_bash) == []


def test_the_fixture_project_tests_pass_including_a_tool_call() -> None:
    seen: list[tuple[str, str]] = []

    def analyze(tool: str, args: Mapping[str, Any], agent: str) -> Sequence[PermissionRequest]:
        seen.append((tool, agent))
        return fake_bash(tool, args, agent)

    config = build((FIXTURES / "project.yaml").read_text(encoding="utf-8"))
    assert run_permission_tests(config, analyze) == []
    assert seen == [("bash", "build")]


def test_a_failing_test_says_expected_got_and_the_deciding_rule() -> None:
    config = build(
        "permission: {bash: {'*': ask, 'git *': allow}}\n"
        "tests:\n"
        "  - {permission: bash, pattern: git push, expect: deny}\n"
        "  - {permission: webfetch, pattern: https://x, expect: allow, agent: explore}\n"
        "  - {permission: nothing, pattern: x, expect: allow}\n"
        "  - {tool: bash, args: {command: 'ls && git push'}, expect: allow}\n",
        builtin="default_agent: build\nagents: {build: {mode: primary}, explore: {mode: subagent}}\n",
    )
    problems = run_permission_tests(config, fake_bash)
    assert [str(p) for p in problems] == [
        'project.yaml:3:5: permission test failed: bash "git push" for agent build: expected deny, got allow '
        '(bash "git push" → rule bash: "git *": allow (project.yaml:1))',
        'project.yaml:4:5: permission test failed: webfetch "https://x" for agent explore: expected allow, got ask '
        '(webfetch "https://x" → no rule matched: default ask)',
        'project.yaml:5:5: permission test failed: nothing "x" for agent build: expected allow, got ask '
        '(nothing "x" → no rule matched: default ask)',
        "project.yaml:6:5: permission test failed: bash call {'command': 'ls && git push'} for agent build: "
        'expected allow, got ask (bash "ls" → rule bash: "*": ask (project.yaml:1))',
    ]
    assert {p.severity for p in problems} == {"error"}


def test_an_analyzer_error_is_reported_at_the_test() -> None:
    config = build("tests:\n  - {tool: nosuch, args: {}, expect: allow}\n")
    problems = run_permission_tests(config, fake_bash)
    assert [str(p) for p in problems] == [
        'project.yaml:2:5: permission test nosuch call {} (agent build) could not run: unknown tool "nosuch"; '
        "tools: bash"
    ]


def test_locked_rules_apply_to_tests() -> None:
    config = build(
        "tests:\n  - {permission: bash, pattern: curl x, expect: allow}\n",
        locked="permission: {bash: {'curl *': deny}}\n",
    )
    [problem] = run_permission_tests(config, fake_bash)
    assert 'got deny (bash "curl x" → rule bash: "curl *": deny (locked.yaml:1))' in problem.message
