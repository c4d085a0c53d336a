"""Everyday work stays quiet (issue 11, item 3): the analyzer reads ordinary commands literally.

Each command of tests/corpus/bash_everyday.txt gets the action a literal reading of the rules
gives: the line split at `;`, `&&`, `||`, `|`, `&` and parentheses (quotes respected, with
`shlex`), each simple command matched as written (leading `VAR=value` dropped, shell keywords
skipped, `cd` and inert builtins asking nothing), and any operand or redirect target that names a
place outside the project asking `external_directory`. At least 95% must agree with the analyzer
under both of the issue's rulesets; the rate is printed for the closing note.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from bash_oracle import ALLOW_LIST, DENY_LIST, analyzer_action, make_workspace

from toolrt.permissions.model import Action, CallSite, strictest
from toolrt.permissions.rules import Ruleset

CORPUS = Path(__file__).with_name("corpus") / "bash_everyday.txt"
COMMANDS = [
    line for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")
]
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
