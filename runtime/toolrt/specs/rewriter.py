"""The walk every format shares: `$ref` inlining, `allOf` merging, warnings and description notes.

A format subclasses `Rewriter`, says which `$ref`s it inlines and how deep recursion may go, and
implements `rewrite(schema, pointer, root=...)` for one node whose references and single-entry
`allOf` are already resolved. Children go back through `node()`, so the same rules apply at
every depth and inlined definitions are reported at their own pointer (`/$defs/Name/...`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from .core import SILENT_KEYWORDS, Schema, merge, note, thaw, with_notes
from .model import SpecWarning
from .refs import RefIndex

__all__ = ["MAX_INLINED", "Rewriter"]

MAX_INLINED = 1000
"""References one schema may inline in total; bounds the output of a schema built to explode."""


class Rewriter(ABC):
    """Rebuilds one declared schema for one format; never mutates the declared schema."""

    label: ClassVar[str]
    """The provider's name in warning messages."""
    recursion_limit: ClassVar[int] = 3
    """How many times one definition may be expanded inside itself before the walk cuts it."""
    merge_all_of: ClassVar[bool] = True
    """Whether `allOf` is merged into its node (formats that accept `allOf` keep it)."""

    def __init__(self, root: Schema, format: str) -> None:
        self.root = root
        self.format = format
        self.refs = RefIndex(root)
        self.root_notes: list[str] = []
        """Notes about the root node; the format appends them to the tool description."""
        self._warnings: dict[tuple[str, str, str], SpecWarning] = {}
        self._expanding: list[str] = []
        self._root_pending = True
        self._inlined = 0

    @property
    def warnings(self) -> tuple[SpecWarning, ...]:
        """Warnings in the order first raised; an inlined definition reports once, not per use."""
        return tuple(self._warnings.values())

    def run(self) -> Schema:
        """The rewritten root schema."""
        out = self.node(self.root, "")
        return out if isinstance(out, dict) else {}

    def warn(self, keyword: str, pointer: str, message: str) -> None:
        self._warnings.setdefault((keyword, pointer, message), SpecWarning(self.format, keyword, pointer, message))

    def drop(self, keyword: str, value: Any, pointer: str, notes: list[str], why: str = "") -> None:
        """Record `keyword` as moved into the description of its node."""
        notes.append(note(keyword, value))
        self.warn(keyword, pointer, f"{self.label} does not support '{keyword}'{why}; moved into the description")

    def describe(self, schema: Schema, notes: list[str], *, root: bool) -> Schema:
        """`schema` with `notes` appended to its description (the root's go to the tool description)."""
        if not notes:
            return schema
        if root:
            self.root_notes.extend(notes)
            return schema
        out = dict(schema)
        out["description"] = with_notes(schema.get("description"), notes)
        return out

    def inline_ref(self, schema: Schema) -> bool:
        """Whether this node's `$ref` is replaced by its target (default: always)."""
        return True

    @abstractmethod
    def rewrite(self, schema: Schema, pointer: str, *, root: bool) -> Any:
        """The format's rewrite of one node (no `$ref` to inline, no `allOf` to merge left)."""

    def node(self, value: Any, pointer: str) -> Any:
        """Rewrite any subschema: booleans, references and `allOf` first, then `rewrite`."""
        if isinstance(value, bool):
            return self.boolean(value, pointer)
        if not isinstance(value, dict):
            return thaw(value)
        if "$ref" in value and self.inline_ref(value):
            return self._inline(value, pointer)
        all_of = value.get("allOf")
        if self.merge_all_of and isinstance(all_of, list) and all_of:
            return self._merge_all_of(value, all_of, pointer)
        root, self._root_pending = self._root_pending, False
        return self.rewrite(value, pointer, root=root)

    def boolean(self, value: bool, pointer: str) -> Any:
        """A boolean subschema; formats without them get `{}` (anything) or `{"not": {}}` (nothing)."""
        return self.node({} if value else {"not": {}}, pointer)

    def unresolved(self, schema: Schema, pointer: str) -> Any:
        """Replacement for a `$ref` that points outside the schema: its siblings, with a note."""
        ref = schema["$ref"]
        self.warn("$ref", pointer, f"{self.label}: cannot resolve '$ref' {ref!r} (only '#...' references are followed)")
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        rest["description"] = with_notes(rest.get("description"), [note("$ref", ref)])
        return self.node(rest, pointer)

    def cut(self, schema: Schema, target: Schema, pointer: str, why: str) -> Any:
        """Replacement for a `$ref` that is not expanded (`why` says why): its type and description."""
        ref = schema["$ref"]
        self.warn("$ref", pointer, f"{self.label}: '$ref' {ref!r} was not inlined: {why}")
        description = schema.get("description", target.get("description"))
        shallow: Schema = {"description": with_notes(description, [f"recursive: deeper levels of {ref} are omitted"])}
        if isinstance(target.get("type"), (str, list)):
            shallow["type"] = thaw(target["type"])
        return self.rewrite(shallow, pointer, root=False)

    def multi_all_of(self, schema: Schema, pointer: str) -> None:
        """Called before an `allOf` of several entries is merged; a format may warn or refuse."""
        self.warn("allOf", pointer, f"{self.label} does not support 'allOf'; its entries were merged into one schema")

    def _conflicts(self, keyword: str, conflicts: list[str], pointer: str) -> None:
        for key in conflicts:
            self.warn(
                keyword,
                pointer,
                f"{self.label}: the schemas combined by '{keyword}' disagree on '{key}'; the last value was kept",
            )

    def _inline(self, schema: Schema, pointer: str) -> Any:
        ref = schema["$ref"]
        found = self.refs.resolve(ref)
        if found is None:
            return self.unresolved(schema, pointer)
        target, target_pointer = found
        if self._expanding.count(target_pointer) >= self.recursion_limit:
            why = f"it is recursive, so it was expanded {self.recursion_limit} level(s) deep, then cut"
            return self.cut(schema, target, pointer, why)
        self._inlined += 1
        if self._inlined > MAX_INLINED:
            return self.cut(schema, target, pointer, f"the schema grew past {MAX_INLINED} inlined references")
        siblings = {k: v for k, v in schema.items() if k != "$ref" and k not in SILENT_KEYWORDS}
        self._expanding.append(target_pointer)
        try:
            if not siblings:
                return self.node(target, target_pointer)
            merged, conflicts = merge(target, siblings)
            self._conflicts("$ref", conflicts, pointer)
            return self.node(merged, pointer)
        finally:
            self._expanding.pop()

    def _merge_all_of(self, schema: Schema, entries: list[Any], pointer: str) -> Any:
        siblings = {k: v for k, v in schema.items() if k != "allOf"}
        if len(entries) == 1:
            entry = entries[0] if isinstance(entries[0], dict) else {}
            merged, conflicts = merge(entry, siblings)
            self._conflicts("allOf", conflicts, pointer)
            return self.node(merged, pointer)
        self.multi_all_of(schema, pointer)
        # Each entry's own `$ref` is resolved before merging (two references would otherwise collide);
        # the targets stay on the expansion stack while the merged node is walked, so recursion still ends.
        pushed = 0
        merged = {}
        try:
            for raw in entries:
                entry = raw if isinstance(raw, dict) else {}
                found = self.refs.resolve(entry.get("$ref")) if "$ref" in entry else None
                if found is not None and self._expanding.count(found[1]) < self.recursion_limit:
                    entry, _ = merge(found[0], {k: v for k, v in entry.items() if k != "$ref"})
                    self._expanding.append(found[1])
                    pushed += 1
                merged, conflicts = merge(merged, entry)
                self._conflicts("allOf", conflicts, pointer)
            merged, conflicts = merge(merged, siblings)
            self._conflicts("allOf", conflicts, pointer)
            return self.node(merged, pointer)
        finally:
            del self._expanding[len(self._expanding) - pushed :]
