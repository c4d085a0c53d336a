"""The top-level properties a tool's parameters declare, wherever the schema declares them.

Authors compose argument schemas: `properties` at the root, inside `allOf` entries, behind a `$ref`
into `$defs`, or as `anyOf`/`oneOf` alternatives. Template checks, `permission.paths`, defaults and
the strict-null rewrite all need the same answer to "which arguments can a call carry, and what
does each look like", so it is computed here once per tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core import type_names
from .refs import RefIndex

__all__ = ["declared_properties", "value_types"]

_COMBINATORS = ("allOf", "anyOf", "oneOf")
_MAX_DEPTH = 32


def declared_properties(parameters: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Property name → its schema (references resolved), in declaration order; the first declaration wins."""
    root = parameters if isinstance(parameters, dict) else dict(parameters)
    found: dict[str, Mapping[str, Any]] = {}
    _collect(root, RefIndex(root), found, 0, set())
    return found


def _collect(schema: Any, refs: RefIndex, found: dict[str, Mapping[str, Any]], depth: int, seen: set[int]) -> None:
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH or id(schema) in seen:
        return
    seen.add(id(schema))
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            if isinstance(name, str) and name not in found:
                found[name] = resolve(sub, refs)
    if "$ref" in schema:
        target = refs.resolve(schema["$ref"])
        if target is not None:
            _collect(target[0], refs, found, depth + 1, seen)
    for keyword in _COMBINATORS:
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for branch in branches:
                _collect(branch, refs, found, depth + 1, seen)


def resolve(schema: Any, refs: RefIndex) -> Mapping[str, Any]:
    """`schema` with its `$ref` chain followed (keywords beside a `$ref` win); `{}` for a boolean schema."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(schema, Mapping):
            return {}
        if "$ref" not in schema:
            return schema
        target = refs.resolve(schema["$ref"])
        if target is None:
            return schema
        schema = {**target[0], **{k: v for k, v in schema.items() if k != "$ref"}}
    return {}


def value_types(schema: Mapping[str, Any], parameters: Mapping[str, Any]) -> set[str]:
    """The JSON types a property's schema lets through (`type`, across `anyOf`/`oneOf`/`allOf` branches).

    An empty set means the schema does not say (any value may come).
    """
    root = parameters if isinstance(parameters, dict) else dict(parameters)
    return _types(schema, RefIndex(root), 0)


def _types(schema: Any, refs: RefIndex, depth: int) -> set[str]:
    node = resolve(schema, refs)
    if depth > _MAX_DEPTH:
        return set()
    own = set(type_names(dict(node)))
    for keyword in ("anyOf", "oneOf"):
        branches = node.get(keyword)
        if isinstance(branches, list) and branches:
            alternatives = [_types(branch, refs, depth + 1) for branch in branches]
            if all(alternatives):
                union = set().union(*alternatives)
                own = own & union if own else union
    all_of = node.get("allOf")
    if isinstance(all_of, list):
        for branch in all_of:
            narrowed = _types(branch, refs, depth + 1)
            if narrowed:
                own = own & narrowed if own else narrowed
    return own
