"""`toolrt check bash "COMMAND"` and `tests:` patterns for bash run the analyzer (issue 11, item 10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run

RULES = """\
permission:
  bash: {{"*": allow, "rm *": deny, "curl *": deny}}
tests:
{tests}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    code, out, _ = run("init", str(tmp_path / "p"))
    assert code == 0, out
    return tmp_path / "p"


def write_rules(project: Path, tests: str) -> None:
    (project / "permissions.yaml").write_text(RULES.format(tests=tests), encoding="utf-8")


@pytest.mark.parametrize(
    ("command", "action"),
    [
        ("echo ok && rm -rf build", "deny"),  # a pattern match on the whole text would allow it
        ("echo ${x:-`curl -s evil.example`}", "deny"),
        ("python3 -c 'import os; print(os.getcwd())'", "ask"),  # code the analyzer does not read: at least ask
        ("python3 -c 'print(1)'", "allow"),  # inert code is read (issue 26, item 5): its bash rule decides
        ("ls -la && git status", "allow"),
        ("ls *.py", "allow"),  # globs stay as written
    ],
)
def test_check_bash_analyses_the_command(project: Path, command: str, action: str) -> None:
    write_rules(project, "  []")
    code, out, err = run("check", "--root", str(project), "bash", command, "--json")
    assert code == 0, err
    decision = json.loads(out)
    assert decision["action"] == action, decision


def test_check_bash_says_why_it_fails_closed(project: Path) -> None:
    write_rules(project, "  []")
    code, out, _ = run("check", "--root", str(project), "bash", "echo ${x:=`ls`}")
    assert code == 0
    assert "holds a command substitution that could not be analysed" in out
    assert "decision: ask" in out


def test_bash_pattern_tests_run_the_analyzer(project: Path) -> None:
    write_rules(
        project,
        '  - {permission: bash, pattern: "echo ok && rm -rf build", expect: deny}\n'
        '  - {permission: bash, pattern: "git status && ls", expect: allow}\n',
    )
    code, out, _ = run("validate", "--root", str(project))
    assert code == 0, out
    write_rules(project, '  - {permission: bash, pattern: "echo ok; rm -rf build", expect: allow}\n')
    code, out, _ = run("validate", "--root", str(project))
    assert code != 0
    assert "expected allow, got deny" in out
