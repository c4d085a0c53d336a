"""A parsed config file that still knows where each value came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Document", "child_pointer"]


def child_pointer(pointer: str, key: str | int) -> str:
    """`/a` + `b/c` → `/a/b~1c` (RFC 6901 escaping)."""
    token = str(key).replace("~", "~0").replace("/", "~1")
    return f"{pointer}/{token}"


@dataclass(frozen=True, slots=True)
class Document:
    """One YAML document: its data (plain dicts, lists, scalars) and the line/column of every node."""

    path: Path
    data: Any
    marks: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """JSON pointer → (1-based line, 1-based column) of the node's start (a key's position for mappings' values)."""
    display: str = ""
    """The path as shown in messages (relative to the root when inside it)."""

    @property
    def name(self) -> str:
        return self.display or str(self.path)

    def locate(self, pointer: str) -> tuple[int, int]:
        """Line and column of `pointer`, or of its nearest ancestor that has a mark."""
        while True:
            if pointer in self.marks:
                return self.marks[pointer]
            if not pointer:
                return (1, 1)
            pointer = pointer.rsplit("/", 1)[0]

    def source(self, pointer: str) -> str:
        """`file:line` of a node, the form rules and definitions carry as their origin."""
        return f"{self.name}:{self.locate(pointer)[0]}"
