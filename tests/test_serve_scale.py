"""`toolrt serve` at scale: listings from the spec cache, pages only above the page size, the schema hook,
and a `tools/call` over HTTP that neither lists nor compiles the other tools' specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from serve_http import serving
from test_serve_sessions import MODERN

import toolrt.specs
from toolrt.api import Runtime
from toolrt.errors import UsageError
from toolrt.faces.serve import McpFace, ServeLimits, build_server
from toolrt.scope import CallScope
from toolrt.specs import CompiledSpec

TOOL = """\
id: {id}
description: "Echoes the number it is given, for the serve tests ({id})."
parameters: {{type: object, properties: {{n: {{type: integer}}}}, required: [n]}}
handler: {{argv: ["echo", "{{{{ n }}}}"]}}
"""


def project(tmp_path: Path, ids: list[str]) -> Path:
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    for tool_id in ids:
        (root / "tools.d" / f"{tool_id}.yaml").write_text(TOOL.format(id=tool_id), encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    return root


def test_tools_list_pages_only_above_the_page_size(tmp_path: Path) -> None:
    rt = Runtime.load(project(tmp_path, ["t1", "t2", "t3"]))

    async def main() -> None:
        small, small_face = build_server(rt, CallScope(), ServeLimits(page_size=2))
        async with Client(small, mode="legacy") as client:
            first = await client.list_tools()
            assert [t.name for t in first.tools] == ["t1", "t2"]
            assert first.next_cursor == "2"
            second = await client.list_tools(cursor=first.next_cursor)
            assert [t.name for t in second.tools] == ["t3"]
            assert second.next_cursor is None
            with pytest.raises(MCPError, match="Invalid cursor: 'zz'"):
                await client.list_tools(cursor="zz")
        small_face.close()
        large, large_face = build_server(rt, CallScope(), ServeLimits(page_size=3))
        async with Client(large, mode="legacy") as client:
            whole = await client.list_tools()
            assert [t.name for t in whole.tools] == ["t1", "t2", "t3"]
            assert whole.next_cursor is None
        large_face.close()

    anyio.run(main)


def test_the_sdk_gets_input_schemas_from_the_snapshot_without_listing(tmp_path: Path) -> None:
    rt = Runtime.load(project(tmp_path, ["t1", "t2"]))
    server, face = build_server(rt, CallScope())
    assert server.get_tool_input_schema is not None
    schema = server.get_tool_input_schema("t2")
    assert schema == {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert server.get_tool_input_schema("nope") is None
    # Compiled once per snapshot and selection: the same object until a swap.
    assert server.get_tool_input_schema("t2") is schema
    rt.register(
        {
            "id": "t3",
            "description": "A third tool registered at run time, for the cache test.",
            "parameters": {"type": "object"},
            "handler": {"argv": ["true"]},
        }
    )
    assert server.get_tool_input_schema("t3") == {"type": "object"}
    face.close()


def test_a_call_over_sessionless_http_neither_lists_nor_compiles_the_other_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The 2026-07-28 HTTP path reads each call's input schema (for its Mcp-Param headers) through the
    # hook; without it the SDK would run tools/list for every call, a cost in the number of tools.
    rt = Runtime.load(project(tmp_path, [f"t{i}" for i in range(40)]))
    compiled: list[str] = []
    listings: list[object] = []
    compile_spec = toolrt.specs.compile_spec
    list_tools = McpFace.list_tools

    def counting_compile(format: str, **fields: Any) -> CompiledSpec:
        compiled.append(f"{format}:{fields['name']}")
        return compile_spec(format, **fields)

    async def counting_list(self: McpFace, ctx: Any, params: Any) -> dict[str, Any]:
        listings.append(params)
        return await list_tools(self, ctx, params)

    monkeypatch.setattr(toolrt.specs, "compile_spec", counting_compile)
    monkeypatch.setattr(McpFace, "list_tools", counting_list)

    async def main() -> None:
        with anyio.fail_after(40):
            async with serving(rt) as url:
                for client_number in (1, 2):
                    async with Client(url, mode=MODERN) as client:
                        for n in range(5):
                            result = await client.call_tool("t7", {"n": n})
                            assert result.is_error is False, result
                    # The client lists once, to learn the tool it calls; the server answers from its cache.
                    assert len(listings) == client_number

    anyio.run(main)
    assert sorted(compiled) == sorted(f"mcp:t{i}" for i in range(40))  # each spec compiled once, ten calls


def test_a_page_size_below_one_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--page-size must be at least 1, not 0"):
        ServeLimits(page_size=0)


def test_specs_compile_once_per_selection_and_hand_out_new_top_level_dicts(tmp_path: Path) -> None:
    rt = Runtime.load(project(tmp_path, ["t1", "t2"]))
    first = rt.specs("anthropic")
    first[0]["cache_control"] = {"type": "ephemeral"}
    again = rt.specs("anthropic")
    assert "cache_control" not in again[0]
    assert again[0]["input_schema"] is first[0]["input_schema"]  # compiled once, not per request
    assert rt.tools().names() == ("t1", "t2")
    assert "t2" in rt.tools() and "nope" not in rt.tools()
    with pytest.raises(UsageError, match="unknown spec format 'yaml'"):
        rt.specs("yaml")
    rt.register(
        {
            "id": "t1",
            "description": "Replaced at run time, for the cache test of the specs.",
            "parameters": {"type": "object"},
            "handler": {"argv": ["true"]},
        }
    )
    assert rt.specs("anthropic")[0]["description"].startswith("Replaced at run time")


def test_a_handler_error_under_an_abort_event_reaches_the_model_as_itself(tmp_path: Path) -> None:
    root = project(tmp_path, ["t1"])
    (root / "toolrt.yaml").write_text("builtin_tools: [edit]\n", encoding="utf-8")
    (root / "notes.txt").write_text("alpha\n", encoding="utf-8")
    rt = Runtime.load(root)
    args = {"filePath": str(root / "notes.txt"), "oldString": "alpha", "newString": "beta"}
    result = rt.call_sync("edit", args, abort=anyio.Event())
    assert result.error is not None
    assert result.error.startswith("You must read the file"), result.error


def test_a_handshake_era_listing_is_what_the_sdk_would_send_each_tool_shaped_once(tmp_path: Path) -> None:
    """`tools/list` of a handshake-era client is answered from the listing shaped per protocol version
    (`ShapedListing`): exactly the SDK's own shaping of the whole result, and a reload reshapes only the
    tool it changed."""
    from mcp_types import methods
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from toolrt.faces.serve_listing import Listing, listing_page, shaped_page

    root = project(tmp_path, ["t1", "t2", "t3"])
    (root / "toolrt.yaml").write_text("builtin_tools: true\n", encoding="utf-8")  # rich schemas and annotations
    rt = Runtime.load(root)
    toolset = rt.tools()
    listing = Listing.build(toolset, toolset.specs("mcp"), None)
    assert len(listing.tools) > 10
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        for cursor, size in ((None, 100), ("2", 5)):
            by_sdk = methods.serialize_server_result("tools/list", version, listing_page(listing.tools, cursor, size))
            assert shaped_page(listing_page(listing.shaped(version), cursor, size), version) == by_sdk
            assert by_sdk.get("nextCursor") == (None if cursor is None else "7")
    before = listing.shaped("2025-11-25")
    (root / "tools.d" / "t2.yaml").write_text(TOOL.format(id="t2").replace("Echoes", "Repeats"), encoding="utf-8")
    rt.reload()
    toolset = rt.tools()
    after = Listing.build(toolset, toolset.specs("mcp"), listing).shaped("2025-11-25")
    changed = [new for old, new in zip(before, after, strict=True) if old is not new]
    # The built-in skill tool is described by a hook that every build runs again (its skills may change).
    assert {tool["name"]: tool["description"][:7] for tool in changed if tool["name"] != "skill"} == {"t2": "Repeats"}


def test_a_handshake_era_client_lists_pages_and_is_refused_a_bad_cursor_through_the_shaped_listing(
    tmp_path: Path,
) -> None:
    rt = Runtime.load(project(tmp_path, ["t1", "t2", "t3"]))

    async def main() -> None:
        server, face = build_server(rt, CallScope(), ServeLimits(page_size=2))
        async with Client(server, mode="legacy") as legacy, Client(server, mode=MODERN) as modern:
            assert legacy.protocol_version < "2026" <= modern.protocol_version
            for client in (legacy, modern):
                first = await client.list_tools()
                assert ([t.name for t in first.tools], first.next_cursor) == (["t1", "t2"], "2")
                second = await client.list_tools(cursor="2")
                assert ([t.name for t in second.tools], second.next_cursor) == (["t3"], None)
                assert second.tools[0].input_schema["required"] == ["n"]
                with pytest.raises(MCPError, match="Invalid cursor: '9'"):
                    await client.list_tools(cursor="9")
        face.close()

    anyio.run(main)


@pytest.mark.parametrize("cursor", ["²", "٢", "9" * 5000, "02"])
def test_a_cursor_toolrt_never_gave_is_refused_as_one_whatever_its_digits(tmp_path: Path, cursor: str) -> None:
    """A cursor is the decimal offset toolrt wrote: a superscript or Arabic-Indic digit (which `str.isdigit`
    takes, and `int` refuses or reads as an offset), past `int`'s 4,300 digits, or with a leading zero, is the
    same INVALID_PARAMS as any other bad cursor, not an internal error that echoes Python's message."""
    rt = Runtime.load(project(tmp_path, ["t1", "t2", "t3"]))

    async def main() -> None:
        server, face = build_server(rt, CallScope(), ServeLimits(page_size=2))
        async with Client(server, mode="legacy") as legacy, Client(server, mode=MODERN) as modern:
            for client in (legacy, modern):
                with pytest.raises(MCPError, match=r"Invalid cursor: .* \(list the tools again from the start\)"):
                    await client.list_tools(cursor=cursor)
                assert [t.name for t in (await client.list_tools(cursor="2")).tools] == ["t3"]
        face.close()

    anyio.run(main)
