"""The `write` tool: create a file, or replace the whole content of one the session has read.

OpenCode §13: parent directories are created; an existing file must have been read in this session
and be unchanged since (filetime); the metadata carries a unified diff for the reviewer. The `edit`
permission on the root-relative path is asked by dispatch from the YAML before this runs.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..call.context import ToolContext
from ..errors import ToolFailure
from ..lsp.report import write_report
from . import filetime
from .diff import MAX_DIFF_CHARS, omitted_diff, trim_diff, unified_diff
from .filepaths import (
    attribute_writes,
    encode_text,
    guard,
    is_a_directory,
    not_regular,
    read_regular,
    relative,
    stat_or_none,
    write_regular,
)

__all__ = ["write"]


@dataclass(frozen=True, slots=True)
class _Written:
    existed: bool
    diff: str


def _write_sync(path: Path, real: Path, content: str, session_state: MutableMapping[str, Any]) -> _Written:
    display = str(path)
    data = encode_text(content, display)
    status = stat_or_none(real, display)
    old: str | None = ""
    if status is not None:
        if stat.S_ISDIR(status.st_mode):
            raise is_a_directory(display)
        if not stat.S_ISREG(status.st_mode):
            raise not_regular(display, status.st_mode)
        filetime.assert_fresh(session_state, real, display)
        # A file too large to diff is not read at all: its old text would only feed the diff.
        old = read_regular(real, display)[0] if status.st_size <= MAX_DIFF_CHARS else None
    new_status = write_regular(real, data, display)
    filetime.record(session_state, real, new_status)
    diff = omitted_diff(display) if old is None else trim_diff(unified_diff(display, old, content))
    return _Written(existed=status is not None, diff=diff)


async def write(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Write `content` to `filePath`, creating directories.

    Returns `{title, output, metadata: {diff, filepath, exists}}`; the file's new stamp is recorded in
    filetime, so the session may write or edit it again without reading it first.

    Raises:
        ToolFailure: the path is a directory or special file, the existing file was not read (or changed
            since), or the file cannot be written.
        PermissionBlocked: the file lies outside the root and `external_directory` was not allowed.
    """
    file_path: str = args["filePath"]
    if not file_path:
        raise ToolFailure("filePath is required")
    content: str = args["content"]
    path = ctx.resolve(file_path)
    real = await guard(ctx, path, writes=True)
    written = await anyio.to_thread.run_sync(partial(_write_sync, path, real, content, ctx.session_state))
    attribute_writes(ctx, (real,), "write")
    output = "Wrote file successfully."
    lsp = ctx.lsp
    if lsp is not None:
        output += write_report(path, await lsp.diagnostics([path]))
    return {
        "title": relative(path, ctx.root),
        "output": output,
        "metadata": {"diff": written.diff, "filepath": str(path), "exists": written.existed},
    }
