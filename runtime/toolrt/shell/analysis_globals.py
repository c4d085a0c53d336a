"""Programs with global options (`git -C dir -c k=v push`): the command without them, for the rules
and the wrapper table, and its subcommand."""

from __future__ import annotations

from fnmatch import fnmatchcase

from .analysis_scripts import ScriptChecks
from .unwrap import unwrap
from .wrappers import Wrapper

__all__ = ["GlobalOptionChecks"]


class GlobalOptionChecks(ScriptChecks):
    """What a program's global options hide: its subcommand, and a wrapper named after them."""

    __slots__ = ()

    def _wrapper(
        self, values: list[str | None], first: int, mine: list[str | None], text: str, fed: bool = False
    ) -> Wrapper | None:
        """The wrapper the command `values[first:]` (`mine`) begins with; a wrapper named only past options
        (the program's global options, or its subcommand's) is not read, and fails the command closed,
        as it does with nothing to run yet when a feeder (`fed`: xargs, find) adds words to it."""
        wrapper = self.table.match(values, first)
        head = values[first] or ""
        if wrapper is None and self._wraps_past_options(head, mine, fed):
            self.findings.fail_closed(
                text,
                f"`{head}` runs a command named after options (its global options or a subcommand's): not read",
            )
        return wrapper

    def _wraps_past_options(self, head: str, values: list[str | None], fed: bool = False) -> bool:
        """Whether the command, its options left out, is a wrapper that runs something (`git -C sub submodule
        foreach rm -rf x`, `git submodule -q -q foreach CMD`, `git --no-pager grep -O CMD`): the wrapper table
        matches the words as written, so such a command is not read."""
        options = self.table.global_options.get(head.rpartition("/")[2])
        found = self.table.match_past_options(values, options.options_with_value if options else frozenset())
        if found is None:
            return False
        wrapper, words = found
        if fed:  # `xargs git -C . submodule foreach`: the words it adds are the script
            return True
        inner = unwrap(wrapper, words, 0, len(words))
        return bool(inner.commands or inner.scripts or inner.reads_stdin or inner.dynamic)

    def _without_global_options(self, base: str, literal: list[str], reasons: list[str]) -> list[str] | None:
        """`git -C dir -c k=v push x` → `git push x` (and the reasons `-c` brings); None if none apply."""
        options = self.table.global_options.get(base)
        if options is None:
            return None
        index = 1
        while index < len(literal) and literal[index].startswith("-") and literal[index] != "--":
            name, equals, _ = literal[index].partition("=")
            short = name[:2] if not name.startswith("--") else name
            reason = options.ask.get(name) or options.ask.get(short)
            value = _value(literal, index, name, short, equals)
            if reason is not None and not _harmless(options.harmless.get(short, frozenset()), value):
                reasons.append(reason)
            if not equals and name in options.options_with_value:
                index += 2
            else:
                index += 1
        if index == 1:
            return None
        return [base, *literal[index:]]

    def _subcommand(self, base: str, args: list[str | None]) -> str | None:
        """The first word after the command's global options ("" when only known at run time)."""
        options = self.table.global_options.get(base)
        index = 0
        while index < len(args):
            arg = args[index]
            if arg is None:
                return ""
            if not arg.startswith("-"):
                return arg
            if options is not None and "=" not in arg and arg in options.options_with_value:
                index += 1
            index += 1
        return None


def _value(literal: list[str], index: int, name: str, short: str, equals: str) -> str | None:
    """The value of the option at `literal[index]`: attached (`--opt=v`, `-cv`) or the next word."""
    word = literal[index]
    if equals and name.startswith("--"):
        return word.partition("=")[2]
    if not name.startswith("--") and len(word) > 2:
        return word[2:]
    return literal[index + 1] if index + 1 < len(literal) else None


def _harmless(settings: frozenset[str], value: str | None) -> bool:
    """Whether the setting `value` (`name=value`) is one of `settings`, which cannot run anything."""
    if value is None:
        return False
    key = value.partition("=")[0].lower()
    return any(fnmatchcase(key, pattern) for pattern in settings)
