"""`tools/list` of `toolrt serve` in wire form: built once per snapshot, selection and kind of client, and
paged only above `--page-size`; for a handshake-era client also in the shape the SDK's result surface of its
protocol version gives it, each tool shaped once (`Listing.shaped`, answered by `ShapedListing`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from ..build.selection import ToolSet
from .serve_client import RequestContext
from .serve_sessions import connection_of

_LIST_RESULT: dict[str, Any] = types.ListToolsResult(tools=[]).model_dump(by_alias=True, mode="json", exclude_none=True)
"""The fields of a `tools/list` result besides its tools (the SDK shapes them for each protocol version)."""


def _page_start(cursor: str | None, total: int) -> int:
    """The offset a cursor names: only the decimal form toolrt writes (`str.isdigit` also takes other
    scripts' digits, which `int` reads or refuses, and `int` refuses more than 4,300 digits)."""
    if cursor is None:
        return 0
    short = cursor.isascii() and cursor.isdigit() and len(cursor) <= len(str(total))
    start = int(cursor) if short else -1
    if str(start) != cursor or start > total:
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r} (list the tools again from the start)")
    return start


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
class _Made:
    """One tool of a listing: the compiled spec (held, so that its id stays its own), its wire form, and
    that wire form as each protocol version's result surface shapes it (filled on first use)."""

    spec: Mapping[str, Any]
    wire: dict[str, Any]
    shaped: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Listing:
    """`tools/list` in wire form for one selection, with the compiled spec each entry was made from."""

    toolset: ToolSet
    tools: tuple[dict[str, Any], ...]
    made_from: dict[int, _Made]
    """By the spec's `id`: the spec, its wire form and its shapes per protocol version."""
    _shaped: dict[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)

    @classmethod
    def build(cls, toolset: ToolSet, specs: Sequence[Mapping[str, Any]], previous: Listing | None) -> Listing:
        """Each spec as the SDK's `Tool` in wire form; a spec object the previous listing was made from (a
        snapshot keeps the compiled spec of every tool a reload left unchanged) is not validated again."""
        made = previous.made_from if previous is not None else {}
        made_from: dict[int, _Made] = {}
        for spec in specs:
            found = made.get(id(spec))
            if found is None or found.spec is not spec:
                wire = types.Tool.model_validate(spec).model_dump(by_alias=True, mode="json", exclude_none=True)
                found = _Made(spec, wire)
            made_from[id(spec)] = found
        return cls(toolset, tuple(made.wire for made in made_from.values()), made_from)

    def shaped(self, version: str) -> tuple[dict[str, Any], ...]:
        """The tools as the SDK's result surface of protocol `version` shapes them (validated and dumped, the
        fields that version lacks dropped): what the SDK would send. Each tool is shaped once, and a tool
        that a reload left unchanged keeps its shape."""
        found = self._shaped.get(version)
        if found is None:
            model = _surface_tool(version)
            for made in self.made_from.values():
                if version not in made.shaped:
                    made.shaped[version] = model.model_validate(made.wire, by_name=False).model_dump(
                        by_alias=True, mode="json", exclude_none=True
                    )
            found = self._shaped[version] = tuple(made.shaped[version] for made in self.made_from.values())
        return found


def _surface_tool(version: str) -> type[BaseModel]:
    """The `Tool` model of the SDK's `tools/list` result surface for protocol `version`."""
    result = methods.SERVER_RESULTS[("tools/list", version)]
    assert isinstance(result, type) and issubclass(result, BaseModel)
    (tool,) = getattr(result.model_fields["tools"].annotation, "__args__", (None,))
    assert isinstance(tool, type) and issubclass(tool, BaseModel)
    return tool


def shaped_page(page: dict[str, Any], version: str) -> dict[str, Any]:
    """A page of shaped tools (`Listing.shaped`) with its other fields shaped as the SDK's surface of
    `version` shapes them (a handshake-era result keeps `nextCursor` only)."""
    envelope = methods.serialize_server_result("tools/list", version, {**page, "tools": []})
    return {**envelope, "tools": page["tools"]}


ListingAnswer = Callable[[RequestContext, types.PaginatedRequestParams, str], Awaitable[dict[str, Any]]]
"""(request, its params, protocol version) → the `tools/list` result in the version's shape."""


class ShapedListing:
    """Server middleware: a handshake-era client's `tools/list` is answered from the listing already shaped
    for its protocol version (`Listing.shaped`), where the SDK would validate and dump every tool of it
    again on each request (~10 ms at 1,000 tools, on the path from a save to the client's new listing).

    Everything else goes the SDK's way: other methods, 2026-07-28 clients (whose results the SDK stamps),
    a request before initialization, params the SDK's surface refuses, and cache hints for `tools/list`.
    """

    def __init__(self, answer: ListingAnswer, cache_hints: Mapping[str, Any]) -> None:
        self._answer = answer
        self._cache_hints = cache_hints

    async def __call__(self, ctx: RequestContext, call_next: CallNext) -> HandlerResult:
        version = ctx.protocol_version
        if (
            ctx.method != "tools/list"
            or version in MODERN_PROTOCOL_VERSIONS
            or "tools/list" in self._cache_hints
            or not connection_of(ctx).initialize_accepted
        ):
            return await call_next(ctx)
        try:
            methods.validate_client_request("tools/list", version, ctx.params)
            params = types.PaginatedRequestParams.model_validate(ctx.params or {}, by_name=False)
        except (ValidationError, KeyError, ValueError):
            return await call_next(ctx)  # the SDK answers with its error
        return await self._answer(ctx, params, version)
