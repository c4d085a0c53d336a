"""Pure helpers over JSON Schema documents, shared by every format.

Nothing here mutates its input: each helper builds new containers. Schemas are plain JSON data
(`dict`, `list`, `str`, numbers, booleans, `None`) once `thaw` has copied them out of whatever
read-only mappings the caller holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..config.document import child_pointer

__all__ = [
    "ANNOTATIONS",
    "LIST_KEYWORDS",
    "MAP_KEYWORDS",
    "SILENT_KEYWORDS",
    "SINGLE_KEYWORDS",
    "Schema",
    "as_json",
    "descendant_pointer",
    "inferred_type",
    "json_type",
    "map_children",
    "merge",
    "note",
    "thaw",
    "type_names",
    "with_notes",
]

Schema = dict[str, Any]

SINGLE_KEYWORDS = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
"""Keywords whose value is one subschema."""
MAP_KEYWORDS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Keywords whose value maps names to subschemas."""
LIST_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
"""Keywords whose value is a list of subschemas."""

SILENT_KEYWORDS = frozenset({"$schema", "$id", "$comment", "$anchor", "$dynamicAnchor", "$vocabulary"})
"""Bookkeeping for validators that tells the model nothing: dropped without a warning."""
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"})
"""Keywords that describe a value without constraining it; the site of a `$ref` overrides its target's."""


def thaw(value: Any) -> Any:
    """A deep copy of `value` as plain JSON containers (any Mapping → dict, list/tuple → list)."""
    kind = type(value)
    # Exact-type checks first: ABC isinstance checks dominate the cost on plain JSON.
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return value
    if kind is dict:
        return {key if type(key) is str else str(key): thaw(item) for key, item in value.items()}
    if kind is list:
        return [thaw(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(item) for item in value]
    return value


def descendant_pointer(pointer: str, *tokens: str | int) -> str:
    """`pointer` extended by `tokens`, each a `child_pointer` step (escaped per RFC 6901)."""
    for token in tokens:
        pointer = child_pointer(pointer, token)
    return pointer


def as_json(value: Any) -> str:
    """Compact, readable JSON for a description (non-ASCII kept, key order kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def note(keyword: str, value: Any) -> str:
    """The text that replaces a dropped keyword: `keyword: <value as JSON>`."""
    return f"{keyword}: {as_json(value)}"


def with_notes(description: Any, notes: Sequence[str]) -> str | None:
    """`description` followed by one `(note)` line per note, after a blank line."""
    text = description if isinstance(description, str) and description else None
    if not notes:
        return text
    block = "\n".join(f"({n})" for n in notes)
    return f"{text}\n\n{block}" if text else block


def type_names(schema: Schema) -> tuple[str, ...]:
    """The declared `type` as a tuple (`()` when absent or malformed)."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return (declared,)
    if isinstance(declared, list):
        return tuple(t for t in declared if isinstance(t, str))
    return ()


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def inferred_type(schema: Schema) -> str | list[str] | None:
    """The type an untyped node evidently has (from its values or its shape), if any."""
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list) and values:
        types = list(dict.fromkeys(json_type(v) for v in values))
        return types[0] if len(types) == 1 else types
    if "properties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    return None


def map_children(schema: Schema, pointer: str, rewrite: Callable[[Any, str], Any]) -> Schema:
    """A copy of `schema` whose direct subschemas are replaced by `rewrite(subschema, pointer)`."""
    out: Schema = {}
    for key, value in schema.items():
        if key in SINGLE_KEYWORDS and isinstance(value, (Mapping, bool)):
            out[key] = rewrite(value, descendant_pointer(pointer, key))
        elif key in MAP_KEYWORDS and isinstance(value, Mapping):
            out[key] = {name: rewrite(sub, descendant_pointer(pointer, key, name)) for name, sub in value.items()}
        elif (key in LIST_KEYWORDS or key == "items") and isinstance(value, list):
            out[key] = [rewrite(sub, descendant_pointer(pointer, key, i)) for i, sub in enumerate(value)]
        else:
            out[key] = thaw(value)
    return out


def _ordered_union(first: Iterable[Any], second: Iterable[Any]) -> list[Any]:
    out = list(first)
    out.extend(item for item in second if item not in out)
    return out


def merge(base: Schema, overlay: Schema) -> tuple[Schema, list[str]]:
    """Both schemas as one (what `allOf: [base, overlay]` means, as far as one node can say it).

    Neither input is mutated; the result may share unchanged subschemas with them.

    Properties merge recursively, `required` and `enum` combine, `type` intersects, and the
    overlay's annotations win. Returns the merge and the keywords whose values disagreed, where
    the overlay's value was kept (the caller warns about those).
    """
    # Shallow: callers rebuild every node they output, so only containers changed here are copied.
    out = dict(base)
    conflicts: list[str] = []
    for key, value in overlay.items():
        if key not in out or out[key] == value or key in ANNOTATIONS:
            out[key] = value
        elif key == "properties" and isinstance(value, Mapping) and isinstance(out[key], dict):
            out[key] = dict(out[key])
            for name, sub in value.items():
                mine = out[key].get(name)
                if isinstance(mine, dict) and isinstance(sub, Mapping):
                    out[key][name], inner = merge(mine, dict(sub))
                    conflicts.extend(inner)
                else:
                    out[key][name] = sub
        elif key == "required" and isinstance(value, list) and isinstance(out[key], list):
            out[key] = _ordered_union(out[key], value)
        elif key == "type":
            mine_types, their_types = type_names(out), type_names(overlay)
            both = [t for t in mine_types if t in their_types]
            if both:
                out[key] = both[0] if len(both) == 1 else both
            else:
                conflicts.append(key)
                out[key] = value
        elif key == "enum" and isinstance(value, list) and isinstance(out[key], list):
            both = [v for v in out[key] if v in value]
            out[key] = both if both else value
            if not both:
                conflicts.append(key)
        else:
            conflicts.append(key)
            out[key] = value
    return out, conflicts
