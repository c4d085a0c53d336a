"""The written-operands table (writes.yaml): which words of a command name files it writes.

`written(values)` takes a command's words (None for a word only known when it runs) and returns
the paths the command writes, as written (relative to its working directory, `~` unexpanded), with
None for a written operand that is only known when it runs. The bash analyzer turns them into the
`protected` request; writes a program makes on its own account (`git commit` into `.git/`) are not
operands and ask nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from ..config.resources import read_yaml
from ..permissions.model import UNNAMED
from .long_options import long_option

__all__ = ["WriteRule", "copies", "may_name_output", "may_write", "names_output", "write_rules", "written"]

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
    all_when: frozenset[str] = frozenset()
    """With one of these options every operand is written (`install -d`)."""
    into: frozenset[str] = frozenset()
    """With one of these options the last operand receives files named by the input (`cpio -p DIR`)."""
    prefix: frozenset[str] = frozenset()
    """Options whose value prefixes the names written (`csplit -f`); `operand: N` names an operand."""
    lists: frozenset[str] = frozenset()
    """With one of these options the command only lists, tests or prints (`unzip -l`): no writes."""
    unpack: frozenset[str] = frozenset()
    """With one of these options (`*`: always) the program decompresses: see `suffixes`."""
    suffixes: tuple[str, ...] = ()
    """What a compressor adds to each operand's name (the first) and strips when it decompresses (`gzip`:
    `FILE` writes `FILE.gz`, `gunzip FILE.gz` writes `FILE`); a name without one, or a suffix given by
    `-S`, is only known when it runs."""
    flags: frozenset[str] = frozenset()
    """Long options without a value that begin a longer one the row names (curl's `--head`, `--header`):
    each is read as itself (getopt_long prefers an exact name), never as an abbreviation."""
    long_options: tuple[str, ...] = ()
    """The long options the row names but `lists`, those that write first (`target`, `when`, `unnamed`,
    `all_when`, `into`, `prefix`, then `script`, `values`): what an abbreviation is read as (`_long_name`)."""


_WRITING = ("target", "when", "unnamed", "all_when", "into", "prefix", "unpack", "script", "values")
"""The row's sets of options that make or name a write, those that write first (`long_options`)."""


@cache
def write_rules() -> Mapping[str, WriteRule]:
    """The packaged table, loaded once."""
    data: dict[str, Any] = read_yaml(Path(__file__).with_name("writes.yaml"))
    rules: dict[str, WriteRule] = {}
    for name, row in data["commands"].items():
        sets = {key: frozenset(row.get(key, ())) for key in (*_WRITING, "assign", "lists", "flags")}
        long_options = (option for key in _WRITING for option in sorted(sets[key]) if option[:2] == "--")
        rules[name] = WriteRule(
            operands=row.get("operands", "all"),
            long_options=tuple(dict.fromkeys(long_options)),
            suffixes=tuple(row.get("suffixes", ())),
            **sets,
        )
    return rules


def _long_name(rule: WriteRule, option: str) -> str:
    """The long option of `rule` that `option` abbreviates (`--out` for sort's `--output`, `--in` for sed's
    `--in-place`), of several the first of `long_options` (one that writes); `option` itself when it is one
    of them, one of `flags`, or abbreviates none. `lists` is never read so: an abbreviation does not take a
    command's writes away."""
    if option in rule.flags:
        return option
    return long_option(option, rule.long_options) or option


def written(values: Sequence[str | None]) -> list[str | None]:
    """The paths the command `values` (name first, wrappers already peeled) writes; None where unknown."""
    if not values or values[0] is None:
        return []
    name = values[0].rpartition("/")[2]  # posixpath.basename
    if name == "git":
        return _git(values)
    rule = write_rules().get(name)
    if rule is None:
        return _unknown_program(values[1:])
    if rule.lists and any(_has(word, rule.lists, rule, abbreviated=False) for word in values[1:]):
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
    name = values[0].rpartition("/")[2]  # posixpath.basename
    if name not in _COPIES:
        return None
    rule = write_rules().get(name)
    if rule is None:
        return None
    operands, targets, _ = _scan(rule, values[1:])
    if targets:
        return operands, targets[-1]
    if len(operands) == 1 and posixpath.basename(values[0]) == "ln":
        return operands, "."  # `ln -s TARGET`: a link named after the target, here
    if len(operands) < 2:
        return None
    return operands[:-1], operands[-1]


_OUTPUT_OPTIONS = frozenset(("-o", "--output"))
_DIRECTORY_OPTIONS = frozenset(("--prefix", "--target-directory"))
_NAMING_PREFIXES = ("-o", "--o", *_OUTPUT_OPTIONS, *_DIRECTORY_OPTIONS)  # `--o`: a prefix of `--output`


def may_write(values: Sequence[str | None]) -> bool:
    """False when `written` and `copies` surely find nothing: a program without a row in the table
    (nor `git`) and none of the options by which an unknown program writes."""
    if not values or values[0] is None:
        return False
    name = values[0].rpartition("/")[2]
    return name == "git" or name in write_rules() or names_output(values)


def names_output(values: Sequence[str | None]) -> bool:
    """Whether a word after the command's name (`values[0]`) may be an option by which a program the table
    does not know writes a file (`may_name_output`): for such a program, all `may_write` reads."""
    for value in values[1:]:
        if value is not None and value.startswith(_NAMING_PREFIXES):  # may_name_output
            return True
    return False


def may_name_output(word: str) -> bool:
    """Whether `word` may be an option by which a program the table does not know writes a file
    (`-o`, `--output`, `--prefix`, `--target-directory`, with or without a value): without one, such
    a program writes no operand, and `written` has nothing to find."""
    return word.startswith(_NAMING_PREFIXES)


def _unknown_program(words: Sequence[str | None]) -> list[str | None]:
    """What a program the table does not know writes by the common options: the value of `-o` and
    `--output` (also by a prefix of its name, `--out`, as getopt_long and gpg read it), and anything in
    the directories `--prefix` and `--target-directory` name (not by a prefix: `pip install --pre`,
    `cargo build --target` name other options)."""
    out: list[str | None] = []
    for index, word in enumerate(words):
        if word is None or word[:1] != "-":
            continue
        option, equals, value = word.partition("=")
        if equals:
            given: str | None = value
        elif word[:2] == "-o" and len(word) > 2:
            option, given = "-o", word[2:]
        else:
            given = words[index + 1] if index + 1 < len(words) else ""
        if (option in _OUTPUT_OPTIONS or long_option(option, _OUTPUT_OPTIONS) is not None) and given != "":
            out.append(given)
        elif option in _DIRECTORY_OPTIONS and given != "":
            out.append(None if given is None else posixpath.join(given, UNNAMED))
    return out


def _prefixed(rule: WriteRule, words: Sequence[str | None], operands: list[str | None]) -> list[str | None]:
    """The directory that receives the files named after a prefix (`split FILE PREFIX`), as unnamed."""
    prefix: str | None = ""
    for entry in rule.prefix:
        if entry.startswith("operand:"):
            position = int(entry.partition(":")[2]) - 1
            if position < len(operands):
                prefix = operands[position]
            continue
        for index, word in enumerate(words):
            if word is not None and _long_name(rule, word.partition("=")[0]) == entry:
                prefix = word.partition("=")[2] if "=" in word else (words[index + 1] if index + 1 < len(words) else "")
            elif word is not None and len(entry) == 2 and word.startswith(entry) and len(word) > 2:
                prefix = word[2:]
    if prefix is None:
        return [None]
    return [posixpath.join(posixpath.dirname(prefix) or ".", UNNAMED)]


def _operands(rule: WriteRule, words: Sequence[str | None]) -> list[str | None]:
    operands, out, (enabled, script, unnamed) = _scan(rule, words)
    if unnamed:
        directory = out[-1] if out else "."
        out.append(None if directory is None else posixpath.join(directory, UNNAMED))
    if rule.prefix:
        out.extend(_prefixed(rule, words, operands))
    if rule.into and any(_has(word, rule.into, rule) for word in words) and operands:
        out.append(None if operands[-1] is None else posixpath.join(operands[-1], UNNAMED))
    if not enabled:
        return []
    if rule.all_when and any(_has(word, rule.all_when, rule) for word in words):
        return [*out, *operands]
    if rule.suffixes:
        out.extend(_renamed(rule, words, operands))
    kind = "all" if rule.operands == "all_but_first" and script else rule.operands
    if kind == "last":
        out.extend(operands[-1:] if len(operands) > 1 else [])
    elif kind == "all":
        out.extend(operands)
    elif kind == "all_but_first":
        out.extend(operands[1:])
    return out


_CUSTOM_SUFFIX = frozenset(("-S", "--suffix"))
_RECURSIVE = frozenset(("-r",))
_RECURSIVE_LONG = ("--recursive",)
_UNPACKED = {".tgz": ".tar", ".taz": ".tar", ".txz": ".tar", ".tbz2": ".tar", ".tbz": ".tar"}
"""A compressed archive's suffix → the name its unpacked file gets in its place (`a.tgz` → `a.tar`)."""


def _renamed(rule: WriteRule, words: Sequence[str | None], operands: list[str | None]) -> list[str | None]:
    """The files a compressor makes of `operands` (`suffixes`); None where the name is only known when it
    runs (a suffix given by `-S`, a name without a known suffix to strip, an operand only known then)."""
    custom = "-S" in rule.values and any(_has(word, _CUSTOM_SUFFIX, rule) for word in words)
    unpack = "*" in rule.unpack or any(_has(word, rule.unpack, rule) for word in words)
    recursive = any(
        _has(word, _RECURSIVE, rule) or long_option((word or "").partition("=")[0], _RECURSIVE_LONG) is not None
        for word in words
    )
    out: list[str | None] = []
    for operand in operands:
        if recursive and operand is not None:
            out.append(posixpath.join(operand, UNNAMED))  # every file below a directory operand
        if operand is None or operand == "-" or custom:
            out.append(None if operand != "-" else "")
        elif not unpack:
            out.append(operand + rule.suffixes[0])
        else:
            stripped = [
                operand[: -len(suffix)] + _UNPACKED.get(suffix, "")
                for suffix in rule.suffixes
                if operand.endswith(suffix)
            ]
            out.append(stripped[0] if stripped and stripped[0] else None)
    return out


def _has(word: str | None, options: frozenset[str], rule: WriteRule, *, abbreviated: bool = True) -> bool:
    """`word` is one of `options`, an abbreviation of one (`_long_name`, unless not `abbreviated`), or a
    cluster of short options holding one (`-dv`) before a letter of the row that takes a value: what
    follows that letter is its value (`unzip -d.l`, `gzip -Src`), not options."""
    if word is None or word[:1] != "-":
        return False
    name = word.partition("=")[0]
    if name in options or (abbreviated and _long_name(rule, name) in options):
        return True
    if word[1:2] == "-":
        return False
    for letter in word[1:]:
        option = "-" + letter
        if option in options:
            return True
        if option in rule.values or option in rule.target or option in rule.prefix:
            return False
    return False


class _Scanned:
    """What `_scan` has read of a command's words so far (mutated as it reads: a plain class)."""

    __slots__ = ("enabled", "index", "operands", "options_done", "out", "script", "unnamed")

    def __init__(self, *, enabled: bool, unnamed: bool) -> None:
        self.enabled = enabled
        self.unnamed = unnamed
        self.operands: list[str | None] = []
        self.out: list[str | None] = []
        self.script = False
        self.index = 0
        self.options_done = False

    def mark(self, rule: WriteRule, option: str) -> None:
        self.enabled = self.enabled or option in rule.when
        self.unnamed = self.unnamed or option in rule.unnamed
        self.script = self.script or option in rule.script


def _scan(
    rule: WriteRule, words: Sequence[str | None]
) -> tuple[list[str | None], list[str | None], tuple[bool, bool, bool]]:
    """(operands, option targets, (enabled, script, unnamed)) of a command's words under `rule`."""
    state = _Scanned(enabled=not rule.when, unnamed="*" in rule.unnamed)
    while state.index < len(words):
        word = words[state.index]
        state.index += 1
        if word is not None and state.index == 1 and rule.unnamed and not word.startswith("-"):
            # `tar xf a.tar`: the first word is a cluster of options without a dash.
            if any("-" + letter in rule.unnamed for letter in word):
                state.unnamed = True
                if "f" in word and state.index < len(words):
                    state.index += 1  # the archive
                continue
        if word is None or state.options_done or word == "-" or not word.startswith("-"):
            _scan_operand(rule, state, word)
        elif word == "--":
            state.options_done = True
        elif word.startswith("--") or (
            len(word.partition("=")[0]) > 2
            and word.partition("=")[0] in rule.target | rule.values | rule.when | rule.unnamed
        ):  # long options, and single-dash long ones (`find -fprint`, `openssl -out`)
            _scan_long(rule, state, word, words)
        else:
            _scan_cluster(rule, state, word, words)
    return state.operands, state.out, (state.enabled, state.script, state.unnamed)


def _scan_operand(rule: WriteRule, state: _Scanned, word: str | None) -> None:
    if word is not None and "=" in word and word.partition("=")[0] in rule.assign:
        state.out.append(word.partition("=")[2])
    elif word is None or not rule.assign or "=" not in word:
        state.operands.append(word)


def _scan_long(rule: WriteRule, state: _Scanned, word: str, words: Sequence[str | None]) -> None:
    option, equals, value = word.partition("=")
    option = _long_name(rule, option)
    state.mark(rule, option)
    if option in rule.target:
        state.out.append(value if equals else (words[state.index] if state.index < len(words) else None))
    if not equals and (option in rule.values or option in rule.target):
        state.index += 1


def _scan_cluster(rule: WriteRule, state: _Scanned, word: str, words: Sequence[str | None]) -> None:
    """A cluster of short options: `-ni`, `-i.bak`, `-pe`."""
    for position in range(1, len(word)):
        option = "-" + word[position]
        attached = word[position + 1 :]
        state.mark(rule, option)
        if option in rule.when:
            break  # the rest is the option's suffix (`-i.bak`)
        if option in rule.values or option in rule.target:
            given = attached or (words[state.index] if state.index < len(words) else None)
            if not attached:
                state.index += 1
            if option in rule.target:
                state.out.append(given)
            break


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
    subcommand = values[index] if index < len(values) else None
    rest = values[index + 1 :]
    writer = _GIT_WRITERS.get(subcommand or "") if index < len(values) else None
    if writer is not None:
        return out + writer(rest, directory)
    if subcommand in ("apply", "am"):
        checks = {"--check", "--stat", "--numstat", "--summary", "--show-current-patch", "--abort", "--quit"}
        if not any(word in checks for word in rest) or "--apply" in rest:
            out.append(posixpath.join(directory, UNNAMED))  # the patch names the files it writes
        return out
    if subcommand != "config":
        return out
    return out + _git_config(rest, directory)


def _git_pathspecs(checkout: bool, rest: Sequence[str | None], directory: str) -> list[str | None]:
    """Pathspecs of `git restore`, `git checkout` and `git rm`: worktree files the command writes or
    deletes. `git checkout` without `--` may take any operand for one (`git checkout HEAD~1 x`; the
    commit or branch is named too, harmlessly). `.`, `dir/` and magic pathspecs (`:(glob)*.yaml`)
    write files below them, unnamed."""
    if checkout and "--" in rest:
        rest = rest[list(rest).index("--") + 1 :]
    out: list[str | None] = []
    for word in rest:
        if word is None:
            out.append(None)
        elif word[:1] == ":":
            out.append(posixpath.join(directory, UNNAMED))
        elif word[:1] != "-":
            out.append(posixpath.join(directory, word))
            if word in (".", "..") or word.endswith("/"):
                out.append(posixpath.join(directory, word, UNNAMED))
    return out


def _git_restore(rest: Sequence[str | None], directory: str) -> list[str | None]:
    """`git restore PATH`: rewrites PATH (with `--staged` and without `--worktree`, only the index)."""
    staged = any(word in ("--staged", "-S") or _cluster_has(word, "S") for word in rest)
    worktree = any(word in ("--worktree", "-W") or _cluster_has(word, "W") for word in rest)
    return [] if staged and not worktree else _git_pathspecs(False, rest, directory)


def _cluster_has(word: str | None, letter: str) -> bool:
    return word is not None and word[:1] == "-" and word[1:2] != "-" and letter in word


def _git_checkout(rest: Sequence[str | None], directory: str) -> list[str | None]:
    return _git_pathspecs(True, rest, directory)


def _git_rm(rest: Sequence[str | None], directory: str) -> list[str | None]:
    """`git rm PATH`: deletes PATH (with `--cached`, only its index entry)."""
    return [] if "--cached" in rest else _git_pathspecs(False, rest, directory)


def _git_clean(rest: Sequence[str | None], directory: str) -> list[str | None]:
    """`git clean`: deletes untracked (with `-x`, ignored) files anywhere below; `-n` only lists them."""
    dry = any(
        word is not None and (word == "--dry-run" or word[:2] != "--" and word[:1] == "-" and "n" in word)
        for word in rest
    )
    return [] if dry else [posixpath.join(directory, UNNAMED)]


def _git_config(arguments: Sequence[str | None], directory: str) -> list[str | None]:
    """The config file `git config ARGUMENTS` changes (none when it only reads)."""
    config: str | None = posixpath.join(directory, ".git/config")
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
        if option in _GIT_CONFIG_FILES:
            config = _GIT_CONFIG_FILES[option]
        elif option in ("--file", "-f"):
            config = value if equals else (arguments[position] if position < len(arguments) else None)
            position += 0 if equals else 1
        elif option in _GIT_CONFIG_WRITES:
            writes = True
        elif option in _GIT_CONFIG_READS:
            return []
        elif not word.startswith("-"):
            operands += 1
    return [config] if writes or operands >= 2 else []


_GIT_CONFIG_FILES: Mapping[str, str] = {"--global": "~/.gitconfig", "--system": "/etc/gitconfig"}


# Options of git subcommands that take the next word as their value (so it is not an operand).
_GIT_SUB_VALUES = frozenset(
    (
        "-b", "--branch", "-o", "--origin", "-c", "--config", "--depth", "--reference", "-u", "--upload-pack",
        "--template", "--separate-git-dir", "-j", "--jobs", "--filter", "--shallow-since", "--shallow-exclude",
        "--reference-if-able", "--server-option", "--bundle-uri", "--object-format", "--ref-format", "-t",
        "--track", "-m", "--name", "--reason", "--orphan", "-B", "--initial-branch", "--shared",
    )
)  # fmt: skip


def _git_operands(words: Sequence[str | None]) -> list[str | None]:
    operands: list[str | None] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word is None or word[:1] != "-":
            operands.append(word)
        elif "=" not in word and word in _GIT_SUB_VALUES:
            skip = True
    return operands


def _git_clone(words: Sequence[str | None], directory: str) -> list[str | None]:
    """`git clone REPO [DIR]`: everything in DIR (named after REPO when absent), its config included."""
    operands = _git_operands(words)
    if len(operands) > 1:
        target = operands[1]
    elif operands and operands[0] is not None:
        target = posixpath.basename(operands[0].rstrip("/")).removesuffix(".git") or None
    else:
        return [None]
    return [None if target is None else posixpath.join(directory, target, UNNAMED)]


def _git_init(words: Sequence[str | None], directory: str) -> list[str | None]:
    """`git init [DIR]`: DIR itself (a protected name, such as `tools.d`); the repository's own
    internals are git's account, as for `git commit`, unless a template or a separate git directory
    fills them from elsewhere (hooks included)."""
    operands = _git_operands(words)
    target = operands[0] if operands else "."
    if target is None:
        return [None]
    out: list[str | None] = [posixpath.join(directory, target)] if operands else []
    if any(word is None or word.partition("=")[0] in ("--template", "--separate-git-dir") for word in words):
        out.append(posixpath.join(directory, target, ".git"))
    return out


def _git_worktree(words: Sequence[str | None], directory: str) -> list[str | None]:
    """`git worktree add DIR`: everything in DIR, and the repository's worktree records."""
    operands = _git_operands(words)
    if not operands or operands[0] != "add":
        return []
    if len(operands) < 2 or operands[1] is None:
        return [None]
    return [posixpath.join(directory, operands[1], UNNAMED), posixpath.join(directory, ".git/worktrees", UNNAMED)]


def _git_option_files(words: Sequence[str | None], directory: str) -> list[str | None]:
    """`--output=FILE` (diff, log, show), `-o`/`--output-directory DIR` (format-patch) and
    `--prefix=DIR/` (checkout-index): what they write."""
    out: list[str | None] = []
    for index, word in enumerate(words):
        if word is None:
            continue
        option, equals, value = word.partition("=")
        given = value if equals else (words[index + 1] if index + 1 < len(words) else "")
        if option == "--output":
            out.append(None if given is None else posixpath.join(directory, given))
        elif option in ("-o", "--output-directory", "--prefix"):
            if given is None:
                out.append(None)
            elif option == "--prefix":
                out.append(posixpath.join(directory, posixpath.dirname(given) or ".", UNNAMED))
            else:
                out.append(posixpath.join(directory, given, UNNAMED))
    return out


def _git_config_writers(verbs: frozenset[str], files: tuple[str, ...]) -> Callable[..., list[str | None]]:
    """`git remote add|set-url|…`, `git submodule add|set-url|…`: the config files they change."""

    def writes(words: Sequence[str | None], directory: str) -> list[str | None]:
        operands = _git_operands(words)
        if not operands or operands[0] not in verbs:
            return []
        out: list[str | None] = [posixpath.join(directory, file) for file in files]
        if operands[0] == "add" and ".gitmodules" in files and len(operands) > 1:  # `submodule add URL [PATH]`
            url = operands[1]
            path = (
                operands[2] if len(operands) > 2 else (url and posixpath.basename(url.rstrip("/")).removesuffix(".git"))
            )
            out.append(posixpath.join(directory, path, UNNAMED) if path else None)
        return out

    return writes


_GIT_WRITERS: Mapping[str, Callable[[Sequence[str | None], str], list[str | None]]] = {
    "restore": _git_restore,
    "checkout": _git_checkout,
    "rm": _git_rm,
    "clean": _git_clean,
    "clone": _git_clone,
    "init": _git_init,
    "worktree": _git_worktree,
    "diff": _git_option_files,
    "log": _git_option_files,
    "show": _git_option_files,
    "format-patch": _git_option_files,
    "checkout-index": _git_option_files,
    "remote": _git_config_writers(
        frozenset(("add", "set-url", "rename", "remove", "rm", "set-head", "set-branches", "prune")),
        (".git/config",),
    ),
    "submodule": _git_config_writers(
        frozenset(("add", "set-url", "set-branch", "init", "sync", "deinit", "absorbgitdirs")),
        (".gitmodules", ".git/config"),
    ),
}
