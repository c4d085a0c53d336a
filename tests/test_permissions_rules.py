"""Ruleset: OpenCode's `evaluate`/`merge` tests ported, plus the index against a naive findLast."""

from __future__ import annotations

import random

import pytest

from toolrt.permissions.model import Action, Rule
from toolrt.permissions.rules import Ruleset
from toolrt.permissions.wildcard import match


def R(permission: str, pattern: str, action: Action) -> Rule:
    return Rule(permission, pattern, action)


def naive(rules: list[Rule], permission: str, pattern: str) -> Rule | None:
    """OpenCode's `findLast`, the reference the index must agree with."""
    for rule in reversed(rules):
        if match(permission, rule.permission) and match(pattern, rule.pattern):
            return rule
    return None


EVALUATE_CASES: list[tuple[str, str, str, list[Rule], str | None]] = [
    ("exact pattern", "bash", "rm", [R("bash", "rm", "deny")], "deny"),
    ("wildcard pattern", "bash", "rm", [R("bash", "*", "allow")], "allow"),
    ("last wins", "bash", "rm", [R("bash", "*", "allow"), R("bash", "rm", "deny")], "deny"),
    ("last wins, wildcard after", "bash", "rm", [R("bash", "rm", "deny"), R("bash", "*", "allow")], "allow"),
    ("glob", "edit", "src/foo.ts", [R("edit", "src/*", "allow")], "allow"),
    (
        "last glob wins",
        "edit",
        "src/components/Button.tsx",
        [R("edit", "src/*", "deny"), R("edit", "src/components/*", "allow")],
        "allow",
    ),
    (
        "order over specificity",
        "edit",
        "src/components/Button.tsx",
        [R("edit", "src/components/*", "allow"), R("edit", "src/*", "deny")],
        "deny",
    ),
    ("unknown permission", "unknown_tool", "anything", [R("bash", "*", "allow")], None),
    ("empty ruleset", "bash", "rm", [], None),
    ("no matching pattern", "edit", "etc/passwd", [R("edit", "src/*", "allow")], None),
    (
        "several match, last wins",
        "edit",
        "src/secret.ts",
        [R("edit", "*", "ask"), R("edit", "src/*", "allow"), R("edit", "src/secret.ts", "deny")],
        "deny",
    ),
    (
        "non-matching skipped",
        "edit",
        "src/foo.ts",
        [R("edit", "*", "ask"), R("edit", "test/*", "deny"), R("edit", "src/*", "allow")],
        "allow",
    ),
    ("exact at end", "bash", "/bin/rm", [R("bash", "*", "allow"), R("bash", "/bin/rm", "deny")], "deny"),
    ("wildcard at end", "bash", "/bin/rm", [R("bash", "/bin/rm", "deny"), R("bash", "*", "allow")], "allow"),
    ("wildcard permission", "bash", "rm", [R("*", "*", "deny")], "deny"),
    ("wildcard permission, specific pattern", "bash", "rm", [R("*", "rm", "deny")], "deny"),
    ("glob permission", "mcp_server_tool", "anything", [R("mcp_*", "*", "allow")], "allow"),
    ("specific after wildcard permission", "bash", "rm", [R("*", "*", "deny"), R("bash", "*", "allow")], "allow"),
    ("specific pattern after *", "edit", "src/foo.ts", [R("*", "*", "deny"), R("edit", "src/*", "allow")], "allow"),
    (
        "permission globs combine",
        "mcp_dangerous",
        "anything",
        [R("*", "*", "ask"), R("mcp_*", "*", "allow"), R("mcp_dangerous", "*", "deny")],
        "deny",
    ),
    ("wildcard fallback", "unknown_tool", "anything", [R("*", "*", "ask"), R("bash", "*", "allow")], "ask"),
    ("later wildcard permission", "bash", "rm", [R("bash", "*", "allow"), R("*", "*", "deny")], "deny"),
    ("trailing space-star", "bash", "ls", [R("bash", "*", "deny"), R("bash", "ls *", "allow")], "allow"),
    ("prefix longer than text", "bash", "gi", [R("bash", "*", "ask"), R("bash", "git status*", "allow")], "ask"),
]


@pytest.mark.parametrize(
    ("permission", "pattern", "rules", "expected"),
    [case[1:] for case in EVALUATE_CASES],
    ids=[case[0] for case in EVALUATE_CASES],
)
def test_evaluate(permission: str, pattern: str, rules: list[Rule], expected: str | None) -> None:
    rule = Ruleset(rules).evaluate(permission, pattern)
    assert (rule.action if rule else None) == expected
    assert rule is naive(rules, permission, pattern)


