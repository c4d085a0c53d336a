"""One rule for what the analyzer cannot see (issue 11, item 2): the ruleset's fallback, at least ask,
and deny where the unseen text visibly names a denied command; bounded work on hostile input (item 9);
"always" patterns that never hold a wildcard the model wrote (item 8).

The two rulesets are the issue's: an allow-list (`"*": deny` plus a few read-only commands) and a
deny-list (`"*": allow` minus `rm`, `git push`, `curl`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from bash_oracle import ALLOW_LIST, DENY_LIST
from conftest import ProjectFactory

from toolrt.api import Runtime
from toolrt.permissions.evaluate import decide, denied_message
from toolrt.permissions.model import CallSite, PermissionRequest, Rule
from toolrt.permissions.rules import Ruleset
from toolrt.result import ToolResult
from toolrt.shell import analyze_command
from toolrt.shell.named import MAX_SCAN_CHARS, named_commands

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
    assert any("the commands it may run could not all be checked" in reason for reason in reasons), reasons


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


# -- the issue's classes, end to end under both rulesets --------------------------------------------

CLASSES: list[tuple[str, str, str]] = [
    # tree-sitter leaves text opaque that bash expands
    ("echo ${x:=`rm -rf x`}", "deny", "deny"),
    ("echo \"${x:-'$(rm -rf x)'}\"", "deny", "deny"),
    ("cat <<EOF\n`rm -rf x`\nEOF", "deny", "deny"),
    ("cat <<-EOF\n\t$(rm -rf x)\nEOF", "deny", "deny"),
    ("echo `echo \\`rm -rf x\\``", "deny", "deny"),
    ("cat <<'EOF'\n$(rm -rf x)\nEOF", "allow", "allow"),  # a quoted delimiter: the body is data
    # data evaluated as code
    ("[[ a -eq b ]]", "deny", "ask"),
    ("x='a[$(rm -rf x)]'; echo $((x))", "deny", "deny"),
    ("let 'x=a[$(rm -rf x)]'", "deny", "deny"),
    ("echo ${x@P}", "deny", "ask"),
    ("echo ${!x}", "deny", "ask"),
    ("echo ${a[i]}", "deny", "ask"),
    ("i=3; echo ${a[i]} $((i + 1))", "allow", "allow"),  # a name the line set to an integer
    ("for ((i=0; i<3; i++)); do echo $i; done", "allow", "allow"),
    ("declare -i n; n=$1", "deny", "ask"),
    # the command table
    ("BASH_CMDS[ls]=/bin/rm; ls x", "deny", "deny"),
    ("hash -p /bin/rm ls; ls x", "deny", "deny"),
    ("shopt -s expand_aliases; alias ls='rm -rf'; ls x", "deny", "deny"),
    ("enable -f ./x.so ls", "deny", "ask"),
    ("trap 'rm -rf x' EXIT", "deny", "deny"),
    ("trap 'echo bye' EXIT", "deny", "allow"),
    ("mapfile -C 'rm -rf' -c 1 < f", "deny", "deny"),
    ("source <(echo ls)", "deny", "ask"),
    ("source /dev/stdin <<< 'rm -rf x'", "deny", "deny"),
    ("coproc rm -rf x", "deny", "deny"),
    ("bash <(echo ls)", "deny", "ask"),
    ("echo ls > s.sh; bash s.sh", "deny", "ask"),
    ("bash ../s.sh", "deny", "ask"),
    # lexing
    ("r\\\nm -rf x", "deny", "deny"),
    ("{rm,-rf,x}", "deny", "deny"),
    ("$'\\x72\\x6d' -rf x", "deny", "deny"),
    ("cat {..,x}/outside", "ask", "ask"),
    ("cat {'a b',..}/outside", "ask", "ask"),
    # paths never checked
    ("cat $PWD/../x", "ask", "ask"),
    ("X=../outside/a; cat $X", "ask", "ask"),
    ("X=$(cat f); cat $X", "deny", "ask"),
    ("dd if=../x of=y", "deny", "ask"),
    ("sort -o../x y", "deny", "ask"),
    ("cat $TMPDIR/x", "deny", "ask"),
    # working directory
    ("(cd sub); cat ../x", "ask", "ask"),
    ("cd /tmp || true; cat x", "ask", "ask"),  # `true` is inert: cat and the outside directory remain
    ("popd; cat x", "deny", "ask"),
    # environment that turns an allowed program into code execution
    ("GIT_DIR=../x git status", "deny", "ask"),
    ("HOME=/tmp git status", "deny", "ask"),
    ("PAGER='rm -rf x' git status", "deny", "deny"),
    ("LESSOPEN='|rm x' cat x", "deny", "deny"),
    ("export GIT_EXTERNAL_DIFF=./x; git status", "deny", "ask"),
    # programs that forward to other programs
    ("script -c 'rm -rf x'", "deny", "deny"),
    ("setarch x86_64 rm -rf x", "deny", "deny"),
    ("prlimit --nofile=1 rm -rf x", "deny", "deny"),
    ("unshare -r rm -rf x", "deny", "deny"),
    ("runuser -u root rm -rf x", "deny", "deny"),
    ("sg grp -c 'rm -rf x'", "deny", "deny"),
    ("su root -c 'rm -rf x'", "deny", "deny"),
    ("nsenter -t 1 rm -rf x", "deny", "deny"),
    ("dbus-run-session rm -rf x", "deny", "deny"),
    ("ssh-agent rm -rf x", "deny", "deny"),
    ("env - rm -rf x", "deny", "deny"),
    ("sed 'e rm -rf x' f", "deny", "deny"),
    ("sed -n 's/a/b/w out' f", "deny", "ask"),
    ("sed -n '1,5p' f", "deny", "allow"),
    ("awk 'BEGIN{system(\"rm -rf x\")}'", "deny", "deny"),
    ("awk '{print $1}' f", "deny", "allow"),
    ("tar cf x.tar f --checkpoint=1 --checkpoint-action=exec='rm -rf x'", "deny", "deny"),
    ("git grep -O'rm -rf' x", "deny", "deny"),
    ("git st", "deny", "ask"),  # maybe an alias from git's configuration
    ("python3 -c 'import os'", "deny", "ask"),
    ("python3 - <<'EOF'\nimport os; os.system('ls')\nEOF", "deny", "ask"),
    ("python3 - <<'EOF'\nprint(1)\nEOF", "deny", "allow"),  # inert Python is read (issue 26, item 5)
    ("python3 tools/gen.py", "deny", "allow"),  # a script inside the project: its own rules
    # Shells whose language is not bash's: zsh's glob qualifiers run code that bash reads as a glob.
    ("zsh -c 'ls *(e:\"rm -rf x\":)'", "deny", "deny"),
    ("zsh -c 'ls *(e:\"touch y\":)'", "deny", "ask"),
    ("ksh -c 'echo hi'", "deny", "ask"),
    ("echo 'echo hi' | mksh", "deny", "ask"),
    ("sh -c 'echo hi'", "deny", "allow"),  # POSIX sh: bash's reading is never weaker
    ("dash -c 'rm -rf x'", "deny", "deny"),
    # Names a builtin evaluates: an array subscript runs its substitution (hidden here from the name scan).
    ("c=$(printf 'a[$(ls)]'); test -v \"$c\"", "deny", "ask"),
    ('read "$1" <<< 1', "deny", "ask"),
    ('printf -v "$1" x', "deny", "ask"),
    ('declare "$1=1"', "deny", "ask"),
    ("read -r line < f; test -v HOME; printf -v out %s x; declare -a arr; unset arr", "deny", "allow"),
    # A compound command tree-sitter does not parse, after time, ! or coproc.
    ("time { ls; }", "deny", "ask"),
    ("! { ls; }", "deny", "ask"),
    ("coproc X { ls; }", "deny", "ask"),
    # xargs and find add words: an inner wrapper may be made to run anything (what is not visible).
    ("echo cm0gLXJmIHgK | base64 -d | xargs env", "deny", "ask"),
    ("base64 -d f | xargs -0 sh -c", "deny", "ask"),
    ("find . -name 'x*' -exec sh -c {} \\;", "deny", "ask"),
    ("xargs grep foo < f", "deny", "allow"),
    ("find . -name '*.py' -exec grep -l x {} +", "deny", "allow"),
    ("echo 'x' | parallel", "deny", "ask"),
    ("ssh -o StrictHostKeyChecking=no h ls", "deny", "ask"),
]


@pytest.mark.parametrize(("command", "allow_list", "deny_list"), CLASSES, ids=[c[:40] for c, _, _ in CLASSES])
def test_issue_classes_get_the_fail_closed_action(
    site: CallSite, command: str, allow_list: str, deny_list: str
) -> None:
    (site.root / "sub").mkdir(exist_ok=True)
    assert actions(command, site) == (allow_list, deny_list)


def test_a_reason_names_what_could_not_be_analysed(site: CallSite) -> None:
    reasons = [r.reason or "" for r in analyze_command("echo ${x:=`ls`}", site) if r.opaque]
    assert any("holds a command substitution that could not be analysed" in reason for reason in reasons), reasons


def test_a_glob_reaching_a_symlink_out_of_the_project_asks(site: CallSite, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (site.root / "lnk").symlink_to(outside)
    for command in ("ls l?k/", "ls [l]nk/", "cat l*/secret"):
        assert actions(command, site)[1] == "ask", command


def test_the_person_is_shown_what_always_keeps(site: CallSite) -> None:
    from toolrt.permissions.ask import AskRequest
    from toolrt.permissions.shown import ask_lines

    def lines(command: str) -> list[str]:
        requests = analyze_command(command, site)
        pending = decide(requests, DENY_LIST, locked=NO_RULES).decisions
        return ask_lines(AskRequest("1", "s", "bash", "c", pending, requests), indent="  ")

    assert lines("cat ../x")[-1] == f'  "always" keeps: external_directory: {site.root.parent}/*; bash: cat *'
    assert lines("git '*' x")[-1] == '  "always" keeps no rule for this call (it runs once)'


def test_large_command_lines_are_analysed_off_the_event_loop(
    make_project: ProjectFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile 100 KB line may spend the whole analysis budget: it runs in a worker thread, while an
    ordinary line is analysed inline (a few microseconds, not worth a thread)."""
    from toolrt.call import permissions as call_permissions

    threads: list[bool] = []
    analyse = call_permissions.permission_requests

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        return analyse(*args, **kwargs)

    monkeypatch.setattr(call_permissions, "permission_requests", recording)
    rt = Runtime.load(
        make_project(permissions='permission:\n  bash: {"*": deny, "echo *": allow}\n', builtin_tools=True)
    )
    hostile = "echo " + "${x:-$(echo " * 8_000 + "rm -rf x" + ")}" * 8_000

    async def calls() -> tuple[ToolResult, ToolResult]:
        return await rt.call("bash", {"command": "echo hi", "description": "d"}), await rt.call(
            "bash", {"command": hostile, "description": "d"}
        )

    ordinary, large = anyio.run(calls)
    assert ordinary.error is None and ordinary.output.strip() == "hi"
    assert large.error is not None and "denied" in large.error.lower()
    assert threads == [True, False]


@pytest.mark.parametrize(
    "command",
    [
        "cat ~root\x00x",
        "cat ~\x00/x",
        "x=1 cat ~a\x00b/c",
        "cd ~u\x00 && ls",
        "cd a\x00b; cat x/y",
        "cd src\x00 && cat lnk/../y",
        'cd a\x00b && cat "${x:-~/y}"',
    ],
)
def test_a_nul_in_a_user_s_tilde_or_the_working_directory_is_a_refusal_not_a_crash(
    make_project: ProjectFactory, command: str
) -> None:
    """`~user` is looked up in the user database and a path below a `cd` into a name with a NUL is
    walked with `lstat`, neither of which takes a NUL: the line fails closed (asked, with the reason)
    in a call and in `check_call`, never their `ValueError` as an unexpected failure."""
    rt = Runtime.load(make_project(permissions='permission:\n  bash: {"*": allow, "rm *": deny}\n', builtin_tools=True))
    decision, _ = rt.check_call("bash", {"command": command, "description": "d"})
    assert decision.action == "ask"
    result = rt.call_sync("bash", {"command": command, "description": "d"})
    assert result.error is not None and "unexpectedly" not in result.error, result.error
    assert "the command contains binary or invalid characters" in result.error
