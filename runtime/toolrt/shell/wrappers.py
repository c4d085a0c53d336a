"""The wrapper table: commands that run other commands, loader variables, global options (wrappers.yaml).

The packaged `wrappers.yaml` is the default; `WrapperTable.extended(data)` layers a user's entries
over it (same shape as the file), so projects can teach the analyzer about their own runners.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, cast

from ..config.resources import read_yaml
from ..errors import ConfigError, Problem

__all__ = ["GlobalOptions", "ShellDialect", "Wrapper", "WrapperKind", "WrapperTable", "default_wrappers"]

WrapperKind = Literal["command", "shell", "script", "argument", "find", "none"]
_KINDS: frozenset[str] = frozenset(("command", "shell", "script", "argument", "find", "none"))
_LIST_FIELDS = ("options_with_value", "stop_options", "script_options", "exec_options")
_WRAPPER_FIELDS = frozenset((*_LIST_FIELDS, "kind", "positionals", "assignments", "dialect", "feeds"))
ShellDialect = Literal["bash", "other"]
_DIALECTS: frozenset[str] = frozenset(("bash", "other"))
_EMPTY: frozenset[str] = frozenset()
_TOP_KEYS = ("wrappers", "dangerous_env", "global_options", "unseen", "code_options", "subcommands", "follow_options")


@dataclass(frozen=True, slots=True)
class Wrapper:
    """How one wrapper command finds the command it runs (see the field notes in wrappers.yaml)."""

    name: tuple[str, ...]
    kind: WrapperKind = "command"
    options_with_value: frozenset[str] = _EMPTY
    stop_options: frozenset[str] = _EMPTY
    script_options: frozenset[str] = _EMPTY
    exec_options: frozenset[str] = _EMPTY
    positionals: int = 0
    assignments: bool = False
    dialect: ShellDialect = "bash"
    """(kind shell) `other`: the shell's language is not bash's (zsh, ksh), so its scripts are not read."""
    feeds: bool = False
    """The inner command gets more words when it runs (xargs from its input, find the file names): an
    inner command that is itself a wrapper may be made to run anything by them."""


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    """Options a command accepts before its subcommand, and those that make it always ask."""

    options_with_value: frozenset[str]
    ask: Mapping[str, str]
    """Option → the reason shown when it is present."""
    harmless: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    """Option in `ask` → the settings (`name=value`, the name lowercased and matched by fnmatch) that
    cannot run anything, with which it does not ask (`git -c color.ui=never`)."""


@dataclass(frozen=True, slots=True)
class WrapperTable:
    """Everything the analyzer knows about wrappers; immutable, built once and shared."""

    wrappers: Mapping[tuple[str, ...], Wrapper]
    dangerous_env: frozenset[str]
    """Exact variable names."""
    dangerous_env_prefixes: tuple[str, ...]
    """Prefixes from entries ending in `*`."""
    global_options: Mapping[str, GlobalOptions]
    unseen: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Command → why what it does cannot be seen (it rewrites the command table, runs code unseen)."""
    code_options: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    """Program → options whose value is code in another language (`python -c`)."""
    subcommands: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    """Command → its subcommands; another word there may be a configured alias (`git` `!` aliases)."""
    follow_options: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    """Program → options that make it follow symlinks while it walks directories (`grep -R`, `find -L`)."""
    _by_first_word: Mapping[str, tuple[Wrapper, ...]] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, compare=False
    )
    _described: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    _last_words: Mapping[str, frozenset[str]] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, compare=False
    )
    """First word → the last words of the wrappers' names that start with it, when every one of them has
    more than one word (`git`: `foreach`, `grep`): a command holding none of them names none of them."""
    facts: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Command name → its `facts.ProgramFacts`, derived from this table (and the packaged ones) on
    first use and kept with it: each line reads one record per command instead of a dozen tables."""

    def __post_init__(self) -> None:
        index: dict[str, list[Wrapper]] = {}
        for name, wrapper in self.wrappers.items():
            index.setdefault(name[0], []).append(wrapper)
        # Longest names first, so the first full match is the most specific (`uv tool run`, `uv run`).
        by_first = {first: tuple(sorted(found, key=lambda w: -len(w.name))) for first, found in index.items()}
        # Private indexes as dicts, not read-only views (whose `get` costs twice as much): read per command.
        object.__setattr__(self, "_by_first_word", by_first)
        last_words = {
            first: frozenset(wrapper.name[-1] for wrapper in found)
            for first, found in by_first.items()
            if all(len(wrapper.name) > 1 for wrapper in found)
        }
        object.__setattr__(self, "_last_words", last_words)
        described = (*self.unseen, *self.code_options, *self.subcommands, *self.follow_options)
        object.__setattr__(self, "_described", frozenset(described))

    def _named_from(self, words: Sequence[str | None], start: int) -> tuple[Wrapper, ...]:
        """The wrappers whose name `words[start]` may begin (by basename, longest first), none when not one of
        their names' last words is among `words` (the common case, `git commit`: one set test)."""
        first = words[start]
        if first is None:
            return ()
        base = first.rpartition("/")[2]
        last = self._last_words.get(base)
        if last is not None and last.isdisjoint(words):
            return ()
        return self._by_first_word.get(base, ())

    def match(self, words: Sequence[str | None], start: int) -> Wrapper | None:
        """The wrapper that `words[start:]` begins with (first word by basename, longest name wins)."""
        for wrapper in self._named_from(words, start):
            name = wrapper.name
            if start + len(name) <= len(words) and tuple(words[start + 1 : start + len(name)]) == name[1:]:
                return wrapper
        return None

    def match_past_options(
        self, words: Sequence[str | None], takes_value: frozenset[str]
    ) -> tuple[Wrapper, list[str | None]] | None:
        """The wrapper `words` names when the options standing before or between the words of its name are
        left out (`git -C sub submodule -q foreach CMD`; options in `takes_value` take the next word), and
        the words without them; None when no wrapper's name is there. Another option may take a value too
        (`npm --prefix dir exec`, `tmux -L name new-session`): a word after it that is not the name's is
        passed over as its value."""
        if not words:
            return None
        for wrapper in self._named_from(words, 0):
            if wrapper.name[-1] not in words:  # no word of the name is there
                continue
            kept: list[str | None] = [words[0]]
            index = 1
            for part in wrapper.name[1:]:
                while index < len(words) and (word := words[index]) is not None and word[:1] == "-" and word != "--":
                    index += 2 if "=" not in word and word in takes_value else 1
                    following = words[index] if index < len(words) else None
                    if "=" not in word and following is not None and following[:1] != "-" and following != part:
                        index += 1
                if index >= len(words) or words[index] != part:
                    break
                kept.append(part)
                index += 1
            else:
                return wrapper, [*kept, *words[index:]]
        return None

    def may_wrap(self, program: str) -> bool:
        """Whether some wrapper's name starts with `program` (a basename)."""
        return program in self._by_first_word

    def describes(self, program: str) -> bool:
        """Whether the command, code-option, subcommand or follow-option tables name `program` (a
        basename, also with its version stripped): for any other, none of them has anything to say."""
        return program in self._described or program.rstrip("0123456789.-") in self._described

    def code_options_of(self, program: str) -> frozenset[str] | None:
        """The code-carrying options of `program` (by basename, version stripped), None if not listed."""
        base = program.rpartition("/")[2]
        found = self.code_options.get(base)
        if found is None:
            found = self.code_options.get(base.rstrip("0123456789.-"))
        return found

    def is_dangerous_env(self, name: str) -> bool:
        """True for variables that load code or pick programs (`LD_PRELOAD`, `PATH`, `GIT_CONFIG_*`)."""
        return name in self.dangerous_env or name.startswith(self.dangerous_env_prefixes)

    def extended(self, data: Mapping[str, Any], *, source: str = "<wrappers>") -> WrapperTable:
        """A new table with `data` (the wrappers.yaml shape) layered over this one.

        Wrappers and global options with the same name replace the existing entry; dangerous
        variables are added. Raises `ConfigError` naming the bad entry when `data` is malformed.
        """
        problems: list[Problem] = []
        wrappers = dict(self.wrappers)
        globals_ = dict(self.global_options)
        exact = set(self.dangerous_env)
        prefixes = list(self.dangerous_env_prefixes)
        unseen = dict(self.unseen)
        code_options = dict(self.code_options)
        subcommands = dict(self.subcommands)
        follow_options = dict(self.follow_options)
        unknown = set(data) - set(_TOP_KEYS)
        for key in sorted(unknown):
            problems.append(_problem(source, f"/{key}", f"unknown key {key!r} (expected {', '.join(_TOP_KEYS)})"))
        for name, reason in _mapping(data.get("unseen"), source, "/unseen", problems).items():
            if not isinstance(reason, str) or not reason:
                problems.append(_problem(source, f"/unseen/{_escape(str(name))}", "expected the reason, a string"))
                continue
            unseen[str(name)] = reason
        for key, target in (
            ("code_options", code_options),
            ("subcommands", subcommands),
            ("follow_options", follow_options),
        ):
            for name, items in _mapping(data.get(key), source, f"/{key}", problems).items():
                target[str(name)] = frozenset(_list(items, source, f"/{key}/{_escape(str(name))}", problems))
        for name, spec in _mapping(data.get("wrappers"), source, "/wrappers", problems).items():
            wrapper = _wrapper(str(name), spec, source, problems)
            if wrapper is not None:
                wrappers[wrapper.name] = wrapper
        _add_dangerous_env(data.get("dangerous_env"), source, problems, exact, prefixes)
        _add_global_options(data.get("global_options"), source, problems, globals_)
        if problems:
            raise ConfigError(problems)
        return WrapperTable(
            MappingProxyType(wrappers),
            frozenset(exact),
            tuple(prefixes),
            MappingProxyType(globals_),
            MappingProxyType(unseen),
            MappingProxyType(code_options),
            MappingProxyType(subcommands),
            MappingProxyType(follow_options),
        )

    @classmethod
    def empty(cls) -> WrapperTable:
        """A table that knows no wrappers (the base for `extended`)."""
        return cls(MappingProxyType({}), _EMPTY, (), MappingProxyType({}))

    @classmethod
    def load(cls, path: Path, *, base: WrapperTable | None = None) -> WrapperTable:
        """Read a wrappers file and layer it over `base` (the packaged table by default)."""
        import yaml

        try:
            data = read_yaml(path)
        except yaml.YAMLError as error:
            raise ConfigError([_problem(str(path), "", f"not valid YAML: {error}")]) from error
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ConfigError([_problem(str(path), "", "expected a mapping with a `wrappers` key")])
        return (base if base is not None else default_wrappers()).extended(data, source=str(path))


