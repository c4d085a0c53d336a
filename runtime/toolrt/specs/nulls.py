"""Undoing strict mode's "optional means nullable" on the arguments a model sends back.

OpenAI strict mode makes every property required and expresses an optional one as nullable, so
the model answers `"timeout": null` where the declared schema wants the key absent. Before the
arguments are validated against the declared schema, those nulls are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core import Schema, type_names
from .refs import RefIndex

__all__ = ["strip_strict_nulls"]

_MAX_REF_HOPS = 32


def strip_strict_nulls(arguments: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `arguments` without `null` values of optional properties that may not be null.

    Descends into nested objects and arrays of objects. A `null` that the declared schema allows,
    or that a required property holds, is kept so that validation still reports it.
    """
    root = parameters if isinstance(parameters, dict) else dict(parameters)
    out = _strip(dict(arguments), root, RefIndex(root))
    return out if isinstance(out, dict) else dict(arguments)


def _resolve(schema: Any, refs: RefIndex) -> Schema:
    """`schema` after following `$ref`s and single-entry `allOf`s (boolean schemas count as empty)."""
    for _ in range(_MAX_REF_HOPS):
        if not isinstance(schema, Mapping):
            return {}
        if "$ref" in schema:
            found = refs.resolve(schema["$ref"])
            if found is None:
                return dict(schema)
            schema = {**found[0], **{k: v for k, v in schema.items() if k != "$ref"}}
        elif isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
            schema = {**schema["allOf"][0], **{k: v for k, v in schema.items() if k != "allOf"}}
        else:
            return dict(schema)
    return {}


def _allows_null(schema: Any, refs: RefIndex) -> bool:
    node = _resolve(schema, refs)
    if "const" in node and node["const"] is not None:
        return False
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        return False
    branches = [b for key in ("anyOf", "oneOf") if isinstance(node.get(key), list) for b in node[key]]
    if branches and not any(_allows_null(b, refs) for b in branches):
        return False
    types = type_names(node)
    return not types or "null" in types or node.get("nullable") is True


def _strip(value: Any, schema: Any, refs: RefIndex) -> Any:
    node = _resolve(schema, refs)
    if isinstance(value, dict):
        properties = node.get("properties")
        if not isinstance(properties, Mapping):
            return value
        required = node.get("required")
        required = required if isinstance(required, list) else []
        out = {}
        for key, item in value.items():
            sub = properties.get(key)
            if item is None and sub is not None and key not in required and not _allows_null(sub, refs):
                continue
            out[key] = _strip(item, sub, refs) if sub is not None else item
        return out
    if isinstance(value, list) and isinstance(node.get("items"), (Mapping, bool)):
        return [_strip(item, node["items"], refs) for item in value]
    return value
