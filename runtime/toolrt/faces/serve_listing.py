"""`tools/list` of `toolrt serve` in wire form: built once per snapshot, selection and kind of client, and
paged only above `--page-size`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..build.selection import ToolSet

_LIST_RESULT: dict[str, Any] = types.ListToolsResult(tools=[]).model_dump(by_alias=True, mode="json", exclude_none=True)
"""The fields of a `tools/list` result besides its tools (the SDK shapes them for each protocol version)."""


def _page_start(cursor: str | None, total: int) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or int(cursor) > total:
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r} (list the tools again from the start)")
    return int(cursor)


def listing_page(tools: tuple[dict[str, Any], ...], cursor: str | None, size: int) -> dict[str, Any]:
    """The `tools/list` result: every tool when they fit in one page of `size` and no cursor was sent,
    else the page from `cursor` with the next one's cursor."""
    if len(tools) <= size and cursor is None:
        return {**_LIST_RESULT, "tools": list(tools)}
    start = _page_start(cursor, len(tools))
    end = start + size
    next_cursor = {"nextCursor": str(end)} if end < len(tools) else {}
    return {**_LIST_RESULT, **next_cursor, "tools": list(tools[start:end])}


@dataclass(frozen=True, slots=True)
class Listing:
    """`tools/list` in wire form for one selection, with the compiled spec each entry was made from."""

    toolset: ToolSet
    tools: tuple[dict[str, Any], ...]
    made_from: dict[int, tuple[Mapping[str, Any], dict[str, Any]]]
    """By the spec's `id`: the spec (kept alive, so that the id stays its own) and its wire form."""

    @classmethod
    def build(cls, toolset: ToolSet, specs: Sequence[Mapping[str, Any]], previous: Listing | None) -> Listing:
        """Each spec as the SDK's `Tool` in wire form; a spec object the previous listing was made from (a
        snapshot keeps the compiled spec of every tool a reload left unchanged) is not validated again."""
        made = previous.made_from if previous is not None else {}
        made_from: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}
        for spec in specs:
            found = made.get(id(spec))
            if found is None or found[0] is not spec:
                found = (
                    spec,
                    types.Tool.model_validate(spec).model_dump(by_alias=True, mode="json", exclude_none=True),
                )
            made_from[id(spec)] = found
        return cls(toolset, tuple(wire for _, wire in made_from.values()), made_from)
