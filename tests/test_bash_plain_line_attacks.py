"""Lines of plain words (`shell/plain_line.py` reads them without the syntax tree) that bash runs otherwise
than they read: found by attacking the plain-line reader with real bash as the oracle (tests/bash_oracle.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bash_oracle import (
    ALLOW_LIST,
    DENY_LIST,
    Observation,
    analyzer_action,
    make_workspace,
    run_lines,
    unavailable,
    weaker,
)

from toolrt.permissions.model import CallSite
from toolrt.shell import analyze_command
from toolrt.shell.plain_line import read_plain


def _run_by_bash(lines: list[str], workspace: tuple[Path, CallSite]) -> tuple[list[Observation], list[str]]:
    """What real bash did with each of `lines`, and where the analyzer's reading was weaker than that."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    root, site = workspace
    observations = run_lines(lines, root)
    problems = [problem for line, seen in zip(lines, observations, strict=True) for problem in weaker(line, seen, site)]
    return observations, problems


@pytest.fixture(scope="module")
def workspace() -> Iterator[tuple[Path, CallSite]]:
    yield make_workspace()


def _bash(line: str) -> str:
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, check=False, timeout=10).stdout


# -- `set -k`: every NAME=value word of a later command goes to its environment, not its arguments ------

KEYWORD_LINES = [
    "set -k; git x=1 push",
    "set -o keyword; git x=1 push origin main",
    "set -ek; git a=b push",
    "set -eo keyword && git GIT_DIR=.git push",
    "shopt -so keyword; git x=1 push",  # shopt -o sets what set -o sets
    "shopt -o -s keyword && git y=2 push",
]


@pytest.mark.parametrize(
    "line", ["set -k; printenv x=1 x", "set -o keyword; printenv x=1 x", "set -ek; printenv x=1 x"]
)
def test_bash_moves_assignment_words_to_the_environment_after_set_k(line: str) -> None:
    """What the attack rests on: the word `x=1` after the name is no argument of printenv but its
    environment, from the next command of the same line on."""
    assert read_plain(line) is not None
    assert _bash(line) == "1\n"
    assert _bash(line.replace("k", "x", 1) if line.startswith("set -k") else "printenv x=1 x") == ""


@pytest.mark.parametrize("line", KEYWORD_LINES)
def test_a_denied_command_behind_assignment_words_after_set_k_is_denied(line: str) -> None:
    """`git x=1 push` is `git push` once `set -k` ran: the deny rule for `git push*` applies."""
    _, site = make_workspace()
    assert analyzer_action(line, site, DENY_LIST) == "deny"


@pytest.mark.parametrize(
    "line",
    [
        "set -k; cat LD_PRELOAD=./x.so a.txt",
        "set -o keyword; ls LD_PRELOAD=./x.so",
        "set -k; cat LD_LIBRARY_PATH=. a.txt",
        "shopt -so keyword; cat LD_PRELOAD=./x.so a.txt",
    ],
)
def test_an_allowed_command_given_an_environment_by_set_k_is_not_allowed(line: str) -> None:
    """`cat LD_PRELOAD=./x.so a.txt` after `set -k` runs cat with a preloaded library: the allow rule for
    `cat *` cannot cover the environment it is given."""
    _, site = make_workspace()
    assert analyzer_action(line, site, ALLOW_LIST) != "allow"


@pytest.mark.parametrize("line", ["set -e; make CC=gcc", "set -- -k; make CC=gcc", "make CC=gcc; set -k"])
def test_assignment_words_without_set_k_before_them_stay_arguments(line: str) -> None:
    _, site = make_workspace()
    assert analyzer_action(line, site, DENY_LIST) == "allow"


def test_set_k_lines_are_never_weaker_than_what_bash_ran(workspace: tuple[Path, CallSite]) -> None:
    observations, problems = _run_by_bash(KEYWORD_LINES, workspace)
    assert all(seen.execs and seen.execs[-1][-1] != "x=1" for seen in observations[:1])  # bash ran `git push`
    assert problems == []


@pytest.mark.parametrize("line", ["bash -k -c 'ls LD_PRELOAD=./x.so'", "sh -o keyword -c 'ls LD_PRELOAD=./x.so'"])
def test_a_shell_started_with_keyword_fails_closed(line: str) -> None:
    assert _bash("bash -k -c 'printenv x=1 x'") == "1\n"
    _, site = make_workspace()
    assert analyzer_action(line, site, DENY_LIST) == "ask"
    assert analyzer_action(line.replace(" -k", "").replace(" -o keyword", ""), site, DENY_LIST) == "allow"


@pytest.mark.parametrize(
    "line",
    [
        "set -k; eval 'git x=1 push'",
        "bash -k -c 'git x=1 push'",
        "bash -o keyword -c 'git x=1 push'",
        "set -k; bash -c 'cd sub && git x=1 push'",  # with SHELLOPTS exported, the child shell has -k too
    ],
)
def test_a_script_run_with_keyword_on_is_read_with_it(line: str) -> None:
    _, site = make_workspace()
    assert analyzer_action(line, site, DENY_LIST) == "deny"


