"""The `edit` tool: replace one exact (or nearly exact) piece of a file the session has read.

OpenCode §13: the nine replacers of `replacers` find what the model meant by `oldString`; an empty
`oldString` creates or overwrites the file with `newString`; a CRLF file keeps its line endings
(old and new are converted to CRLF before matching); the file must have been read in this session
and be unchanged since. Beyond OpenCode v1.1, overwriting an *existing* file through an empty
`oldString` is held to the same read-first rule as `write`, since it replaces the whole file.
The `edit` permission on the root-relative path is asked by dispatch from the YAML.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..call.context import ToolContext
from ..errors import ToolFailure
from ..lsp.report import edit_report
from . import filetime
from .diff import MAX_DIFF_CHARS, omitted_diff, trim_diff, unified_diff
from .filepaths import (
    attribute_writes,
    describe_mode,
    encode_text,
    guard,
    is_a_directory,
    read_regular,
    relative,
    stat_or_none,
    write_regular,
)
from .replacers import SAME_STRINGS, replace

__all__ = ["MAX_EDIT_BYTES", "edit"]

MAX_EDIT_BYTES = 10 * 1024 * 1024
"""Larger files are refused: the fuzzy replacers scan the whole text several times."""


@dataclass(frozen=True, slots=True)
class _Request:
    path: Path
    real: Path
    old: str
    new: str
    replace_all: bool


def _to_endings(text: str, crlf: bool) -> str:
    text = text.replace("\r\n", "\n")
    return text.replace("\n", "\r\n") if crlf else text


def _check_target(status: os.stat_result, display: str) -> None:
    if stat.S_ISDIR(status.st_mode):
        raise is_a_directory(display)
    if not stat.S_ISREG(status.st_mode):
        raise ToolFailure(
            f"Cannot edit {display}: it is {describe_mode(status.st_mode)}, not a regular file. "
            "Only regular files can be edited."
        )


def _edit_sync(request: _Request, session_state: MutableMapping[str, Any]) -> str:
    """Apply the edit; return the (indentation-trimmed) diff."""
    display = str(request.path)
    status = stat_or_none(request.real, display)
    if request.old == "":
        before: str | None = ""
        if status is not None:
            _check_target(status, display)
            filetime.assert_fresh(session_state, request.real, display)
            before = read_regular(request.real, display)[0] if status.st_size <= MAX_DIFF_CHARS else None
        written = write_regular(request.real, encode_text(request.new, display), display)
        filetime.record(session_state, request.real, written)
        return omitted_diff(display) if before is None else trim_diff(unified_diff(display, before, request.new))
    if status is None:
        raise ToolFailure(f"File {display} not found")
    _check_target(status, display)
    filetime.assert_fresh(session_state, request.real, display)
    if status.st_size > MAX_EDIT_BYTES:
        raise ToolFailure(
            f"Cannot edit {display}: it is {status.st_size} bytes, over the {MAX_EDIT_BYTES} byte limit of the "
            "edit tool. Use bash with a stream editor (sed) for changes to a file this large."
        )
    text = read_regular(request.real, display)[0]
    crlf = "\r\n" in text
    changed = replace(
        text, _to_endings(request.old, crlf), _to_endings(request.new, crlf), replace_all=request.replace_all
    )
    written = write_regular(request.real, encode_text(changed, display), display)
    filetime.record(session_state, request.real, written)
    return trim_diff(unified_diff(display, _to_endings(text, False), _to_endings(changed, False)))


async def edit(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Replace `oldString` with `newString` in `filePath` (every occurrence with `replaceAll`).

    Returns `{title, output, metadata: {diff, filepath}}`.

    Raises:
        ToolFailure: OpenCode's texts for a missing path, identical strings, no match or several matches;
            the file was not read in this session or changed since; a special or oversized file.
        PermissionBlocked: the file lies outside the root and `external_directory` was not allowed.
    """
    file_path: str = args["filePath"]
    if not file_path:
        raise ToolFailure("filePath is required")
    old: str = args["oldString"]
    new: str = args["newString"]
    if old == new:
        raise ToolFailure(SAME_STRINGS)
    path = ctx.resolve(file_path)
    real = await guard(ctx, path, writes=True)
    request = _Request(path, real, old, new, bool(args.get("replaceAll", False)))
    diff = await anyio.to_thread.run_sync(partial(_edit_sync, request, ctx.session_state))
    attribute_writes(ctx, (real,), "edit")
    output = "Edit applied successfully."
    lsp = ctx.lsp
    if lsp is not None:
        output += edit_report(path, await lsp.diagnostics([path]))
    return {
        "title": relative(path, ctx.root),
        "output": output,
        "metadata": {"diff": diff, "filepath": str(path)},
    }
