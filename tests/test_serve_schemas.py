"""MCP input schemas as written (`$defs`, `$ref`, `$anchor` kept, SEP-1613/2106), inlined for the clients known
by `clientInfo.name` to drop `$defs` (`serve.inline_refs: auto`), for every client (`always`) or none (`never`);
the official client in process, both protocol versions."""

from __future__ import annotations

import json

import mcp_types as types
import pytest
from conftest import ProjectFactory
from test_serve_inprocess import run, serving

from toolrt import Runtime

TOOL = """\
id: assign
description: Assigns a change to a person, for the schema tests of toolrt serve.
parameters:
  type: object
  $defs:
    Person: {$anchor: person, type: object, properties: {name: {type: string}}, required: [name]}
  properties:
    owner: {$ref: "#/$defs/Person"}
    reviewer: {$ref: "#person"}
  required: [owner]
handler: {argv: [echo, "{{ owner.name }}"]}
"""


@pytest.mark.parametrize(
    ("setting", "client", "mode", "inlined"),
    [
        (None, "some-agent", "legacy", False),
        (None, "some-agent", "auto", False),
        (None, "claude-ai", "legacy", True),
        (None, "Visual Studio Code", "auto", True),
        ("never", "claude-ai", "legacy", False),
        ("always", "some-agent", "legacy", True),
    ],
)
def test_schemas_are_served_as_written_unless_the_client_drops_defs(
    make_project: ProjectFactory, setting: str | None, client: str, mode: str, inlined: bool
) -> None:
    settings = f"serve: {{inline_refs: {setting}}}\n" if setting else None
    rt = Runtime.load(make_project({"assign": TOOL}, permissions="permission:\n  assign: allow\n", settings=settings))
    info = types.Implementation(name=client, version="1.0")

    async def main() -> None:
        async with serving(rt, mode=mode, client_info=info) as served:
            (tool,) = (await served.client.list_tools()).tools
            text = json.dumps(tool.input_schema)
            if inlined:
                assert "$defs" not in text and "$ref" not in text and "$anchor" not in text
                assert tool.input_schema["properties"]["reviewer"]["properties"]["name"] == {"type": "string"}
            else:
                assert tool.input_schema["$defs"]["Person"]["$anchor"] == "person"
                assert tool.input_schema["properties"] == {
                    "owner": {"$ref": "#/$defs/Person"},
                    "reviewer": {"$ref": "#person"},
                }
            result = await served.client.call_tool("assign", {"owner": {"name": "Ann"}})
            assert (result.is_error, result.content[0].text) == (False, "Ann\n")  # type: ignore[union-attr]
            refused = await served.client.call_tool("assign", {"owner": {}})
            assert refused.is_error and "name" in refused.content[0].text  # type: ignore[union-attr]

    run(main)
