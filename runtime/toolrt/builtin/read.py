"""The `read` tool: a window of a text file with line numbers, an image or PDF as an attachment, or a directory listing.

Texts and limits are OpenCode v1.1's (§12): 0-based `offset`, `limit` 2000 lines, lines cut at
2000 characters, output capped at 51200 bytes, and exactly one end note. The file is streamed line
by line and never read past the window (plus one line to know whether more follow), so a huge file
costs what the window costs. Only regular files are opened, and without blocking (see filepaths).
Where v1.1 counted the empty string after a final newline as one more line, this counts lines as
a text editor does (later upstream does the same).
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import anyio.to_thread

from ..beneath import open_checked
from ..call.context import ToolContext
from ..errors import PathChanged, ToolFailure
from . import filetime
from .filepaths import guard, open_regular, relative, stat_or_none

__all__ = [
    "BINARY_EXTENSIONS",
    "DEFAULT_LIMIT",
    "MAX_ATTACHMENT_BYTES",
    "MAX_BYTES",
    "MAX_LINE_LENGTH",
    "looks_binary",
    "read",
]

DEFAULT_LIMIT = 2000
MAX_LINE_LENGTH = 2000
MAX_BYTES = 50 * 1024
MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024
"""Images and PDFs above this size are refused rather than base64-encoded into the conversation."""
PREVIEW_LINES = 20
SAMPLE_BYTES = 4096

BINARY_EXTENSIONS = frozenset(
    ".zip .tar .gz .exe .dll .so .class .jar .war .7z .doc .docx .xls .xlsx .ppt .pptx .odt .ods .odp "
    ".bin .dat .obj .o .a .lib .wasm .pyc .pyo".split()
)
# Images the providers accept as attachments; SVG is text and stays text.
_ATTACHMENT_TYPES: Mapping[str, str] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".ico": "image/x-icon",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".avif": "image/avif",
    ".heic": "image/heic",
    ".heif": "image/heif",
    ".pdf": "application/pdf",
}
_NON_PRINTABLE = frozenset([*range(9), *range(14, 32)])
# Enough bytes to hold MAX_LINE_LENGTH characters of any UTF-8 text, plus one to know the line is longer.
_KEEP_BYTES = MAX_LINE_LENGTH * 4 + 4
_CHUNK = 64 * 1024
_SKIP_BLOCK = 1024 * 1024
_MAX_SUGGESTIONS = 3


@dataclass(frozen=True, slots=True)
class _Window:
    """The lines shown, and why the window stopped where it did."""

    lines: tuple[str, ...]
    more: bool
    """Lines exist after the window."""
    byte_capped: bool
    total: int
    """The file's line count; exact only when `more` is False."""


def looks_binary(name: str, sample: bytes) -> bool:
    """OpenCode's test: a binary extension, a NUL byte, or over 30% control bytes in the first 4 KB."""
    if Path(name).suffix.lower() in BINARY_EXTENSIONS:
        return True
    if not sample:
        return False
    if 0 in sample:
        return True
    control = sum(1 for byte in sample if byte in _NON_PRINTABLE)
    return control / len(sample) > 0.3


def _raw_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Each line's bytes without its line ending, cut to `_KEEP_BYTES`; the rest of a long line is skipped unread."""
    while True:
        piece = stream.readline(_CHUNK)
        if not piece:
            return
        kept = piece[:_KEEP_BYTES]
        while not piece.endswith(b"\n"):
            piece = stream.readline(_CHUNK)
            if not piece:
                break
            if len(kept) < _KEEP_BYTES:
                kept += piece[: _KEEP_BYTES - len(kept)]
        if kept.endswith(b"\n"):
            kept = kept[:-1]
        if kept.endswith(b"\r"):
            kept = kept[:-1]
        yield kept


