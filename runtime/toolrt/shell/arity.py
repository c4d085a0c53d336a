"""OpenCode's `BashArity.prefix`: how many leading tokens name a command, from `arity.yaml`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ..config.resources import read_yaml

__all__ = ["arity_table", "prefix"]


@cache
def arity_table() -> Mapping[str, int]:
    """The packaged table: space-joined leading tokens → how many tokens name the command."""
    data = read_yaml(Path(__file__).with_name("arity.yaml"))
    return {str(key): int(value) for key, value in data["arity"].items()}


_Node = tuple[int | None, Mapping[str, "_Node"]]
"""One token of a listed prefix: the arity when the tokens so far are listed, and the tokens that may follow."""


def _trie() -> Mapping[str, _Node]:
    """The table as a tree of tokens, first token → `_Node`: a command's longest listed prefix is the
    deepest listed node on its tokens' path, found one lookup per token (most programs: one)."""
    root: dict[str, tuple[list[int | None], dict[str, Any]]] = {}
    for key, arity in arity_table().items():
        level = root
        tokens = key.split(" ")
        for index, token in enumerate(tokens):
            node = level.setdefault(token, ([None], {}))
            if index == len(tokens) - 1:
                node[0][0] = arity
            level = node[1]

    def frozen(level: dict[str, tuple[list[int | None], dict[str, Any]]]) -> Mapping[str, _Node]:
        # Dicts, not read-only views (whose `get` costs twice as much): the tree is private to this module.
        return {token: (node[0][0], frozen(node[1])) for token, node in level.items()}

    return frozen(root)


def prefix(tokens: Sequence[str]) -> tuple[str, ...]:
    """The tokens that name the command: the longest listed prefix decides, else the first token.

    `("git", "push", "origin")` → `("git", "push")`; `("docker", "compose", "up", "-d")` →
    `("docker", "compose", "up")`; `()` → `()`.
    """
    if not tokens:
        return ()
    node = (_tokens or _load()).get(tokens[0])
    if node is None:  # most programs: no listed prefix starts with them
        return (tokens[0],)
    found, following = node
    index = 1
    while following and index < len(tokens):
        node = following.get(tokens[index])
        if node is None:
            break
        arity, following = node
        if arity is not None:
            found = arity
        index += 1
    return tuple(tokens[:found]) if found is not None else (tokens[0],)


_tokens: dict[str, _Node] = {}


def _load() -> Mapping[str, _Node]:
    """The tree `prefix` reads on every command, kept at hand once built."""
    _tokens.update(_trie())
    return _tokens
