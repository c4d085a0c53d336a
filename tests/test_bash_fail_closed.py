"""One rule for what the analyzer cannot see (issue 11, item 2): the ruleset's fallback, at least ask,
and deny where the unseen text visibly names a denied command; bounded work on hostile input (item 9);
"always" patterns that never hold a wildcard the model wrote (item 8).

The two rulesets are the issue's: an allow-list (`"*": deny` plus a few read-only commands) and a
deny-list (`"*": allow` minus `rm`, `git push`, `curl`).
"""

from __future__ import annotations

import pytest

from toolrt.permissions.evaluate import decide, denied_message
from toolrt.permissions.model import CallSite, PermissionRequest, Rule
from toolrt.permissions.rules import Ruleset
from toolrt.shell import analyze_command
from toolrt.shell.named import MAX_SCAN_CHARS, named_commands

ALLOW_LIST = Ruleset(
    [
        Rule("bash", "*", "deny"),
        Rule("bash", "git status*", "allow"),
        Rule("bash", "ls*", "allow"),
        Rule("bash", "cat *", "allow"),
        Rule("bash", "echo *", "allow"),
        Rule("external_directory", "*", "ask"),
    ]
)
DENY_LIST = Ruleset(
    [
        Rule("bash", "*", "allow"),
        Rule("bash", "rm *", "deny"),
        Rule("bash", "git push*", "deny"),
        Rule("bash", "curl *", "deny"),
        Rule("external_directory", "*", "ask"),
    ]
)
NO_RULES = Ruleset()


def actions(command: str, site: CallSite) -> tuple[str, str]:
    requests = analyze_command(command, site)
    return (
        decide(requests, ALLOW_LIST, locked=NO_RULES).action,
        decide(requests, DENY_LIST, locked=NO_RULES).action,
    )


# -- evaluation of opaque requests --------------------------------------------------------------------


def opaque(*named: str, pattern: str = "echo ${x:-`...`}") -> PermissionRequest:
    return PermissionRequest("bash", (pattern,), opaque=True, named=named, reason="it holds a hidden substitution")


@pytest.mark.parametrize(
    ("request_", "allow_list", "deny_list"),
    [
        (opaque(), "deny", "ask"),  # the fallback, at least ask: never the `echo *` allow
        (opaque("rm -rf x"), "deny", "deny"),  # it names a denied command
        (opaque("git push origin main"), "deny", "deny"),
        (opaque("ls -la"), "deny", "ask"),  # naming an allowed command does not allow
        (opaque(pattern="rm -rf x"), "deny", "deny"),  # the pattern itself denied
    ],
)
def test_opaque_requests_get_the_fallback_at_least_ask_and_deny_when_they_name_a_denied_command(
    request_: PermissionRequest, allow_list: str, deny_list: str
) -> None:
    assert decide([request_], ALLOW_LIST, locked=NO_RULES).action == allow_list
    assert decide([request_], DENY_LIST, locked=NO_RULES).action == deny_list


def test_opaque_request_without_a_fallback_rule_asks() -> None:
    ruleset = Ruleset([Rule("bash", "echo *", "allow")])
    assert decide([opaque()], ruleset, locked=NO_RULES).action == "ask"


def test_a_named_denial_says_which_command_and_why() -> None:
    decision = decide([opaque("rm -rf x")], DENY_LIST, locked=NO_RULES)
    message = denied_message(decision)
    assert "it names `rm -rf x`, which a rule denies" in message
    assert "it holds a hidden substitution" in message


def test_approvals_do_not_lift_an_opaque_request() -> None:
    approved = Ruleset([Rule("bash", "*", "allow", layer="approved")])
    assert decide([opaque()], DENY_LIST, locked=NO_RULES, approved=approved).action == "ask"


def test_a_locked_deny_on_a_named_command_denies() -> None:
    locked = Ruleset([Rule("bash", "curl *", "deny", layer="locked")])
    assert decide([opaque("curl evil.example")], Ruleset([Rule("bash", "*", "allow")]), locked=locked).action == "deny"


# -- what the analyzer reports as unseen ------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo ok; )( rm -rf x", ("deny", "deny")),  # a parse error never downgrades a deny to ask
        ("echo ok; )( ls -la", ("deny", "ask")),
        ("echo ok; )( /bin/rm -rf x", ("deny", "deny")),
        ("echo ok; )( 'r'm -rf x", ("deny", "deny")),
        ("LD_PRELOAD=./x.so ls", ("deny", "ask")),
        ("LD_PRELOAD=./x.so rm -rf x", ("deny", "deny")),
    ],
)
def test_what_cannot_be_seen_is_the_fallback_and_named_denials_deny(
    site: CallSite, command: str, expected: tuple[str, str]
) -> None:
    assert actions(command, site) == expected


def test_named_commands_read_through_quotes_and_punctuation() -> None:
    named, complete = named_commands("echo ${x:-`'r'm -rf /`}; /usr/bin/curl -s x | git push origin")
    assert complete
    assert "rm -rf /" in named
    assert "curl -s x" in named
    assert "git push origin" in named


def test_named_commands_report_text_too_long_to_scan() -> None:
    named, complete = named_commands("x " * MAX_SCAN_CHARS)
    assert not complete
    assert named == ()


def test_unseen_text_too_long_to_check_is_denied(site: CallSite) -> None:
    command = "echo ok; )( " + "ls " * MAX_SCAN_CHARS
    assert actions(command, site) == ("deny", "deny")
    reasons = [r.reason or "" for r in analyze_command(command, site) if r.opaque]
    assert any("too long to check every command it names" in reason for reason in reasons), reasons


# -- bounded work --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "echo " + "$(" * 3_000 + "x" + ")" * 3_000,
        "echo " + "`" * 3_000,
        "echo {" + "," * 99_000,
        "[[ " + "[" * 99_000 + " ]]",
        "echo " + "a " * 49_000,
        "ls|" * 33_000 + "ls",
    ],
    ids=["nested-substitutions", "backticks", "brace-commas", "brackets", "wide-command", "long-pipeline"],
)
def test_hostile_lines_are_decided_without_error_and_never_allowed_blindly(site: CallSite, command: str) -> None:
    requests = analyze_command(command, site)
    allow_list, deny_list = (decide(requests, r, locked=NO_RULES).action for r in (ALLOW_LIST, DENY_LIST))
    if any(r.opaque for r in requests):
        assert allow_list == "deny"
        assert deny_list in ("ask", "deny")


# -- "always" holds no wildcard the model wrote ---------------------------------------------------------


@pytest.mark.parametrize("command", ["git '*' x", "git \\* x", 'ls"?"', "'*'"])
def test_always_patterns_never_hold_a_model_written_wildcard(site: CallSite, command: str) -> None:
    for request in analyze_command(command, site):
        for pattern in request.always:
            assert "?" not in pattern
            assert "*" not in pattern[:-2], pattern


def test_always_pattern_of_an_ordinary_command_is_its_arity_prefix(site: CallSite) -> None:
    (request,) = analyze_command("git push origin main", site)
    assert request.always == ("git push *",)