def _display(raw: bytes, first: bool) -> str:
    text = raw.decode("utf-8", errors="replace")
    if first:
        text = text.removeprefix("\ufeff")
    if len(text) > MAX_LINE_LENGTH:
        return text[:MAX_LINE_LENGTH] + "..."
    return text


def _skip_lines(stream: BinaryIO, count: int) -> int:
    """Move past `count` lines by counting newlines in large blocks; return how many lines there were (<= count)."""
    skipped = 0
    partial = False
    while skipped < count:
        block = stream.read(_SKIP_BLOCK)
        if not block:
            return skipped + int(partial)
        newlines = block.count(b"\n")
        if skipped + newlines >= count:
            position = -1
            for _ in range(count - skipped):
                position = block.index(b"\n", position + 1)
            stream.seek(position + 1 - len(block), os.SEEK_CUR)
            return count
        skipped += newlines
        partial = not block.endswith(b"\n")
    return skipped


def _window(stream: BinaryIO, offset: int, limit: int) -> _Window:
    skipped = _skip_lines(stream, offset)
    if skipped < offset:
        return _Window((), False, False, skipped)
    lines = _raw_lines(stream)
    shown: list[str] = []
    used = 0
    for raw in lines:
        if len(shown) >= limit:
            return _Window(tuple(shown), True, False, offset + len(shown))
        line = _display(raw, first=offset + len(shown) == 0)
        size = len(line.encode("utf-8")) + (1 if shown else 0)
        if used + size > MAX_BYTES:
            return _Window(tuple(shown), True, True, offset + len(shown))
        shown.append(line)
        used += size
    return _Window(tuple(shown), False, False, offset + len(shown))


def _file_output(window: _Window, offset: int) -> str:
    numbered = "\n".join(f"{offset + i + 1:05d}| {line}" for i, line in enumerate(window.lines))
    last = offset + len(window.lines)
    if window.byte_capped:
        note = f"(Output truncated at {MAX_BYTES} bytes. Use 'offset' parameter to read beyond line {last})"
    elif window.more:
        note = f"(File has more lines. Use 'offset' parameter to read beyond line {last})"
    elif offset > 0 and not window.lines:
        note = (
            f"(The file has {window.total} lines: offset {offset} is past its end. "
            "Use a smaller offset, or omit it to read from the start)"
        )
    else:
        note = f"(End of file - total {window.total} lines)"
    return f"<file>\n{numbered}\n\n{note}\n</file>"


