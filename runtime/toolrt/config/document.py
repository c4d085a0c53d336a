"""A parsed config file that still knows where each value came from."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = ["NO_MARKS", "Document", "child_pointer", "document_start", "node_marks"]

NO_MARKS: Mapping[str, tuple[int, int]] = MappingProxyType({})
"""The marks of a document whose positions are found on the first lookup: one value shared by every
such document (a large config holds one object fewer per file for the garbage collector to count)."""
_FIRST = (1, 1)


def document_start(line: int, column: int) -> tuple[int, int]:
    """(line, column) where a document starts, the usual (1, 1) shared."""
    return _FIRST if line == 1 and column == 1 else (line, column)


def child_pointer(pointer: str, key: str | int) -> str:
    """`/a` + `b/c` → `/a/b~1c` (RFC 6901 escaping)."""
    token = key if type(key) is str else str(key)
    if "~" in token or "/" in token:  # most keys need no escaping: `validate` makes a pointer per value
        token = token.replace("~", "~0").replace("/", "~1")
    return f"{pointer}/{token}"


@dataclass(frozen=True, slots=True)
class Document:
    """One YAML document: its data (plain dicts, lists, scalars) and the line/column of every node."""

    path: Path
    data: Any
    marks: Mapping[str, tuple[int, int]] = field(default_factory=lambda: NO_MARKS)
    """JSON pointer → (1-based line, 1-based column) of the node's start (a key's position for mappings' values).
    Computed from `text` on the first lookup (`NO_MARKS` until then): most documents are valid and never need them."""
    display: str = ""
    """The path as shown in messages (relative to the root when inside it)."""
    text: str | None = field(default=None, repr=False, compare=False)
    """The YAML text of the file, kept to compute `marks` on the first lookup (holding one string
    instead of a node per value keeps the garbage collector's work small for large configs)."""
    index: int = 0
    """Which `---` document of the file this is."""
    start: tuple[int, int] = _FIRST
    """Line and column where the document's content starts (what `source("")` names)."""

    @property
    def name(self) -> str:
        return self.display or str(self.path)

    def locate(self, pointer: str) -> tuple[int, int]:
        """Line and column of `pointer`, or of its nearest ancestor that has a mark."""
        if not pointer and not self.marks:
            return self.start
        if not self.marks and self.text is not None:
            # a memo of what `text` holds, not a change of value: set once, on the frozen instance
            object.__setattr__(self, "marks", node_marks(_compose(self.text, self.index)))
        while True:
            if pointer in self.marks:
                return self.marks[pointer]
            if not pointer:
                return (1, 1)
            pointer = pointer.rsplit("/", 1)[0]

    def source(self, pointer: str) -> str:
        """`file:line` of a node, the form rules and definitions carry as their origin."""
        return f"{self.name}:{self.locate(pointer)[0]}"


def _compose(text: str, index: int) -> Any:
    import yaml

    return list(yaml.compose_all(text, Loader=_marks_loader()))[index]


@functools.cache
def _marks_loader() -> Any:
    """A libyaml loader that composes nodes for their marks only, skipping tag resolution (which the
    parser calls back into Python for, once per scalar)."""
    import yaml

    def resolve(self: Any, kind: Any, value: Any, implicit: Any) -> str:
        return ""

    return type("MarksOnlyLoader", (getattr(yaml, "CSafeLoader", yaml.SafeLoader),), {"resolve": resolve})


def node_marks(root: Any) -> dict[str, tuple[int, int]]:
    """JSON pointer → (line, column) for every node under a composed YAML node (mapping values at their key)."""
    marks: dict[str, tuple[int, int]] = {"": (root.start_mark.line + 1, root.start_mark.column + 1)}
    stack = [("", root)]
    while stack:
        pointer, node = stack.pop()
        if node.id == "mapping":
            for key_node, value_node in node.value:
                child = child_pointer(pointer, key_node.value if key_node.id == "scalar" else str(key_node.value))
                marks.setdefault(child, (key_node.start_mark.line + 1, key_node.start_mark.column + 1))
                stack.append((child, value_node))
        elif node.id == "sequence":
            for index, item in enumerate(node.value):
                child = child_pointer(pointer, index)
                marks.setdefault(child, (item.start_mark.line + 1, item.start_mark.column + 1))
                stack.append((child, item))
    return marks
