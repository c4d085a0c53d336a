"""Structured output: a tool with an `output:` schema returns its data, validated, as MCP `structuredContent`
(with the schema as `outputSchema`) and as JSON text for providers that take text."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from cli_helpers import run
from conftest import ProjectFactory
from test_serve_inprocess import serving

from toolrt import Runtime

COUNT = """\
id: count
description: Count the lines and words of a text and return both numbers; use it to size a text first.
parameters:
  type: object
  properties: {{text: {{type: string}}}}
  required: [text]
output:
  type: object
  properties:
    lines: {{type: integer}}
    words: {{type: integer}}
  required: [lines, words]
handler: {{{handler}}}
"""

MODULE = """\
def count(args, ctx):
    text = args["text"]
    return {"lines": text.count("\\n") + 1, "words": len(text.split())}

def wrong(args, ctx):
    return {"lines": "many", "words": None}

def text(args, ctx):
    return "3 words"
"""


def _project(make_project: ProjectFactory, handler: str = 'python: "counting:count"') -> Path:
    return make_project(
        {"count": COUNT.format(handler=handler)},
        permissions="permission:\n  count: allow\n",
        modules={"counting": MODULE},
    )


def test_the_data_is_validated_kept_and_its_json_is_the_text(make_project: ProjectFactory) -> None:
    rt = Runtime.load(_project(make_project))
    result = anyio.run(lambda: rt.call("count", {"text": "a b\nc"}))
    assert result.error is None
    assert dict(result.structured or {}) == {"lines": 2, "words": 3}
    assert json.loads(result.output) == {"lines": 2, "words": 3}
    assert result.to_json()["structured"] == {"lines": 2, "words": 3}


def test_data_that_misses_the_schema_is_an_error_naming_each_mismatch(make_project: ProjectFactory) -> None:
    for handler, expected in (
        ("counting:wrong", 'does not match its output schema: /lines: "many" is not of type "integer"; /words: null'),
        ("counting:text", "returned str; a tool with an output schema returns its data as a mapping"),
    ):
        rt = Runtime.load(_project(make_project, f'python: "{handler}"'))
        result = anyio.run(rt.call, "count", {"text": "a"})
        assert result.structured is None
        assert result.error is not None and expected in result.error, result.error


def test_mcp_clients_get_the_output_schema_and_structured_content(make_project: ProjectFactory) -> None:
    rt = Runtime.load(_project(make_project))

    async def main() -> None:
        async with serving(rt) as served:
            (tool,) = (await served.client.list_tools()).tools
            assert tool.output_schema is not None and tool.output_schema["required"] == ["lines", "words"]
            result = await served.client.call_tool("count", {"text": "one two"})
            assert result.is_error is False
            assert result.structured_content == {"lines": 1, "words": 2}
            assert json.loads(result.content[0].text) == {"lines": 1, "words": 2}  # type: ignore[union-attr]

    anyio.run(main)


def test_validate_checks_the_output_schema_like_parameters(make_project: ProjectFactory) -> None:
    broken = COUNT.format(handler='python: "counting:count"').replace("lines: {type: integer}", "lines: {type: integr}")
    root = make_project({"count": broken}, modules={"counting": MODULE})
    code, out, _ = run("validate", "--root", str(root))
    assert code == 1
    assert "tools.d/count.yaml:10:13: not a valid JSON Schema: 'integr' is not a JSON Schema type" in out
    root = make_project({"count": COUNT.format(handler='argv: [echo, "{{ text }}"]')})
    code, out, _ = run("validate", "--root", str(root))
    assert code == 1
    assert "tools.d/count.yaml:7:1: 'output' needs a python or host handler: an argv tool's output is text" in out
    odd = COUNT.format(handler='python: "counting:count"').replace("required: [lines, words]", "requierd: [lines]")
    code, out, _ = run("validate", "--root", str(make_project({"count": odd}, modules={"counting": MODULE})))
    assert "tools.d/count.yaml:12:3: warning: unknown JSON Schema keyword 'requierd'" in out
