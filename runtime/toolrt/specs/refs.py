"""Resolving local `$ref`s (`#`, `#/json/pointer`, `#anchor`) inside one declared schema.

Remote references (another document, a URL) are out of reach on purpose: a tool spec must be
self-contained, so each format treats them as unresolvable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from .core import Schema, descendant_pointer

__all__ = ["RefIndex", "walk"]


class RefIndex:
    """Finds what a `$ref` in `root` points at. Anchors are indexed on first use."""

    __slots__ = ("_anchors", "_root")

    def __init__(self, root: Schema) -> None:
        self._root = root
        self._anchors: dict[str, tuple[Any, str]] | None = None

    def resolve(self, ref: object) -> tuple[Schema, str] | None:
        """The target schema and its JSON pointer, or `None` when `ref` is not a local reference."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            found = self._anchor_index().get(fragment)
        else:
            found = self._follow(fragment)
        if found is None:
            return None
        target, pointer = found
        if target is True:
            return {}, pointer
        if target is False:
            return {"not": {}}, pointer
        return (target, pointer) if isinstance(target, dict) else None

    def _follow(self, fragment: str) -> tuple[Any, str] | None:
        node: Any = self._root
        tokens = fragment.split("/")[1:] if fragment else []
        pointer = ""
        for raw in tokens:
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
            pointer = descendant_pointer(pointer, token)
        return node, pointer

    def _anchor_index(self) -> dict[str, tuple[Any, str]]:
        if self._anchors is None:
            self._anchors = {}
            for node, pointer in walk(self._root, ""):
                anchor = node.get("$anchor")
                if isinstance(anchor, str):
                    self._anchors.setdefault(anchor, (node, pointer))
        return self._anchors


def walk(node: Any, pointer: str) -> Iterator[tuple[Schema, str]]:
    """Every object in `node` (schemas and the maps holding them) with its JSON pointer."""
    if isinstance(node, dict):
        yield node, pointer
        for key, value in node.items():
            yield from walk(value, descendant_pointer(pointer, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, descendant_pointer(pointer, i))