def test_concat_is_plain_concatenation_in_order() -> None:
    a = Ruleset([R("edit", "src/*", "allow"), R("edit", "src/secret/*", "deny")])
    b = Ruleset([R("edit", "src/secret/ok.ts", "allow")])
    merged = Ruleset.concat(a, Ruleset(), b)
    assert merged.rules == a.rules + b.rules
    assert merged.evaluate("edit", "src/secret/ok.ts") == R("edit", "src/secret/ok.ts", "allow")
    assert merged.evaluate("edit", "src/secret/x.ts") == R("edit", "src/secret/*", "deny")


@pytest.mark.parametrize(
    ("defaults", "config", "permission", "expected"),
    [
        ([R("*", "*", "ask")], [R("bash", "*", "allow")], "bash", "allow"),
        ([R("*", "*", "ask")], [R("bash", "*", "allow")], "edit", "ask"),
        ([R("bash", "*", "allow")], [R("bash", "*", "ask")], "bash", "ask"),
        ([R("bash", "*", "allow")], [R("bash", "*", "deny")], "bash", "deny"),
    ],
)
def test_concat_later_rules_override(defaults: list[Rule], config: list[Rule], permission: str, expected: str) -> None:
    rule = Ruleset.concat(Ruleset(defaults), Ruleset(config)).evaluate(permission, "x")
    assert rule is not None and rule.action == expected


@pytest.mark.parametrize(
    ("rules", "permission", "expected"),
    [
        ([R("bash", "*", "deny"), R("bash", "echo *", "allow")], "bash", R("bash", "echo *", "allow")),
        ([R("bash", "*", "allow"), R("*", "*", "deny")], "bash", R("*", "*", "deny")),
        ([R("edit", "*", "deny")], "bash", None),
        ([R("mcp_*", "*", "deny"), R("mcp_a", "x", "allow")], "mcp_a", R("mcp_a", "x", "allow")),
    ],
)
def test_last_rule_for_permission_ignores_the_pattern(
    rules: list[Rule], permission: str, expected: Rule | None
) -> None:
    assert Ruleset(rules).last_rule_for_permission(permission) == expected


def test_ruleset_value_semantics() -> None:
    rules = [R("bash", "*", "ask")]
    assert Ruleset(rules) == Ruleset(rules)
    assert hash(Ruleset(rules)) == hash(Ruleset(rules))
    assert len(Ruleset(rules)) == 1 and list(Ruleset(rules)) == rules
    assert not Ruleset() and Ruleset(rules)
    assert repr(Ruleset(rules)) == "Ruleset(1 rules)"


def test_evaluation_is_repeatable_across_the_per_permission_memo() -> None:
    ruleset = Ruleset([R("*", "*", "allow"), R("bash", "rm *", "deny")])
    for _ in range(3):
        assert ruleset.evaluate("bash", "rm -rf /") == R("bash", "rm *", "deny")
        assert ruleset.evaluate("Bash", "rm -rf /") == R("*", "*", "allow")


def _random_rule(rng: random.Random) -> Rule:
    permission = rng.choice(["bash", "edit", "read", "mcp_a", "mcp_b", "*", "mcp_*", "?ead", "tool7"])
    head = rng.choice(["", "git", "git s", "src/", "rm", "ls", "/etc/", "a"])
    tail = rng.choice(["", "*", " *", "?", "*.py", "tatus*", "x"])
    pattern = (head + tail) or "*"
    return Rule(permission, pattern, rng.choice(["allow", "ask", "deny"]), source=str(rng.random()))


def test_a_huge_random_ruleset_agrees_with_find_last() -> None:
    rng = random.Random(42)
    rules = [_random_rule(rng) for _ in range(10_000)]
    ruleset = Ruleset(rules)
    texts = ["git status", "git", "git s", "src/a.py", "rm -rf /", "ls", "ls -la", "/etc/passwd", "a", "ax", "", "zzz"]
    for permission in ["bash", "edit", "read", "mcp_a", "mcp_c", "xead", "other"]:
        for text in texts:
            assert ruleset.evaluate(permission, text) is naive(rules, permission, text)


def test_a_huge_ruleset_of_one_permission_finds_the_right_rule() -> None:
    rules = [R("bash", "*", "ask")] + [R("bash", f"cmd{i} *", "allow") for i in range(10_000)]
    rules.append(R("bash", "cmd5000 --force*", "deny"))
    ruleset = Ruleset(rules)
    assert ruleset.evaluate("bash", "cmd9999 x") == R("bash", "cmd9999 *", "allow")
    assert ruleset.evaluate("bash", "cmd5000 --force now") == R("bash", "cmd5000 --force*", "deny")
    assert ruleset.evaluate("bash", "cmd10000") == R("bash", "*", "ask")
