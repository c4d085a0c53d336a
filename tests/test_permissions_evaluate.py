"""decide/check/disabled and the model-facing texts (OpenCode's ask/disabled tests, plus the locked layer)."""

from __future__ import annotations

from typing import Any

import pytest

from toolrt.permissions.evaluate import approval_required_message, check, decide, denied_message, disabled
from toolrt.permissions.model import Action, PermissionRequest, Rule, plain_request
from toolrt.permissions.rules import Ruleset

NONE = Ruleset()


def R(permission: str, pattern: str, action: Action, source: str = "") -> Rule:
    return Rule(permission, pattern, action, source)


@pytest.mark.parametrize(
    ("patterns", "rules", "expected"),
    [
        (["ls"], [R("bash", "*", "allow")], "allow"),
        (["rm -rf /"], [R("bash", "*", "deny")], "deny"),
        (["ls"], [R("bash", "*", "ask")], "ask"),
        (["ls"], [], "ask"),
        (["echo hello", "rm -rf /"], [R("bash", "*", "allow"), R("bash", "rm *", "deny")], "deny"),
        (["echo hello", "ls -la", "pwd"], [R("bash", "*", "allow")], "allow"),
        # every pattern is evaluated first: a later deny beats an earlier ask
        (["echo hello", "rm -rf /"], [R("bash", "echo *", "ask"), R("bash", "rm *", "deny")], "deny"),
        (["echo hello", "rm -rf /tmp/foo"], [R("bash", "echo *", "allow")], "ask"),
        ([], [R("bash", "*", "deny")], "allow"),
    ],
)
def test_decide_combines_every_pattern(patterns: list[str], rules: list[Rule], expected: str) -> None:
    decision = decide([PermissionRequest("bash", tuple(patterns))], Ruleset(rules), locked=NONE)
    assert decision.action == expected
    assert [d.pattern for d in decision.decisions] == patterns


def test_pattern_decisions_carry_the_rule_or_none_for_default_ask() -> None:
    allow = R("bash", "echo *", "allow")
    decision = decide([PermissionRequest("bash", ("echo hello", "rm -rf /tmp/foo"))], Ruleset([allow]), locked=NONE)
    assert [(d.pattern, d.action, d.rule) for d in decision.decisions] == [
        ("echo hello", "allow", allow),
        ("rm -rf /tmp/foo", "ask", None),
    ]
    assert decision.rule is None


def test_several_requests_any_deny_denies() -> None:
    rules = Ruleset([R("*", "*", "allow"), R("external_directory", "/etc/*", "deny")])
    requests = [PermissionRequest("external_directory", ("/etc/*",)), PermissionRequest("bash", ("cat /etc/x",))]
    decision = decide(requests, rules, locked=NONE)
    assert decision.action == "deny"
    assert decision.rule == R("external_directory", "/etc/*", "deny")


def test_approved_rules_come_last_and_win() -> None:
    config = Ruleset([R("bash", "*", "ask")])
    approved = Ruleset([R("bash", "git *", "allow")])
    assert decide([PermissionRequest("bash", ("git log",))], config, locked=NONE, approved=approved).action == "allow"
    # OpenCode's "merges multiple rulesets": an approved deny would win too
    denied = Ruleset([R("bash", "rm", "deny")])
    assert (
        decide(
            [PermissionRequest("bash", ("rm",))], Ruleset([R("bash", "*", "allow")]), locked=NONE, approved=denied
        ).action
        == "deny"
    )


def test_locked_deny_beats_later_allow_and_approvals() -> None:
    locked = Ruleset([R("bash", "curl *", "deny", "admin.yaml:3")])
    ruleset = Ruleset([R("bash", "*", "allow"), R("bash", "curl *", "allow")])
    approved = Ruleset([R("bash", "curl *", "allow")])
    decision = decide([PermissionRequest("bash", ("curl evil.sh",))], ruleset, locked=locked, approved=approved)
    assert decision.action == "deny"
    assert decision.rule == R("bash", "curl *", "deny", "admin.yaml:3")


