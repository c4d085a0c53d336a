"""Everyday work stays quiet (issue 11, item 3; issue 26's Show): the analyzer reads ordinary commands
as a careful reviewer would.

Each line of tests/corpus/bash_everyday.txt carries the action a careful reviewer expects under the
issue's deny-list (`bash: {"*": allow, "rm *": deny, "git push*": deny, "curl *": deny}`) and allow-list
(`bash: {"*": ask, <common read-only commands>: allow}`), each with the built-in rules inherited and with
`inherit: false`: four real projects, decided through `Runtime.check_call` as a bash call would be. At
least 99% must agree under each, and no line that should ask or deny may be allowed; the rates and the
differences are printed for the closing note.

The same commands also get the action a literal reading of the rules gives (the older check): the line
split at `;`, `&&`, `||`, `|`, `&` and parentheses (quotes respected, with `shlex`), each simple command
matched as written (leading `VAR=value` dropped, shell keywords skipped, `cd` and inert builtins asking
nothing), and any operand or redirect target that names a place outside the project asking
`external_directory`. At least 95% must agree with the analyzer under the oracle's two rulesets.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from bash_oracle import ALLOW_LIST, DENY_LIST, analyzer_action, make_workspace

from toolrt.api import Runtime
from toolrt.permissions.model import Action, CallSite, strictest
from toolrt.permissions.rules import Ruleset

CORPUS = Path(__file__).with_name("corpus") / "bash_everyday.txt"
ROWS = [line.split(None, 2) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line and line[0] != "#"]
COMMANDS = [command for _, _, command in ROWS]
# The rulesets of issue 26's Show, as a project's permissions.yaml writes them.
REVIEWED_RULES = {
    "deny_list": {"*": "allow", "rm *": "deny", "git push*": "deny", "curl *": "deny"},
    "allow_list": {
        "*": "ask",
        **dict.fromkeys(
            ("ls", "ls *", "cat *", "head *", "tail *", "wc *", "grep *", "rg *", "git status*", "git diff*",
             "git log*", "git show*", "git blame *", "pwd", "echo *", "which *", "jq *", "tree", "tree *", "du *",
             "stat *", "file *"),
            "allow",
        ),
    },
}  # fmt: skip
# The project every line runs in (the files the corpus names; `../outside` next to it).
PROJECT_FILES = {
    "src/main.py": "print('main')\n",
    "src/util.py": "x = 1\n",
    "src/app.py": "app = 1\n",
    "tests/test_app.py": "def test_app():\n    pass\n",
    "README.md": "# app\n",
    "Makefile": "all:\n\ttrue\n",
    "package.json": "{}\n",
    "pyproject.toml": "[project]\n",
    "docs/index.md": "docs\n",
    ".env": "KEY=1\n",
    ".gitignore": "*.pyc\n",
    "data.csv": "a,b,c\n",
    "config.json": "{}\n",
    "app.log": "ERROR x\n",
    "names.txt": "a\n",
    "scripts/deploy.sh": "#!/bin/sh\necho deploy\n",
    "archive.tar.gz": "",
    "../outside/secret": "secret\n",
}
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}
_SEPARATORS = frozenset((";", "&&", "||", "|", "&", "(", ")", ";;", "|&"))
_REDIRECTS = frozenset((">", ">>", "<", ">|", "&>", "&>>", "<<<"))
_KEYWORDS = frozenset(("if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time"))
_TEXT_ONLY = frozenset(("echo", "printf"))  # their operands are text, never paths (issue 26, item 6)
_SILENT = frozenset(("cd", "true", "false", ":", "set", "shopt", "export", "local", "declare", "unset", "readonly"))


@pytest.fixture(scope="module")
def site() -> Iterator[CallSite]:
    _, call_site = make_workspace()
    yield call_site


def literal_action(line: str, ruleset: Ruleset, site: CallSite) -> Action:
    """The action a person reading the line literally would expect from the rules."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return "ask"
    action: Action = "allow"
    command: list[str] = []
    named: list[str] = []  # tokens that may name places: not the text operands of echo and printf
    for token in [*tokens, ";"]:
        if token in _SEPARATORS:
            action = strictest(action, _command_action(command, ruleset))
            named.extend(command if not command or command[0] not in _TEXT_ONLY else ())
            command = []
        else:
            command.append(token)
    root = str(site.root)
    for token in named:
        value = token.partition("=")[2] if token.startswith("-") else token
        if _outside(value, root, str(site.home)):
            rule = ruleset.evaluate("external_directory", "x")
            action = strictest(action, rule.action if rule is not None else "ask")
    return action


def _command_action(words: list[str], ruleset: Ruleset) -> Action:
    while words and (words[0] in _KEYWORDS or ("=" in words[0] and words[0].split("=")[0].isidentifier())):
        words = words[1:]
    kept: list[str] = []
    skip = False
    for word in words:  # redirections are not part of the command's words
        if skip:
            skip = False
        elif word in _REDIRECTS or word.rstrip("0123456789") in ("", ">", ">>") and word[-1:] in "<>":
            skip = True
        elif word not in ("2", ">&", "1"):
            kept.append(word)
    if not kept or kept[0] in _SILENT or kept[0] in ("for", "case", "in"):
        return "allow"
    rule = ruleset.evaluate("bash", " ".join(kept))
    return rule.action if rule is not None else "ask"