@cache
def default_wrappers() -> WrapperTable:
    """The packaged table, read once."""
    return WrapperTable.load(Path(__file__).with_name("wrappers.yaml"), base=WrapperTable.empty())


def _wrapper(name: str, spec: object, source: str, problems: list[Problem]) -> Wrapper | None:
    pointer = f"/wrappers/{_escape(name)}"
    spec_map = _mapping(spec, source, pointer, problems)
    words = tuple(name.split())
    if not words:
        problems.append(_problem(source, pointer, "a wrapper needs a name"))
        return None
    for key in sorted(set(spec_map) - _WRAPPER_FIELDS):
        problems.append(_problem(source, f"{pointer}/{key}", f"unknown field {key!r}"))
    kind = spec_map.get("kind", "command")
    if kind not in _KINDS:
        problems.append(_problem(source, f"{pointer}/kind", f"kind {kind!r} is not one of {', '.join(sorted(_KINDS))}"))
        return None
    positionals = spec_map.get("positionals", 0)
    if not isinstance(positionals, int) or isinstance(positionals, bool) or positionals < 0:
        problems.append(_problem(source, f"{pointer}/positionals", "positionals must be a whole number >= 0"))
        return None
    assignments = spec_map.get("assignments", False)
    feeds = spec_map.get("feeds", False)
    for key, flag in (("assignments", assignments), ("feeds", feeds)):
        if not isinstance(flag, bool):
            problems.append(_problem(source, f"{pointer}/{key}", f"{key} must be true or false"))
            return None
    dialect = spec_map.get("dialect", "bash")
    if dialect not in _DIALECTS:
        problems.append(_problem(source, f"{pointer}/dialect", f"dialect {dialect!r} is not one of bash, other"))
        return None
    lists = {key: frozenset(_list(spec_map.get(key), source, f"{pointer}/{key}", problems)) for key in _LIST_FIELDS}
    return Wrapper(
        words,
        cast(WrapperKind, kind),
        lists["options_with_value"],
        lists["stop_options"],
        lists["script_options"],
        lists["exec_options"],
        positionals,
        assignments,
        cast(ShellDialect, dialect),
        feeds,
    )


