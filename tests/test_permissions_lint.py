"""Lint: `covers` decided exactly, and unreachable rules reported with both lines (opencode#11218)."""

from __future__ import annotations

import itertools

import pytest
from test_permissions_support import FIXTURES, build

from toolrt.permissions.lint import covers, lint
from toolrt.permissions.wildcard import compile_pattern


@pytest.mark.parametrize(
    ("later", "earlier", "expected"),
    [
        ("*", "rm *", True),
        ("*", "", True),
        ("rm *", "rm -rf *", True),
        ("rm *", "rm", True),
        ("rm *", "rm*", False),
        ("rm*", "rm *", True),
        ("rm -rf *", "rm *", False),
        ("git status*", "git status --short", True),
        ("?*", "*?", True),
        ("*?", "?*", True),
        ("?*a", "*a?a", True),
        ("*a", "*a*a", True),
        ("*ab*", "*a*b*", False),
        ("*.env", "src/.env", True),
        ("*.env", "*.env.*", False),
        ("*.env.*", "*.env.example", True),
        ("a?c", "abc", True),
        ("a?c", "a*c", False),
        ("ls *", "ls *", True),
        ("ls *", "ls -la *", True),
        ("* *", "x", True),
        (" *", "", True),
        (" *", " x", True),
        (" *", "x", False),
        ("src\\*", "src/a.py", True),
        ("a", "a", True),
        ("a", "b", False),
        ("", "", True),
        ("", "*", False),
    ],
)
def test_covers(later: str, earlier: str, expected: bool) -> None:
    assert covers(later, earlier) is expected


def test_covers_agrees_with_brute_force_on_every_small_pattern_pair() -> None:
    patterns = ["".join(p) for n in range(4) for p in itertools.product("a *?", repeat=n)]
    texts = ["".join(p) for n in range(6) for p in itertools.product("a z", repeat=n)]
    matched = {p: frozenset(t for t in texts if compile_pattern(p).fullmatch(t)) for p in patterns}
    for earlier, later in itertools.product(patterns, repeat=2):
        assert covers(later, earlier) is (matched[earlier] <= matched[later]), (later, earlier)


def test_the_catch_all_placed_last_is_an_error_naming_both_lines() -> None:
    config = build((FIXTURES / "trap.yaml").read_text(encoding="utf-8"))
    problems = lint(config)
    assert [str(p) for p in problems] == [
        'project.yaml:4:5: rule bash: "rm *": deny (line 4) can never decide: it is covered by the later rule '
        'bash: "*": allow (line 5) in project; the last matching rule wins, so put the broader rule first or '
        "remove one of them"
    ]
    assert problems[0].severity == "error" and problems[0].pointer == "/permission/bash/rm *"


@pytest.mark.parametrize(
    ("project", "expected"),
    [
        # a key wildcard covers the key too
        ('permission: {bash: {"rm *": deny}, "*": allow}', ['rule bash: "rm *": deny (line 1) can never decide']),
        ('permission: {"mcp_a": deny, "mcp_*": ask}', ['rule mcp_a: "*": deny (line 1) can never decide']),
        # same action still never decides
        ('permission: {bash: {"git *": allow, "*": allow}}', ['rule bash: "git *": allow (line 1) can never decide']),
        # identical duplicates via the explicit list
        (
            "rules:\n  - {permission: bash, pattern: ls, action: allow}\n"
            "  - {permission: bash, pattern: ls, action: allow}",
            ['rule bash: "ls": allow (line 2) duplicates the later rule bash: "ls": allow (line 3)'],
        ),
        # a literal rule shadowed by a later glob
        ('permission: {read: {"/etc/passwd": deny, "/etc/*": allow}}', ['rule read: "/etc/passwd": deny (line 1)']),
        # fine: broad first, specific after
        ('permission: {"*": allow, bash: {"*": ask, "rm *": deny}, read: {"*.env": ask, "*.env.example": allow}}', []),
        # fine: different keys, narrower later key
        ('permission: {"mcp_*": ask, "mcp_a": deny}', []),
        # agent rules are their own scope: a global rule is not shadowed by one agent's rule
        ("permission: {edit: ask}\nagents: {plan: {permission: {edit: deny}}}", []),
    ],
)
def test_lint_cases(project: str, expected: list[str]) -> None:
    messages = [p.message for p in lint(build(project + "\n"))]
    assert len(messages) == len(expected)
    for message, start in zip(messages, expected, strict=True):
        assert message.startswith(start), message


def test_the_builtin_permissions_file_lints_clean() -> None:
    assert lint(build()) == []


def test_unused_keys_are_warnings_for_project_files_only() -> None:
    config = build('permission: {bsah: deny, "mcp_*": ask, bash: {"ls": allow}}\n')
    problems = lint(config, known_permissions={"bash", "read", "edit"})
    assert [(p.severity, p.message) for p in problems] == [
        ("warning", 'permission "bsah" is not used by any tool; check the spelling'),
        ("warning", 'permission "mcp_*" is not used by any tool; check the spelling'),
    ]
    assert lint(config, known_permissions={"bash", "bsah", "mcp_x"}) == []


def test_lint_of_a_large_layer_finds_the_one_shadowed_rule() -> None:
    lines = "\n".join(f'  - {{permission: bash, pattern: "cmd{i} --flag", action: allow}}' for i in range(1000))
    config = build(f'rules:\n{lines}\n  - {{permission: bash, pattern: "cmd7 *", action: deny}}\n')
    problems = lint(config)
    assert [p.message[:70] for p in problems] == [
        'rule bash: "cmd7 --flag": allow (line 9) can never decide: it is cover'
    ]