def _outside(word: str, root: str, home: str) -> bool:
    if word.startswith("~"):
        word = home + word[1:]
    elif word.startswith("$HOME"):
        word = home + word[5:]
    if word in ("/dev/null", "") or word.startswith(("http://", "https://", "/dev/fd/")):
        return False
    if word.startswith("/"):
        return not (word == root or word.startswith(root + "/"))
    if ".." in word.split("/"):
        normal = posixpath.normpath(posixpath.join(root, word))
        return not (normal == root or normal.startswith(root + "/"))
    return False


def test_the_everyday_corpus_has_five_hundred_commands() -> None:
    assert len(COMMANDS) >= 500
    assert len(set(COMMANDS)) == len(COMMANDS)
    assert all(action.split("/")[0] in _STRICTNESS for row in ROWS for action in row[:2])


def _expected(written: str, inherit: bool) -> Action:
    """`allow`, or `ask/allow`: the first with the built-in rules inherited, the second without them."""
    inherited, _, alone = written.partition("/")
    action = inherited if inherit or not alone else alone
    assert action in _STRICTNESS, written
    return action  # type: ignore[return-value]


@pytest.fixture(scope="module")
def reviewed_projects(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], Runtime]:
    """One project per ruleset, with the built-in rules inherited and with `inherit: false`."""
    projects: dict[tuple[str, bool], Runtime] = {}
    for name, rules in REVIEWED_RULES.items():
        for inherit in (True, False):
            root = tmp_path_factory.mktemp(f"{name}-{inherit}") / "project"
            for relative, text in PROJECT_FILES.items():
                path = root / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            for directory in ("build", "logs", ".git"):
                (root / directory).mkdir()
            lines = [] if inherit else ["inherit: false"]
            lines += ["permission:", "  bash:", *(f'    "{pattern}": {action}' for pattern, action in rules.items())]
            (root / "permissions.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
            projects[(name, inherit)] = Runtime.load(root)
    return projects


@pytest.mark.parametrize("name", ["deny_list", "allow_list"])
@pytest.mark.parametrize("inherit", [True, False], ids=["inherited", "inherit_false"])
def test_everyday_lines_get_the_action_a_careful_reviewer_expects(
    reviewed_projects: dict[tuple[str, bool], Runtime], name: str, inherit: bool
) -> None:
    runtime = reviewed_projects[(name, inherit)]
    column = 0 if name == "deny_list" else 1
    differ: list[str] = []
    allowed: list[str] = []
    for row in ROWS:
        command = row[2]
        expected = _expected(row[column], inherit)
        decision, _ = runtime.check_call("bash", {"command": command, "description": "everyday"})
        if decision.action != expected:
            differ.append(f"{command!r}: expected {expected}, analyzer {decision.action}")
            if expected != "allow" and decision.action == "allow":
                allowed.append(differ[-1])
    rate = 1 - len(differ) / len(ROWS)
    setting = "inherited" if inherit else "inherit: false"
    print(f"\n{name} ({setting}): {rate:.2%} of {len(ROWS)} everyday lines as expected; differ:\n" + "\n".join(differ))
    assert allowed == [], "lines that should ask or deny were allowed:\n" + "\n".join(allowed)
    assert rate >= 0.99, "\n".join(differ)


@pytest.mark.parametrize("name", ["allow_list", "deny_list"])
def test_everyday_commands_get_the_literal_reading(site: CallSite, name: str) -> None:
    ruleset = ALLOW_LIST if name == "allow_list" else DENY_LIST
    differ = []
    for command in COMMANDS:
        expected = literal_action(command, ruleset, site)
        got = analyzer_action(command, site, ruleset)
        if got != expected:
            differ.append(f"{command!r}: literal {expected}, analyzer {got}")
    rate = 1 - len(differ) / len(COMMANDS)
    print(f"\n{name}: {rate:.1%} of {len(COMMANDS)} everyday commands read literally; differ:\n" + "\n".join(differ))
    assert rate >= 0.95, "\n".join(differ)


@pytest.mark.parametrize(
    ("line", "allow_list", "deny_list"),
    [
        ("git status && ls -la", "allow", "allow"),
        ("rm -rf build", "deny", "deny"),
        ("cat ../x", "ask", "ask"),
        ("X=1 make test", "deny", "allow"),
        ("for f in a b; do echo $f; done", "allow", "allow"),
        ("git push origin main 2>&1 | tail", "deny", "deny"),
    ],
)
def test_the_literal_reading_itself(site: CallSite, line: str, allow_list: str, deny_list: str) -> None:
    assert literal_action(line, ALLOW_LIST, site) == allow_list
    assert literal_action(line, DENY_LIST, site) == deny_list
