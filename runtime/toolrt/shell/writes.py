"""The written-operands table (writes.yaml): which words of a command name files it writes.

`written(values)` takes a command's words (None for a word only known when it runs) and returns
the paths the command writes, as written (relative to its working directory, `~` unexpanded), with
None for a written operand that is only known when it runs. The bash analyzer turns them into the
`protected` request; writes a program makes on its own account (`git commit` into `.git/`) are not
operands and ask nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

__all__ = ["WriteRule", "write_rules", "written"]

Operands = Literal["last", "all", "all_but_first", "none"]
_GIT_CONFIG_WRITES = frozenset(
    ("--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section", "--edit", "-e")
)
_GIT_CONFIG_READS = frozenset(
    ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool", "--list", "-l")
)
_GIT_CONFIG_VERBS = {"set": True, "unset": True, "rename-section": True, "remove-section": True, "edit": True}
_GIT_VALUE_OPTIONS = frozenset(("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"))


@dataclass(frozen=True, slots=True)
class WriteRule:
    """One command's row of writes.yaml."""

    operands: Operands
    when: frozenset[str] = frozenset()
    target: frozenset[str] = frozenset()
    values: frozenset[str] = frozenset()
    script: frozenset[str] = frozenset()
    assign: frozenset[str] = frozenset()


@cache
def write_rules() -> Mapping[str, WriteRule]:
    """The packaged table, loaded once."""
    import yaml

    data: dict[str, Any] = yaml.safe_load(Path(__file__).with_name("writes.yaml").read_text(encoding="utf-8"))
    rules: dict[str, WriteRule] = {}
    for name, row in data["commands"].items():
        rules[name] = WriteRule(
            operands=row.get("operands", "all"),
            **{key: frozenset(row.get(key, ())) for key in ("when", "target", "values", "script", "assign")},
        )
    return rules


def written(values: Sequence[str | None]) -> list[str | None]:
    """The paths the command `values` (name first, wrappers already peeled) writes; None where unknown."""
    if not values or values[0] is None:
        return []
    name = posixpath.basename(values[0])
    if name == "git":
        return _git(values)
    rule = write_rules().get(name)
    if rule is None:
        return []
    return _operands(rule, values[1:])


def _operands(rule: WriteRule, words: Sequence[str | None]) -> list[str | None]:
    operands: list[str | None] = []
    out: list[str | None] = []
    enabled = not rule.when
    script = False
    index = 0
    options_done = False
    while index < len(words):
        word = words[index]
        index += 1
        if word is None or options_done or word == "-" or not word.startswith("-"):
            if word is not None and "=" in word and word.partition("=")[0] in rule.assign:
                out.append(word.partition("=")[2])
            elif word is not None and rule.assign and "=" in word:
                continue
            else:
                operands.append(word)
            continue
        if word == "--":
            options_done = True
            continue
        if word.startswith("--"):
            option, equals, value = word.partition("=")
            enabled = enabled or option in rule.when
            script = script or option in rule.script
            if option in rule.target:
                out.append(value if equals else (words[index] if index < len(words) else None))
            if not equals and (option in rule.values or option in rule.target):
                index += 1
            continue
        for position in range(1, len(word)):  # a cluster of short options: `-ni`, `-i.bak`, `-pe`
            option = "-" + word[position]
            attached = word[position + 1 :]
            enabled = enabled or option in rule.when
            script = script or option in rule.script
            if option in rule.when:
                break  # the rest is the option's suffix (`-i.bak`)
            if option in rule.values or option in rule.target:
                given = attached or (words[index] if index < len(words) else None)
                if not attached:
                    index += 1
                if option in rule.target:
                    out.append(given)
                break
    if not enabled:
        return []
    kind = "all" if rule.operands == "all_but_first" and script else rule.operands
    if kind == "last":
        out.extend(operands[-1:] if len(operands) > 1 else [])
    elif kind == "all":
        out.extend(operands)
    elif kind == "all_but_first":
        out.extend(operands[1:])
    return out


def _git(values: Sequence[str | None]) -> list[str | None]:
    """`git -c` and the set forms of `git config`: the config file they change."""
    index = 1
    directory = "."
    out: list[str | None] = []
    while index < len(values):
        word = values[index]
        if word is None or not word.startswith("-"):
            break
        option, equals, value = word.partition("=")
        following = values[index + 1] if index + 1 < len(values) else None
        if option == "-C":
            directory = following if following is not None else "."
            if following is None:
                return [None]
        if option in ("-c", "--config-env"):
            out.append(posixpath.join(directory, ".git/config"))
        index += 1 if equals or option not in _GIT_VALUE_OPTIONS else 2
    if index >= len(values) or values[index] != "config":
        return out
    config: str | None = posixpath.join(directory, ".git/config")
    arguments = values[index + 1 :]
    writes = False
    operands = 0
    position = 0
    while position < len(arguments):
        word = arguments[position]
        position += 1
        if word is None:
            operands += 1
            continue
        if position == 1 and word in _GIT_CONFIG_VERBS:
            writes = True
            continue
        option, equals, value = word.partition("=")
        if option in ("--global",):
            config = "~/.gitconfig"
        elif option == "--system":
            config = "/etc/gitconfig"
        elif option in ("--file", "-f"):
            config = value if equals else (arguments[position] if position < len(arguments) else None)
            position += 0 if equals else 1
        elif option in _GIT_CONFIG_WRITES:
            writes = True
        elif option in _GIT_CONFIG_READS:
            return out
        elif not word.startswith("-"):
            operands += 1
    if writes or operands >= 2:
        out.append(config)
    return out
