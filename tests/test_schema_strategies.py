"""The test helper `schema_strategies.from_schema` draws only valid instances, for every built-in tool's
parameters and for each keyword it supports; it refuses keywords it does not know."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from schema_strategies import from_schema

from toolrt.api import Runtime
from toolrt.specs.core import thaw

BUILTIN_IDS = sorted(p.stem for p in (Path(__file__).parent.parent / "tools.d").glob("*.yaml"))

KEYWORDS: list[dict[str, Any] | bool] = [
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 3}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "null"}}, "additionalProperties": {"type": "boolean"}},
    {"type": "object", "required": ["undeclared"], "additionalProperties": {"const": 7}},
    {"type": "array", "items": {"enum": ["x", 1, None]}, "minItems": 2, "maxItems": 3},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 3}, "uniqueItems": True, "maxItems": 4},
    {"type": "array", "items": {"type": ["boolean", "integer"]}, "uniqueItems": True},
    {"type": "integer", "exclusiveMinimum": 0.5, "exclusiveMaximum": 3},
    {"type": "number", "minimum": -1.5, "exclusiveMaximum": 2.5},
    {"type": "number", "exclusiveMinimum": 0, "maximum": 120},
    {"type": "string", "pattern": "^http://127\\.0\\.0\\.1:9/[a-z0-9/]{0,8}$"},
    {"type": "string", "pattern": "[0-9]{3}", "maxLength": 5},
    {"description": "anything: no type"},
    True,
]


@pytest.fixture(scope="module")
def builtin_schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rt = Runtime.load(tmp_path_factory.mktemp("empty"))  # the built-in layer alone
    return {tool_id: thaw(tool.definition.parameters) for tool_id, tool in rt.snapshot.tools.items()}


def _only_valid(schema: Any) -> None:
    validator = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(from_schema(schema))
    def check(value: Any) -> None:
        errors = [error.message for error in validator.iter_errors(value)]
        assert not errors, f"{value!r}: {errors}"

    check()


@pytest.mark.slow
@pytest.mark.parametrize("tool_id", BUILTIN_IDS)
def test_every_drawn_argument_object_of_a_builtin_tool_is_valid(builtin_schemas: dict[str, Any], tool_id: str) -> None:
    _only_valid(builtin_schemas[tool_id])


@pytest.mark.slow
@pytest.mark.parametrize(
    "schema", KEYWORDS, ids=lambda schema: ",".join(sorted(schema)) if schema is not True else "true"
)
def test_every_supported_keyword_is_honoured(schema: Any) -> None:
    _only_valid(schema)


def test_optional_and_undeclared_properties_are_drawn_too() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a"]}
    seen: set[frozenset[str]] = set()

    @settings(max_examples=100, deadline=None, derandomize=True)
    @given(from_schema(schema))
    def collect(value: dict[str, Any]) -> None:
        seen.add(frozenset(value))

    collect()
    assert frozenset({"a"}) in seen and frozenset({"a", "b"}) in seen
    assert any(keys - {"a", "b"} for keys in seen)  # no `additionalProperties: false`: other keys are allowed


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string", "format": "uri"}, "does not generate for: format"),
        ({"oneOf": [{"type": "string"}]}, "does not generate for: oneOf"),
        ({"type": "decimal"}, "unknown type decimal"),
        ({"type": "object", "required": ["x"], "additionalProperties": False}, "required x is neither declared"),
    ],
)
def test_a_keyword_it_does_not_honour_is_refused(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        from_schema(schema)


def test_false_has_no_instances() -> None:
    with pytest.raises(ValueError, match="no instances"):
        from_schema(False)
