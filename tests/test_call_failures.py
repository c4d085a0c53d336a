"""Calls as strict-mode models make them (nulls), path arrays that ask, and failures that never raise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ProjectFactory

from toolrt import Runtime
from toolrt.permissions.ask import AskRequest, Reply

PARAMETERS = """\
parameters:
  type: object
  properties:
    count: {type: integer, minimum: 1, default: 10}
    label: {type: [string, "null"], default: "unset"}
    name: {type: string}
  required: [name]
"""
HANDLERS = {
    "argv": 'handler: {argv: [echo, "{{ name }} {{ count }} {{ label }}"]}',
    "shell": 'handler: {shell: "echo {{ name }} {{ count }} {{ label }}"}',
    "python": "handler: {python: 'nulls_mod:run'}",
}
MODULE = "def run(args, ctx):\n    return f\"{args['name']} {args['count']} {args['label']}\"\n"


def _records(rt: Runtime) -> list[dict[str, Any]]:
    path = rt.snapshot.data_dir / "audit.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


@pytest.mark.parametrize("kind", sorted(HANDLERS))
def test_null_means_the_default_for_every_handler_kind(make_project: ProjectFactory, kind: str) -> None:
    tool = f"id: t\ndescription: Say a name, a count and a label, for the null tests.\n{PARAMETERS}{HANDLERS[kind]}\n"
    rt = Runtime.load(make_project({"t": tool}, modules={"nulls_mod": MODULE}))
    # what an OpenAI strict-mode model sends for the optional arguments it leaves out
    result = rt.call_sync("t", {"name": "a", "count": None, "label": None})
    assert result.error is None, result.error
    expected = "a 10 " + ("None" if kind == "python" else "")  # a declared-nullable property keeps its null
    assert result.output.rstrip() == expected.rstrip()
    assert rt.call_sync("t", {"name": "b"}).output.rstrip("\n") == "b 10 unset"
    refused = rt.call_sync("t", {"name": None})  # a required property's null is still an error
    assert refused.error is not None and "name" in refused.error


def test_strict_specs_and_null_defaults_meet(make_project: ProjectFactory) -> None:
    """The starter's kind of tool, called the way its strict OpenAI spec makes a model call it."""
    tool = f"id: t\ndescription: Say a name, a count and a label, for the null tests.\n{PARAMETERS}{HANDLERS['argv']}\n"
    rt = Runtime.load(make_project({"t": tool}))
    [spec] = rt.specs("openai")
    assert spec["function"]["strict"] is True
    assert set(spec["function"]["parameters"]["required"]) == {"count", "label", "name"}
    assert rt.call_sync("t", {"name": "x", "count": None, "label": "y"}).output == "x 10 y\n"


LINE_COUNT = """\
id: line_count
description: Count the lines of files, for the path array tests.
parameters:
  type: object
  properties:
    paths: {type: array, items: {type: string}}
  required: [paths]
handler: {argv: [wc, -l, "{{ paths }}"]}
permission: {paths: [paths]}
"""


def test_every_element_of_a_path_array_asks(make_project: ProjectFactory, tmp_path: Path) -> None:
    permissions = 'permission:\n  "*": allow\n  external_directory: ask\n'
    root = make_project({"line_count": LINE_COUNT}, permissions=permissions)
    (root / "inside.txt").write_text("1\n", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("1\n2\n", encoding="utf-8")
    asked: list[AskRequest] = []

    async def reject(request: AskRequest) -> Reply:
        asked.append(request)
        return Reply("reject")

    rt = Runtime.load(root)
    result = rt.call_sync("line_count", {"paths": ["inside.txt", str(outside / "secret.txt")]}, ask=reject)
    assert result.error is not None and "rejected" in result.error
    assert [(p.permission, p.pattern) for r in asked for p in r.pending] == [("external_directory", f"{outside}/*")]
    assert rt.call_sync("line_count", {"paths": ["inside.txt"]}, ask=reject).output.split()[:2] == ["1", "inside.txt"]
    assert len(asked) == 1  # inside the root: nothing to ask


def test_truncated_output_that_cannot_be_saved_still_succeeds(
    make_project: ProjectFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("TOOLRT_DATA_DIR", str(blocker))
    tool = "id: many\ndescription: Print many lines, for the truncation test.\nhandler: {python: 'many_mod:run'}\n"
    module = "def run(args, ctx):\n    return '\\n'.join(str(n) for n in range(1, 5001))\n"
    rt = Runtime.load(make_project({"many": tool}, modules={"many_mod": module}))
    result = rt.call_sync("many", {})
    assert result.error is None
    assert result.metadata["truncated"] is True and "outputPath" not in result.metadata
    assert "the full output could not be saved" in result.output and result.output.startswith("1\n2\n")


FAILING: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "analyzer": (
        "permission: {analyzer: 'failing_mod:analyze'}\nhandler: {argv: [echo, hi]}\n",
        "def analyze(args, site):\n    raise RuntimeError('analyzer bug')\n",
        {},
        "RuntimeError: analyzer bug",
    ),
    "analyzer_import": (
        "permission: {analyzer: 'failing_mod:nope'}\nhandler: {argv: [echo, hi]}\n",
        "",
        {},
        "has no attribute 'nope'",
    ),
    "formatter": (
        "format_validation_error: 'failing_mod:fmt'\nhandler: {argv: [echo, hi]}\n",
        "def fmt(tool, errors):\n    raise ValueError('formatter bug')\n",
        {"n": "not a number"},
        "was called with invalid arguments",
    ),
    "handler_syntax": (
        "handler: {python: 'failing_mod:run'}\n",
        "def run(args, ctx:\n",
        {},
        "syntax error",
    ),
    "handler_import_raises": (
        "handler: {python: 'failing_mod:run'}\n",
        "raise KeyError('at import')\n",
        {},
        "raised KeyError",
    ),
    "pattern_render": (
        "permission: {patterns: ['{{ n + \"x\" }}']}\nhandler: {argv: [echo, hi]}\n",
        "",
        {"n": 1},
        "TypeError",
    ),
}


@pytest.mark.parametrize("case", sorted(FAILING))
def test_a_failing_call_is_a_result_with_one_record(make_project: ProjectFactory, case: str) -> None:
    extra, module, args, message = FAILING[case]
    tool = (
        "id: t\ndescription: A tool whose project code fails, for the failure tests.\n"
        "parameters: {type: object, properties: {n: {type: integer}}}\n" + extra
    )
    rt = Runtime.load(make_project({"t": tool}, modules={"failing_mod": module}))
    result = rt.call_sync("t", args)
    assert result.error is not None and message in result.error, result.error
    records = _records(rt)
    assert len(records) == 1 and records[0]["tool"] == "t" and records[0]["error"] == result.error