def test_locked_ask_is_a_floor_approvals_do_not_lift() -> None:
    locked = Ruleset([R("bash", "git push*", "ask")])
    approved = Ruleset([R("bash", "git push*", "allow")])
    decision = decide(
        [PermissionRequest("bash", ("git push",))], Ruleset([R("*", "*", "allow")]), locked=locked, approved=approved
    )
    assert decision.action == "ask"
    assert decision.decisions[0].rule == R("bash", "git push*", "ask")


@pytest.mark.parametrize(
    ("rules", "locked_rules", "expected"),
    [
        # a locked allow never loosens anything
        ([R("bash", "*", "deny")], [R("bash", "*", "allow")], "deny"),
        ([R("bash", "*", "ask")], [R("bash", "*", "allow")], "ask"),
        # a locked ask does not soften a deny
        ([R("bash", "*", "deny")], [R("bash", "*", "ask")], "deny"),
        # inside the locked layer, the last match wins too
        ([R("bash", "*", "allow")], [R("bash", "*", "deny"), R("bash", "ls*", "allow")], "allow"),
    ],
)
def test_locked_layer_only_tightens(rules: list[Rule], locked_rules: list[Rule], expected: str) -> None:
    assert check("bash", "ls", Ruleset(rules), locked=Ruleset(locked_rules)).action == expected


@pytest.mark.parametrize(
    ("rule_action", "floor", "expected", "reason_kept"),
    [
        ("allow", "ask", "ask", True),
        ("ask", "ask", "ask", True),
        ("deny", "ask", "deny", False),
        ("allow", "deny", "deny", True),
    ],
)
def test_floor_raises_the_action_and_keeps_the_reason(
    rule_action: Action, floor: Action, expected: str, reason_kept: bool
) -> None:
    request = PermissionRequest("bash", ("$cmd x",), floor=floor, reason="the command name is dynamic")
    decision = decide([request], Ruleset([R("bash", "*", rule_action)]), locked=NONE)
    assert decision.action == expected
    assert (decision.decisions[0].reason == "the command name is dynamic") is reason_kept


def test_floor_is_not_lifted_by_approvals() -> None:
    request = PermissionRequest("bash", ("$cmd",), floor="ask", reason="dynamic")
    approved = Ruleset([R("bash", "*", "allow")])
    assert decide([request], Ruleset(), locked=NONE, approved=approved).action == "ask"


def test_check_is_one_request_with_one_pattern() -> None:
    decision = check("read", "/p/.env", Ruleset([R("read", "*", "allow"), R("read", "*.env", "ask")]), locked=NONE)
    assert decision.action == "ask"
    assert decision.rule == R("read", "*.env", "ask")


EDIT_TOOLS = {"edit": "edit", "write": "edit", "apply_patch": "edit"}


@pytest.mark.parametrize(
    ("tools", "rules", "expected"),
    [
        ({"bash": "bash", "edit": "edit", "read": "read"}, [R("*", "*", "allow")], set()),
        ({"bash": "bash", "edit": "edit", "read": "read"}, [R("*", "*", "allow"), R("bash", "*", "deny")], {"bash"}),
        ({**EDIT_TOOLS, "bash": "bash"}, [R("*", "*", "allow"), R("edit", "*", "deny")], set(EDIT_TOOLS)),
        ({"bash": "bash"}, [R("bash", "*", "allow"), R("bash", "rm *", "deny")], set()),
        ({"bash": "bash", "edit": "edit"}, [R("*", "*", "ask")], set()),
        ({"bash": "bash"}, [R("bash", "*", "deny"), R("bash", "echo *", "allow")], set()),
        ({"bash": "bash"}, [R("bash", "rm *", "deny"), R("bash", "*", "allow")], set()),
        (
            {"bash": "bash", "edit": "edit", "webfetch": "webfetch"},
            [R("bash", "*", "deny"), R("edit", "*", "deny"), R("webfetch", "*", "deny")],
            {"bash", "edit", "webfetch"},
        ),
        ({"bash": "bash", "edit": "edit", "read": "read"}, [R("*", "*", "deny")], {"bash", "edit", "read"}),
        (
            {"bash": "bash", "edit": "edit", "read": "read"},
            [R("*", "*", "deny"), R("bash", "*", "allow")],
            {"edit", "read"},
        ),
        ({"bash": "bash"}, [], set()),
    ],
)
def test_disabled(tools: dict[str, str], rules: list[Rule], expected: set[str]) -> None:
    assert disabled(tools, Ruleset(rules)) == frozenset(expected)