def _suggestions(path: Path) -> list[str]:
    """Up to three entries beside a missing file whose names contain, or are contained in, its name."""
    wanted = path.name.lower()
    try:  # the checked parent's own descriptor: a directory swapped for a link lists nothing
        fd = open_checked(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except (OSError, PathChanged):
        return []
    try:
        names = sorted(os.listdir(fd))
    except OSError:
        return []
    finally:
        os.close(fd)
    close = [name for name in names if wanted in name.lower() or name.lower() in wanted]
    return [str(path.parent / name) for name in close[:_MAX_SUGGESTIONS]]


_FIND_IT = "Use the glob tool to find the file by name (e.g. **/NAME*), then read the path it gives."


def _not_found(path: Path) -> ToolFailure:
    message = f"File not found: {path}"
    suggestions = _suggestions(path)
    if suggestions:
        message += "\n\nDid you mean one of these?\n" + "\n".join(suggestions)
    return ToolFailure(message + f"\n\n{_FIND_IT}")


def _directory(path: Path, offset: int, limit: int) -> dict[str, Any]:
    try:
        fd = open_checked(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as scan:
                entries = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in scan)
        finally:
            os.close(fd)
    except PathChanged:
        raise
    except PermissionError as error:
        raise ToolFailure(
            f"Cannot list {path}: permission denied. Ask the user to change the directory's permissions."
        ) from error
    except OSError as error:
        raise ToolFailure(f"Cannot list {path}: {error.strerror}.") from error
    shown = entries[offset : offset + limit]
    last = offset + len(shown)
    if last < len(entries):
        note = f"(Directory has more entries. Use 'offset' parameter to read beyond entry {last})"
    else:
        note = f"(End of directory - total {len(entries)} entries)"
    listing = "\n".join(shown)
    return {
        "output": f"<directory>\n{listing}\n\n{note}\n</directory>",
        "metadata": {"preview": "\n".join(shown[:PREVIEW_LINES]), "truncated": last < len(entries)},
    }


def _attachment(path: Path, stream: BinaryIO, size: int, mime: str) -> dict[str, Any]:
    if size > MAX_ATTACHMENT_BYTES:
        raise ToolFailure(
            f"Cannot attach {path}: it is {size} bytes, over the {MAX_ATTACHMENT_BYTES} byte limit for "
            "images and PDFs. Ask the user for a smaller version."
        )
    data = stream.read(MAX_ATTACHMENT_BYTES + 1)
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise ToolFailure(f"Cannot attach {path}: it grew past {MAX_ATTACHMENT_BYTES} bytes while being read.")
    message = "PDF read successfully" if mime == "application/pdf" else "Image read successfully"
    encoded = base64.b64encode(data).decode("ascii")
    return {
        "output": message,
        "metadata": {"preview": message, "truncated": False},
        "attachments": [{"type": "file", "mime": mime, "url": f"data:{mime};base64,{encoded}", "filename": path.name}],
    }


def _read_sync(path: Path, offset: int, limit: int) -> tuple[dict[str, Any], os.stat_result | None]:
    """The result for `path`, and the `fstat` of the text file read (None when no text was read)."""
    status = stat_or_none(path, str(path))
    if status is None:
        raise _not_found(path)
    if stat.S_ISDIR(status.st_mode):
        return _directory(path, offset, limit), None
    stream, status = open_regular(path, str(path))
    with stream:
        mime = _ATTACHMENT_TYPES.get(path.suffix.lower())
        if mime is not None:
            return _attachment(path, stream, status.st_size, mime), None
        if looks_binary(path.name, stream.read(SAMPLE_BYTES)):
            raise ToolFailure(
                f"Cannot read binary file: {path}\n\nThe read tool shows text files, images and PDFs. "
                "Inspect this file with a command that understands its format (e.g. `file`), or read its source."
            )
        stream.seek(0)
        window = _window(stream, offset, limit)
    result = {
        "output": _file_output(window, offset),
        "metadata": {"preview": "\n".join(window.lines[:PREVIEW_LINES]), "truncated": window.more},
    }
    return result, status


async def read(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Read `filePath` (a window of `limit` lines from the 0-based line `offset`).

    Returns `{title, output, metadata: {preview, truncated}}`, plus `attachments` for images and PDFs.
    A text file read is recorded in the session's filetime table, which `edit` and `write` check.

    Raises:
        ToolFailure: missing file (with suggestions), binary file, special file, unreadable file.
        PermissionBlocked: the file lies outside the root and `external_directory` was not allowed.
    """
    file_path: str = args["filePath"]
    if not file_path:
        raise ToolFailure("filePath is required")
    offset: int = args.get("offset", 0)
    limit: int = args.get("limit", DEFAULT_LIMIT)
    path = ctx.resolve(file_path)
    real = await guard(ctx, path)
    if real != path:
        # The rules were asked for this real path before the call ran; a symlink changed since asks again.
        await ctx.ask("read", [str(real)], always=["*"])
    # The real path the rules were checked on is what is opened, never `path` again (see beneath).
    result, status = await anyio.to_thread.run_sync(partial(_read_sync, real, offset, limit))
    if status is not None:
        filetime.record(ctx.session_state, path, status)
        lsp = ctx.lsp
        if lsp is not None:
            lsp.warm(path)  # as OpenCode's read: the server starts now, so the next edit's diagnostics are in time
    return {"title": relative(path, ctx.root), **result}