def test_scripts_run_with_keyword_on_are_never_weaker_than_what_bash_ran(workspace: tuple[Path, CallSite]) -> None:
    lines = ["set -k; eval 'git x=1 push'", "bash -k -c 'git x=1 push'", "bash -o keyword -c 'git x=1 push'"]
    observations, problems = _run_by_bash(lines, workspace)
    assert [seen.execs[-1][-1] for seen in observations] == ["push", "push", "push"]
    assert problems == []


# -- `==` and `=~`: tree-sitter-bash drops them from a command's words (its `[[ ]]` operators leak out) --

DROPPED_LINES = [
    "grep -e == ../outside/secret > /dev/null",  # the tree read `grep -e ../outside/secret`: no file at all
    "grep -e == lnk/secret; echo $HOME",
    "grep -e =~ ../outside/secret 2>/dev/null",
    "X=1 grep -e == ../outside/secret",
]


@pytest.mark.parametrize("line", DROPPED_LINES)
def test_a_word_the_parser_drops_still_counts_as_a_word(line: str) -> None:
    """The plain-line reader read `grep -e == ../outside/secret` right and the tree walk did not: with a
    redirection (read from the tree) the outside file went unasked."""
    _, site = make_workspace()
    assert analyzer_action(line, site, DENY_LIST) == "ask"


def test_lines_with_dropped_words_are_never_weaker_than_what_bash_ran(workspace: tuple[Path, CallSite]) -> None:
    observations, problems = _run_by_bash(DROPPED_LINES, workspace)
    assert all(seen.outside for seen in observations)  # grep really read the file outside
    assert problems == []


@pytest.mark.parametrize(
    ("line", "pattern"), [("test a == b", "test a == b"), ("echo x == y > out.txt", "echo x == y > out.txt")]
)
def test_a_dropped_word_is_read_where_it_stands(line: str, pattern: str) -> None:
    _, site = make_workspace()
    requests = analyze_command(line, site)
    assert [request.patterns[0] for request in requests if request.permission == "bash"] == [pattern]
    assert analyzer_action(line, site, DENY_LIST) == "allow"


@pytest.mark.parametrize(
    ("line", "pattern"),
    [
        ("ls -a$ ../outside/secret > /dev/null", "ls -a$ ../outside/secret > /dev/null"),
        ("grep -e$ ../f", "grep -e$ ../f"),
    ],
)
def test_a_word_ending_in_a_dollar_the_parser_drops_is_read_whole(line: str, pattern: str) -> None:
    _, site = make_workspace()
    requests = analyze_command(line, site)
    assert any(request.permission == "external_directory" for request in requests), requests
    assert any(pattern in request.patterns for request in requests if request.permission == "bash"), requests


@pytest.mark.parametrize("line", ["ls $== ../f > /dev/null", "ls $=~ ../f"])
def test_a_dropped_token_that_is_no_literal_word_fails_closed(line: str) -> None:
    _, site = make_workspace()
    requests = analyze_command(line, site)
    assert any("dropped" in (request.reason or "") for request in requests), requests


# -- `cd` alone goes home: what follows reads there, as after `cd ~` -------------------------------------

HOME_LINES = ["cd && ls", "cd && grep -r secret", "cd -- ; ls -la", "cd -P && du", "cd -L || true; ls"]


@pytest.mark.parametrize("line", HOME_LINES)
def test_a_cd_without_a_directory_asks_for_home_as_cd_tilde_does(line: str) -> None:
    _, site = make_workspace()
    assert analyzer_action(line, site, DENY_LIST) == "ask"
    assert analyzer_action(line, site, ALLOW_LIST) != "allow"
    assert analyzer_action(line.replace("cd", "cd ~", 1), site, DENY_LIST) == "ask"


@pytest.mark.parametrize("line", ["ls && cd", "cd src && ls && cd"])
def test_a_final_cd_without_a_directory_still_asks_nothing(line: str) -> None:
    _, site = make_workspace()
    assert analyzer_action(line, site, DENY_LIST) == "allow"


def test_cd_home_lines_are_never_weaker_than_what_bash_ran(workspace: tuple[Path, CallSite]) -> None:
    observations, problems = _run_by_bash(HOME_LINES, workspace)
    assert all(str(workspace[0] / "home") in seen.outside for seen in observations)  # each listed or read home
    assert problems == []


@pytest.mark.parametrize(
    "line",
    ["set -k; cd HOME=. && cat ../outside/secret", "set -k; cd HOME=. && ls ..", "set -k; cd CDPATH=.. outside && ls"],
)
def test_cd_given_an_environment_by_set_k_goes_where_it_is_not_known(line: str) -> None:
    """After `set -k`, `cd HOME=.` is `cd` with HOME set to `.`: it stays where it is, and `..` is outside;
    the analyzer took `HOME=.` for a directory below the project."""
    _, site = make_workspace()
    assert analyzer_action(line, site, DENY_LIST) == "ask"
    assert analyzer_action(line, site, ALLOW_LIST) != "allow"


def test_set_k_cd_lines_are_never_weaker_than_what_bash_ran(workspace: tuple[Path, CallSite]) -> None:
    lines = ["set -k; cd HOME=. && cat ../outside/secret", "set -k; cd HOME=. && ls .."]
    observations, problems = _run_by_bash(lines, workspace)
    assert all(seen.outside for seen in observations)
    assert problems == []
