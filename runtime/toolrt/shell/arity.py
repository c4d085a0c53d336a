"""OpenCode's `BashArity.prefix`: how many leading tokens name a command, from `arity.yaml`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from ..config.resources import read_yaml

__all__ = ["arity_table", "prefix"]


@cache
def arity_table() -> Mapping[str, int]:
    """The packaged table: space-joined leading tokens → how many tokens name the command."""
    data = read_yaml(Path(__file__).with_name("arity.yaml"))
    return {str(key): int(value) for key, value in data["arity"].items()}


@cache
def _longest_by_first() -> Mapping[str, int]:
    """First token → the most tokens of any listed prefix starting with it (most programs: 1)."""
    longest: dict[str, int] = {}
    for key in arity_table():
        first, _, _ = key.partition(" ")
        longest[first] = max(longest.get(first, 1), key.count(" ") + 1)
    return longest


def prefix(tokens: Sequence[str]) -> tuple[str, ...]:
    """The tokens that name the command: the longest listed prefix decides, else the first token.

    `("git", "push", "origin")` → `("git", "push")`; `("docker", "compose", "up", "-d")` →
    `("docker", "compose", "up")`; `()` → `()`.
    """
    if not tokens:
        return ()
    tables = _longest or _load()
    longest = tables[0].get(tokens[0])
    if longest is None:  # most programs: no listed prefix starts with them
        return (tokens[0],)
    table = tables[1]
    if longest == 1:  # only the program itself is listed (`ls`, `cargo`)
        return tuple(tokens[: table[tokens[0]]])
    for length in range(min(len(tokens), longest), 0, -1):
        arity = table.get(" ".join(tokens[:length]))
        if arity is not None:
            return tuple(tokens[:arity])
    return tuple(tokens[:1])


_longest: list[Mapping[str, int]] = []


def _load() -> list[Mapping[str, int]]:
    """The two tables `prefix` reads on every command, kept at hand once loaded."""
    _longest[:] = [_longest_by_first(), arity_table()]
    return _longest
