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

from ..permissions.model import UNNAMED

__all__ = ["WriteRule", "copies", "write_rules", "written"]

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
    unnamed: frozenset[str] = frozenset()
    """With one of these options (or, when it holds `*`, always) the command writes files named by
    its input into its target directory (`-C`, `-d`) or the working directory (`tar -x`, `unzip`)."""
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
            **{key: frozenset(row.get(key, ())) for key in ("when", "unnamed", "target", "values", "script", "assign")},
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
    out = _operands(rule, values[1:])
    if name in _URL_NAMED and not out:
        out.extend(_url_names(name, values[1:]))
    return out


_URL_NAMED = frozenset(("curl", "wget"))
_REMOTE_NAME = frozenset(("-O", "--remote-name", "--remote-name-all"))


def _remote_name(word: str | None) -> bool:
    """curl's `-O` (alone or in a cluster such as `-sO`): save under the URL's own name."""
    if word is None:
        return False
    return word in _REMOTE_NAME or (word[:1] == "-" and word[1:2] != "-" and "O" in word)


_COPIES = frozenset(("cp", "mv", "ln", "install", "rsync", "scp"))


def _url_names(name: str, words: Sequence[str | None]) -> list[str | None]:
    """`curl -O URL`, `wget URL`: the file is named after the URL's last path segment (wget: `index.html`
    when there is none)."""
    if name == "curl" and not any(_remote_name(word) for word in words):
        return []
    out: list[str | None] = []
    for word in words:
        if word is None:
            continue
        scheme, sep, rest = word.partition("://")
        if not sep or not scheme.isalpha():
            continue
        path = rest.partition("/")[2].split("?")[0].split("#")[0]
        base = posixpath.basename(path)
        out.append(base or ("index.html" if name == "wget" else None))
    return out


def copies(values: Sequence[str | None]) -> tuple[list[str | None], str | None] | None:
    """(sources, destination) of a command that copies or moves its operands into its last one (`cp`,
    `mv`, `ln`, `install`, `rsync`, `scp`): a destination directory receives files named after the
    sources (and, copied recursively, everything below them). None for other commands."""
    if not values or values[0] is None:
        return None
    name = posixpath.basename(values[0])
    rule = write_rules().get(name)
    if rule is None or name not in _COPIES:
        return None
    operands, targets, _ = _scan(rule, values[1:])
    if targets:
        return operands, targets[-1]
    if len(operands) == 1 and posixpath.basename(values[0]) == "ln":
        return operands, "."  # `ln -s TARGET`: a link named after the target, here
    if len(operands) < 2:
        return None
    return operands[:-1], operands[-1]


def _operands(rule: WriteRule, words: Sequence[str | None]) -> list[str | None]:
    operands, out, (enabled, script, unnamed) = _scan(rule, words)
    if unnamed:
        directory = out[-1] if out else "."
        out.append(None if directory is None else posixpath.join(directory, UNNAMED))
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


def _scan(
    rule: WriteRule, words: Sequence[str | None]
) -> tuple[list[str | None], list[str | None], tuple[bool, bool, bool]]:
    """(operands, option targets, (enabled, script, unnamed)) of a command's words under `rule`."""
    operands: list[str | None] = []
    out: list[str | None] = []
    enabled = not rule.when
    script = False
    unnamed = "*" in rule.unnamed
    index = 0
    options_done = False
    while index < len(words):
        word = words[index]
        index += 1
        if word is not None and index == 1 and rule.unnamed and not word.startswith("-"):
            # `tar xf a.tar`: the first word is a cluster of options without a dash.
            if any("-" + letter in rule.unnamed for letter in word):
                unnamed = True
                if "f" in word and index < len(words):
                    index += 1  # the archive
                continue
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
        option, equals, value = word.partition("=")
        if word.startswith("--") or (
            len(option) > 2 and option in rule.target | rule.values | rule.when | rule.unnamed
        ):  # long options, and single-dash long ones (`find -fprint`, `openssl -out`)
            enabled = enabled or option in rule.when
            unnamed = unnamed or option in rule.unnamed
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
            unnamed = unnamed or option in rule.unnamed
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
    return operands, out, (enabled, script, unnamed)


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
    if index < len(values) and values[index] in ("restore", "checkout"):
        # Pathspecs (after `--` for checkout) are worktree files the command writes.
        rest = values[index + 1 :]
        if values[index] == "checkout":
            rest = rest[rest.index("--") + 1 :] if "--" in rest else ()
        for word in rest:
            if word is None:
                out.append(None)
            elif not word.startswith("-"):
                out.append(posixpath.join(directory, word))
        return out
    if index < len(values) and values[index] in ("apply", "am"):
        checks = {"--check", "--stat", "--numstat", "--summary", "--show-current-patch"}
        rest = values[index + 1 :]
        if not any(word in checks for word in rest) or "--apply" in rest:
            out.append(posixpath.join(directory, UNNAMED))  # the patch names the files it writes
        return out
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
