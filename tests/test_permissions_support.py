"""Shared helpers for the permission tests (a YAML → Document reader with line marks), and the
checks that the schema and every shipped or fixture permissions file are valid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from toolrt.config.document import Document, child_pointer
from toolrt.permissions.config import PermissionConfig, build_permission_config

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "schemas" / "permissions.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
FIXTURES = ROOT / "tests" / "fixtures" / "permissions"
HOME = Path("/home/tester")
DATA = Path("/data/toolrt")
TRUNCATION = DATA / "tool-output"


def _marks(node: yaml.Node, pointer: str, marks: dict[str, tuple[int, int]]) -> None:
    marks.setdefault(pointer, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = child_pointer(pointer, key.value)
            marks[child] = (key.start_mark.line + 1, key.start_mark.column + 1)
            _marks(value, child, marks)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _marks(item, child_pointer(pointer, index), marks)


def document(text: str, name: str = "permissions.yaml") -> Document:
    """Parse and schema-validate YAML text the way the lead's loader hands documents over."""
    data: Any = yaml.load(text, Loader=yaml.CSafeLoader)
    errors = sorted(VALIDATOR.iter_errors(data), key=lambda e: list(e.path))
    if errors:
        raise AssertionError(f"{name} does not match the schema: {errors[0].message}")
    marks: dict[str, tuple[int, int]] = {}
    node = yaml.compose(text, Loader=yaml.CSafeLoader)
    if node is not None:
        _marks(node, "", marks)
    return Document(Path(name), data, marks, name)


def builtin_document() -> Document:
    return document((ROOT / "permissions.yaml").read_text(encoding="utf-8"), "permissions.yaml")


def build(project: str | None = None, locked: str | None = None, builtin: str | None = None) -> PermissionConfig:
    return build_permission_config(
        builtin_document() if builtin is None else document(builtin, "builtin.yaml"),
        None if project is None else document(project, "project.yaml"),
        None if locked is None else document(locked, "locked.yaml"),
        home=HOME,
        data_dir=DATA,
        truncation_dir=TRUNCATION,
    )


def test_schema_is_valid_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$id"] == "https://toolrt.dev/schemas/permissions.schema.json"


@pytest.mark.parametrize("path", [ROOT / "permissions.yaml", *sorted(FIXTURES.glob("*.yaml"))], ids=lambda p: p.name)
def test_shipped_and_fixture_files_validate(path: Path) -> None:
    document(path.read_text(encoding="utf-8"), path.name)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("permission: {bash: maybe}", "is not valid under any of the given schemas"),
        ('permission: {bash: {"": deny}}', "is not valid under any of the given schemas"),
        ("rules: [{permission: bash, pattern: '', action: deny}]", "should be non-empty"),
        ("rules: [{permission: bash, action: allow, extra: 1}]", "Additional properties are not allowed"),
        ("agents: {plan: {mode: boss}}", "is not one of"),
        ("tests: [{permission: edit, expect: deny}]", "is not valid under any of the given schemas"),
        ("unknown: 1", "Additional properties are not allowed"),
    ],
)
def test_schema_rejects_bad_shapes(text: str, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        document(text)


def test_schema_describes_every_property() -> None:
    missing: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for name, prop in node.get("properties", {}).items():
                if "description" not in prop:
                    missing.append(f"{path}/{name}")
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{path}/{index}")

    walk(SCHEMA, "")
    assert missing == []