def _add_dangerous_env(
    value: object, source: str, problems: list[Problem], exact: set[str], prefixes: list[str]
) -> None:
    """`dangerous_env`: names, or prefixes ending in `*`."""
    for index, entry in enumerate(_list(value, source, "/dangerous_env", problems)):
        if entry.endswith("*"):
            prefixes.append(entry[:-1])
        else:
            exact.add(entry)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?", entry):
            problems.append(_problem(source, f"/dangerous_env/{index}", f"{entry!r} is not a variable name"))


def _add_global_options(
    value: object, source: str, problems: list[Problem], globals_: dict[str, GlobalOptions]
) -> None:
    """`global_options`: per command, the options that take a value and those that make it ask."""
    for name, spec in _mapping(value, source, "/global_options", problems).items():
        pointer = f"/global_options/{_escape(str(name))}"
        spec_map = _mapping(spec, source, pointer, problems)
        options = _list(spec_map.get("options_with_value"), source, pointer + "/options_with_value", problems)
        ask = _mapping(spec_map.get("ask"), source, pointer + "/ask", problems)
        harmless = _mapping(spec_map.get("harmless"), source, pointer + "/harmless", problems)
        globals_[str(name)] = GlobalOptions(
            frozenset(options),
            MappingProxyType({str(k): str(v) for k, v in ask.items()}),
            MappingProxyType(
                {
                    str(k): frozenset(_list(v, source, f"{pointer}/harmless/{_escape(str(k))}", problems))
                    for k, v in harmless.items()
                }
            ),
        )


def _mapping(value: object, source: str, pointer: str, problems: list[Problem]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    problems.append(_problem(source, pointer, f"expected a mapping, got {type(value).__name__}"))
    return {}


def _list(value: object, source: str, pointer: str, problems: list[Problem]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    problems.append(_problem(source, pointer, "expected a list of strings"))
    return []


def _problem(source: str, pointer: str, message: str) -> Problem:
    return Problem(source, 0, 0, pointer, message)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
