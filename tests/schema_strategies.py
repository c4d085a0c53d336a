"""Hypothesis strategies for instances of a JSON Schema: the keywords tool parameters use, nothing more.

`from_schema(schema)` draws values valid against `schema` (tests/test_schema_strategies.py checks every
built-in tool's schema against jsonschema). A keyword it does not know raises `ValueError` naming it,
so a tool that starts using one fails loudly here instead of being fed values that ignore it.

Why not hypothesis-jsonschema: it reaches into hypothesis's internals, and hypothesis releases broke it
(`'many' object has no attribute 'more'`), which only an ever-older pin of hypothesis would avoid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

__all__ = ["JSON_VALUES", "from_schema"]

ANNOTATIONS = frozenset({"description", "default", "title", "examples", "$schema", "$comment", "deprecated"})
SUPPORTED = ANNOTATIONS | {
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
}
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")

JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
"""Any JSON value (no NaN or infinity: JSON has none)."""

_EXTRA_KEYS = 3
"""At most this many undeclared properties where a schema allows them."""


def from_schema(schema: Mapping[str, Any] | bool) -> st.SearchStrategy[Any]:
    """Values valid against `schema` (a draft 2020-12 subset; see `SUPPORTED`)."""
    if schema is True:
        return JSON_VALUES
    if schema is False:
        raise ValueError("schema false has no instances")
    unknown = sorted(set(schema) - SUPPORTED)
    if unknown:
        raise ValueError(f"schema keywords this helper does not generate for: {', '.join(unknown)}")
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    kinds = schema.get("type", list(TYPES))
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    unknown_types = sorted(set(kinds) - set(TYPES))
    if unknown_types:
        raise ValueError(f"unknown type {', '.join(unknown_types)}")
    return st.one_of([_of_type(kind, schema) for kind in kinds])


def _of_type(kind: str, schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return _integers(schema)
    if kind == "number":
        return _integers(schema) | _floats(schema)
    if kind == "string":
        return _strings(schema)
    if kind == "array":
        return _arrays(schema)
    return _objects(schema)


def _integers(schema: Mapping[str, Any]) -> st.SearchStrategy[int]:
    low, high = schema.get("minimum"), schema.get("maximum")
    low = None if low is None else math.ceil(low)
    high = None if high is None else math.floor(high)
    if "exclusiveMinimum" in schema:
        low = max(low if low is not None else -math.inf, math.floor(schema["exclusiveMinimum"]) + 1)
    if "exclusiveMaximum" in schema:
        high = min(high if high is not None else math.inf, math.ceil(schema["exclusiveMaximum"]) - 1)
    return st.integers(min_value=None if low is None else int(low), max_value=None if high is None else int(high))


def _floats(schema: Mapping[str, Any]) -> st.SearchStrategy[float]:
    low, exclude_low = schema.get("minimum"), False
    if "exclusiveMinimum" in schema and (low is None or schema["exclusiveMinimum"] >= low):
        low, exclude_low = schema["exclusiveMinimum"], True
    high, exclude_high = schema.get("maximum"), False
    if "exclusiveMaximum" in schema and (high is None or schema["exclusiveMaximum"] <= high):
        high, exclude_high = schema["exclusiveMaximum"], True
    return st.floats(
        min_value=low,
        max_value=high,
        exclude_min=exclude_low,
        exclude_max=exclude_high,
        allow_nan=False,
        allow_infinity=False,
    )


def _strings(schema: Mapping[str, Any]) -> st.SearchStrategy[str]:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if "pattern" not in schema:
        return st.text(min_size=low, max_size=high if high is not None else max(low, 40))
    # JSON Schema patterns search (unanchored); a generated match of the whole string satisfies that too.
    text = st.from_regex(schema["pattern"], fullmatch=True)
    return text.filter(lambda value: len(value) >= low and (high is None or len(value) <= high))


def _arrays(schema: Mapping[str, Any]) -> st.SearchStrategy[list[Any]]:
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    items = from_schema(schema.get("items", True))
    size = {"min_size": low, "max_size": high if high is not None else low + 4}
    if schema.get("uniqueItems"):
        return st.lists(items, unique_by=_canonical, **size)
    return st.lists(items, **size)


def _canonical(value: Any) -> Any:
    """JSON equality as a hashable key (1 == 1.0 == True is not JSON's: keep the type apart)."""
    if isinstance(value, dict):
        return ("object", tuple(sorted((key, _canonical(item)) for key, item in value.items())))
    if isinstance(value, list):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, bool):
        return ("boolean", value)
    return (type(value).__name__ if value is not None else "null", value)


def _objects(schema: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = [key for key in schema.get("required", ()) if key in properties]
    undeclared = [key for key in schema.get("required", ()) if key not in properties]
    extra_schema = schema.get("additionalProperties", True)
    if undeclared and extra_schema is False:
        raise ValueError(f"required {', '.join(undeclared)} is neither declared nor allowed")
    fixed = {key: from_schema(properties[key]) for key in required}
    fixed.update({key: from_schema(extra_schema) for key in undeclared})
    optional = {key: from_schema(value) for key, value in properties.items() if key not in required}
    strategy: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(fixed, optional=optional)
    if extra_schema is not False:
        names = st.text(max_size=10).filter(lambda key: key not in properties)
        extra = st.dictionaries(names, from_schema(extra_schema), max_size=_EXTRA_KEYS)
        strategy = st.tuples(strategy, extra).map(lambda pair: {**pair[1], **pair[0]})
    return strategy
