"""Output truncation as OpenCode's `Truncate.output` does it, plus the files that keep full outputs.

A tool's output that exceeds `max_lines` lines or `max_bytes` UTF-8 bytes is cut to a head (or a
tail) of whole lines; the full text goes to `output_dir/tool_<ascending id>` and the cut output ends
(head) or starts (tail) with a hint naming that file, worded exactly as OpenCode words it so models
trained on OpenCode transcripts recognise it. Process spill files share the same naming
(`new_output_path`) so one cleanup (`cleanup_outputs`) retires both.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "MAX_BYTES",
    "MAX_LINES",
    "RETENTION",
    "Truncated",
    "cleanup_outputs",
    "new_output_path",
    "tool_output_dir",
    "truncate_output",
]

MAX_LINES = 2000
MAX_BYTES = 50 * 1024
RETENTION = 7 * 86400.0
"""Seconds a saved output is kept (OpenCode: 7 days)."""


def tool_output_dir(data_dir: Path, root: Path) -> Path:
    """Where cut output of calls in the project at `root` is saved and read back without asking
    `external_directory`: `<data_dir>/tool-output/<project key>`, one per project, so one project's
    exemption never covers another's saved output. The key is a hash of the root's absolute path."""
    key = hashlib.sha256(os.path.abspath(root).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return data_dir / "tool-output" / key


_HINT_HEAD = "The tool call succeeded but the output was truncated. Full output saved to: "
_HINT_DELEGATE = (
    "Use the Task tool to have explore agent process this file with Grep and Read (with offset/limit). "
    "Do NOT read the full file yourself - delegate to save context."
)
_HINT_SEARCH = "Use Grep to search the full content or Read with offset/limit to view specific sections."

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_id_lock = threading.Lock()
_last_id = 0  # process-wide on purpose: ids must ascend across every Runtime writing to a data directory


@dataclass(frozen=True, slots=True)
class Truncated:
    """The text the model gets, whether it was cut, and where the full text went when it was."""

    content: str
    truncated: bool
    output_path: Path | None


def _ascending_id() -> str:
    """16 hex digits of (milliseconds << 12 | counter), then 10 random base62 characters.

    Strictly increasing within the process even when the clock steps back, and sortable as text,
    so `ls` lists saved outputs in creation order (OpenCode's `Identifier.ascending`, widened to 64
    bits because its 48-bit field overflows with today's timestamps).
    """
    global _last_id
    with _id_lock:
        value = max(int(time.time() * 1000) << 12, _last_id + 1)
        _last_id = value
    suffix = "".join(secrets.choice(_BASE62) for _ in range(10))
    return f"{value:016x}{suffix}"


def new_output_path(output_dir: Path) -> Path:
    """A fresh `output_dir/tool_<ascending id>` path. Touches nothing on disk."""
    return output_dir / f"tool_{_ascending_id()}"


def _utf8_len(text: str) -> int:
    # surrogatepass counts a lone surrogate as 3 bytes, as JavaScript's Buffer.byteLength does.
    return len(text.encode("utf-8", "surrogatepass"))


def _save(text: str, output_dir: Path) -> Path:
    output_dir.mkdir(parents=True, exist_ok=True)
    path = new_output_path(output_dir)
    try:
        # Text decoded with surrogateescape gets its original bytes back.
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "replace")
    path.write_bytes(data)
    return path


def truncate_output(
    text: str,
    *,
    output_dir: Path,
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    direction: Literal["head", "tail"] = "head",
    delegate_hint: bool = False,
    saved_path: Path | None = None,
) -> Truncated:
    """Cut `text` to whole lines within both limits, OpenCode's way.

    Lines are the pieces of `text.split("\\n")`; every kept line after the first costs one more byte
    for its separator. Within the limits the text comes back unchanged and nothing is written.
    Otherwise the full text is saved under `output_dir` (created if needed) and the content is
    `preview + "\\n\\n...N lines|bytes truncated...\\n\\n" + hint` (head) or the mirror image (tail);
    the unit is bytes when the byte limit stopped the walk, else lines. `delegate_hint` selects the
    hint that points at the Task tool (for agents allowed to use it) instead of Grep/Read.
    `saved_path` names a file that already holds the full output (a process spill file, of which
    `text` is only the head and tail): the hint names it and no second copy is written. When the full
    text cannot be saved (a full disk, an unwritable data directory), the hint says so and `output_path`
    is None: the call still succeeds.
    """
    line_count = text.count("\n") + 1
    # Every character is at most 4 UTF-8 bytes, so short texts skip the encode.
    if line_count <= max_lines and (len(text) * 4 <= max_bytes or _utf8_len(text) <= max_bytes):
        return Truncated(text, False, None)

    lines = text.split("\n")
    total_bytes = _utf8_len(text)
    kept: list[str] = []
    kept_bytes = 0
    hit_bytes = False
    order = lines if direction == "head" else reversed(lines)
    for line in order:
        if len(kept) >= max_lines:
            break
        size = _utf8_len(line) + (1 if kept else 0)
        if kept_bytes + size > max_bytes:
            hit_bytes = True
            break
        kept.append(line)
        kept_bytes += size

    if hit_bytes:
        removed, unit = total_bytes - kept_bytes, "bytes"
    else:
        removed, unit = len(lines) - len(kept), "lines"
    if direction == "tail":
        kept.reverse()
    preview = "\n".join(kept)

    path: Path | None = saved_path
    if path is None:
        try:
            path = _save(text, output_dir)
        except OSError as error:  # the call still succeeds: the model gets the preview and why the rest is gone
            path = None
            reason = error.strerror or str(error)
            hint = (
                "The tool call succeeded but the output was truncated, and the full output could not be saved "
                f"({reason}). Narrow the request (a more specific pattern, a smaller range) to see the rest."
            )
    if path is not None:
        hint = f"{_HINT_HEAD}{path}\n{_HINT_DELEGATE if delegate_hint else _HINT_SEARCH}"
    marker = f"...{removed} {unit} truncated..."
    if direction == "head":
        content = f"{preview}\n\n{marker}\n\n{hint}"
    else:
        content = f"{marker}\n\n{hint}\n\n{preview}"
    return Truncated(content, True, path)


def cleanup_outputs(output_dir: Path, *, max_age: float = RETENTION, now: float | None = None) -> int:
    """Delete the `tool_*` files in `output_dir` whose mtime is older than `max_age` seconds.

    Returns how many were deleted. A missing directory, or a file that vanishes or cannot be
    removed meanwhile (another cleanup, a reader holding it on an odd filesystem), is skipped.
    """
    cutoff = (time.time() if now is None else now) - max_age
    removed = 0
    try:
        entries = os.scandir(output_dir)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    with entries:
        for entry in entries:
            if not entry.name.startswith("tool_"):
                continue
            try:
                if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                    continue
                os.unlink(entry.path)
            except OSError:
                continue
            removed += 1
    return removed
