"""The `lsp` tool (OpenCode's experimental one, behind flag `lsp_tool`): definitions, references,
hover, symbols, implementations and the call hierarchy from the project's language servers.

Positions are 1-based for the model and converted to the protocol's 0-based UTF-16 offsets here;
the answer is text (`toolrt.lsp.operations`). A server that cannot start, exits or does not answer
makes the call fail with an error that names the server and what happened; the next call tries
again (the manager's back-off permitting).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import anyio.to_thread

from ..call.context import ToolContext
from ..errors import ToolFailure
from .filepaths import guard, guard_read, read_regular, readable, relative, stat_or_none

__all__ = ["REQUEST_TIMEOUT", "lsp"]

REQUEST_TIMEOUT = 30.0
"""Seconds one request may take once the server runs (the server's start has its own limit)."""


async def lsp(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run one operation; returns `{title, output, metadata: {servers, result}}`.

    Raises:
        ToolFailure: the file does not exist; a position operation without line and character; no
            server for the file; every server of it failed (LspError, naming each).
    """
    from ..lsp.manager import unsupported
    from ..lsp.operations import POSITIONAL, Request, format_results, operation, to_utf16

    op: str = args["operation"]
    named = ctx.resolve(args["filePath"])
    line = args.get("line")
    character = args.get("character")
    shown = relative(named, ctx.root)
    title = f"{op} {shown}" + (f":{line}:{character}" if line is not None and character is not None else "")
    # The server is sent the file's text and answers from it: the read rules hold as for `read`, on the
    # path as named and on its target, and the text is what the checked real path's descriptor holds.
    await guard_read(ctx, named)
    path = await guard(ctx, named)
    if await anyio.to_thread.run_sync(stat_or_none, path, shown) is None:
        raise ToolFailure(f"File not found: {named}")
    text, _ = await anyio.to_thread.run_sync(read_regular, path, shown)
    if op in POSITIONAL and (line is None or character is None):
        raise ToolFailure(
            f"{op} needs `line` and `character` (1-based, as the read tool shows them): the position of the "
            "symbol's name in the file."
        )
    access = ctx.lsp
    if access is None:
        raise ToolFailure(
            "No LSP server available for this file type (language servers are switched off for this project). "
            "Use grep and read instead."
        )
    column = 0
    if op in POSITIONAL:
        assert line is not None and character is not None
        lines = text.splitlines()
        at = lines[line - 1] if 0 < line <= len(lines) else None
        column = to_utf16(at, character - 1) if at is not None else character - 1
    request = Request(op, path, (line or 1) - 1, column, str(args.get("query") or ""))
    answers = await access.query(path, operation(request), REQUEST_TIMEOUT, text)
    results = [(name, result) for name, result in answers if result is not unsupported()]
    output = await anyio.to_thread.run_sync(format_results, request, results, ctx.root, partial(readable, ctx))
    lacking = [name for name, result in answers if result is unsupported()]
    if lacking and not results:
        output += f" ({' and '.join(lacking)} {'does' if len(lacking) == 1 else 'do'} not support {op})"
    return {
        "title": title,
        "output": output,
        "metadata": {"servers": [name for name, _ in results], "result": [result for _, result in results]},
    }