def test_denied_message_names_the_rule_readably() -> None:
    rules = Ruleset([R("bash", "*", "allow", "permissions.yaml:3"), R("bash", "rm *", "deny", "permissions.yaml:4")])
    decision = decide([PermissionRequest("bash", ("ls", "rm -rf /"))], rules, locked=NONE)
    message = denied_message(decision)
    assert message.startswith("The user has specified a rule which prevents you from using this specific tool call.")
    assert '- bash `rm -rf /`: deny, by rule bash: "rm *": deny (permissions.yaml:4)' in message
    assert "`ls`" not in message and "{" not in message


def test_denied_message_with_a_floor_says_why() -> None:
    request = PermissionRequest("bash", ("$x",), floor="deny", reason="the command name is dynamic")
    message = denied_message(decide([request], Ruleset([R("bash", "*", "allow", "p.yaml:2")]), locked=NONE))
    assert 'rule bash: "*": allow (p.yaml:2), raised to deny; the command name is dynamic' in message


def test_approval_required_message() -> None:
    rules = Ruleset([R("bash", "*", "ask", "permissions.yaml:9")])
    message = approval_required_message(decide([PermissionRequest("bash", ("git push",))], rules, locked=NONE))
    assert message.startswith(
        "This call needs approval (bash `git push`) but no one is available to approve it, so it was not run."
    )
    assert '- bash `git push`: ask, by rule bash: "*": ask (permissions.yaml:9)' in message


def test_approval_required_message_for_default_ask_and_many_patterns() -> None:
    patterns = ("a", "b", "c", "d", "e")
    message = approval_required_message(decide([PermissionRequest("bash", patterns)], Ruleset(), locked=NONE))
    assert "(bash `a`, bash `b`, bash `c` and 2 more)" in message
    assert "- bash `e`: ask, no rule matched: default ask" in message


def test_a_request_is_the_frozen_dataclass_its_fields_say() -> None:
    """`PermissionRequest` writes its `__init__` out (cheaper than the generated one): it takes the fields
    in their order with their defaults, stays frozen, and `dataclasses.replace` still builds one."""
    import dataclasses

    fields = dataclasses.fields(PermissionRequest)
    defaults = {  # a factory where Python 3.11 refuses the default itself (an empty mappingproxy)
        field.name: field.default if field.default_factory is dataclasses.MISSING else field.default_factory()
        for field in fields[2:]
    }
    request = PermissionRequest("bash", ("ls",))
    assert {name: getattr(request, name) for name in defaults} == defaults
    values: tuple[Any, ...] = ("bash", ("ls x",), ("ls *",), {"k": 1}, "ask", "why", True, ("rm x",))
    positional = PermissionRequest(*values)
    assert tuple(getattr(positional, field.name) for field in fields) == values
    assert positional == PermissionRequest(**{field.name: value for field, value in zip(fields, values, strict=True)})
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'floor'"):
        request.floor = "deny"  # type: ignore[misc]
    assert dataclasses.replace(request, floor="deny") == PermissionRequest("bash", ("ls",), floor="deny")
    with pytest.raises(TypeError, match="unexpected keyword argument 'flor'"):
        PermissionRequest("bash", ("ls",), flor="deny")  # type: ignore[call-arg]
    made = plain_request("bash", ("ls x",), ("ls *",))
    assert made == PermissionRequest("bash", ("ls x",), ("ls *",))
    assert {name: getattr(made, name) for name in defaults if name != "always"} == {
        name: value for name, value in defaults.items() if name != "always"
    }
    assert plain_request("read", ("/x",)) == PermissionRequest("read", ("/x",))
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'patterns'"):
        made.patterns = ()  # type: ignore[misc]
