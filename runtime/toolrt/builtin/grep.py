"""The `grep` tool: search file contents with ripgrep, grouped by file, newest files first (OpenCode §14)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..call.context import ToolContext
from ..errors import ToolFailure
from .filepaths import guard_read, left_out_note, readable
from .ripgrep import run_ripgrep

__all__ = ["MATCH_LIMIT", "MAX_LINE_LENGTH", "FileMatches", "grep", "render_matches"]

MATCH_LIMIT = 100
MAX_LINE_LENGTH = 2000
NO_FILES = "No files found"
INACCESSIBLE_NOTE = "(Some paths were inaccessible and skipped)"


@dataclass(slots=True)
class FileMatches:
    """The matches of one file: the first MATCH_LIMIT kept (no file can show more), the rest only counted.

    Mutable on purpose: it accumulates while rg streams; nothing holds it after the call.
    """

    path: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    count: int = 0


@dataclass(slots=True)
class _Collector:
    """Parses rg's `path NUL line|text` records into per-file groups, in rg's order."""

    files: dict[str, FileMatches] = field(default_factory=dict)

    def __call__(self, record: bytes) -> bool:
        path_bytes, nul, rest = record.partition(b"\0")
        number, bar, text = rest.partition(b"|")
        # Anything else rg prints (such as "binary file matches") is not a match record.
        if not nul or not bar or not number.isdigit():
            return True
        path = os.fsdecode(path_bytes)
        group = self.files.get(path)
        if group is None:
            group = self.files[path] = FileMatches(path)
        group.count += 1
        if len(group.lines) < MATCH_LIMIT:
            group.lines.append((int(number), text.decode("utf-8", "replace").removesuffix("\r")))
        return True


async def grep(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Search `path` (default: the project root) for lines matching the regex `pattern`.

    Returns OpenCode's grep text with metadata `{matches, truncated}`; raises ToolFailure for an
    empty pattern, a missing path or a pattern rg rejects (quoting rg's message).
    """
    pattern = str(args["pattern"])
    if not pattern:
        raise ToolFailure("The pattern is empty. Give a regular expression to search for, e.g. `def main`.")
    raw_path = args.get("path") or "."
    target = ctx.resolve(str(raw_path))
    if not target.exists():
        raise ToolFailure(
            f"Path not found: {target}. Give an existing directory or file, absolute or relative to the project "
            "root, or leave `path` out to search the whole project."
        )
    if args.get("path"):
        await guard_read(ctx, target)
    include = args.get("include")
    rg_args = ["-nH", "--null", "--hidden", "--no-messages", "--field-match-separator=|", "--regexp", pattern]
    if include:
        rg_args.append(f"--glob={include}")
    # After the include glob, so a broad include cannot bring git's object store back in.
    rg_args += ["--glob=!.git/", "--", str(target)]

    collector = _Collector()
    # A record holds the path, the line number and the text; nothing past MAX_LINE_LENGTH chars is shown.
    run = await run_ripgrep(
        rg_args,
        cwd=ctx.root,
        abort=ctx.abort,
        consume=collector,
        max_record=8 * MAX_LINE_LENGTH + 8192,
        sandbox=ctx.sandbox_plan(),
    )
    if run.exit_code == 2 and not collector.files and run.stderr:
        raise ToolFailure(
            f"ripgrep could not run this search:\n{run.stderr}\nFix `pattern` (a Rust regex: escape literal "
            "characters such as `(`, `[`, `{` with a backslash) or the `include` glob, and try again."
        )
    if run.exit_code not in (0, 1, 2):
        raise ToolFailure(f"ripgrep failed (exit {run.exit_code}): {run.stderr or 'no error output'}")
    shown = [group for group in collector.files.values() if readable(ctx, group.path)]
    output, total = render_matches(_newest_first(shown), inaccessible=run.exit_code == 2)
    left_out = len(collector.files) - len(shown)
    if left_out:
        output += "\n\n" + left_out_note(left_out)
    return {
        "title": pattern,
        "output": output,
        "metadata": {"matches": total, "truncated": total > MATCH_LIMIT, "sandbox": run.sandbox},
    }


def render_matches(groups: Sequence[FileMatches], *, inaccessible: bool = False) -> tuple[str, int]:
    """OpenCode's grep output for file groups already in display order; returns (text, total matches)."""
    total = sum(group.count for group in groups)
    if total == 0:
        return NO_FILES, 0
    truncated = total > MATCH_LIMIT
    lines = [f"Found {total} matches" + (f" (showing first {MATCH_LIMIT})" if truncated else "")]
    shown = 0
    for group in groups:
        if shown == MATCH_LIMIT:
            break
        if shown:
            lines.append("")
        lines.append(f"{group.path}:")
        for number, text in group.lines[: MATCH_LIMIT - shown]:
            cut = text[:MAX_LINE_LENGTH] + "..." if len(text) > MAX_LINE_LENGTH else text
            lines.append(f"  Line {number}: {cut}")
            shown += 1
    if truncated:
        lines += [
            "",
            f"(Results truncated: showing {MATCH_LIMIT} of {total} matches ({total - MATCH_LIMIT} hidden). "
            "Consider using a more specific path or pattern.)",
        ]
    if inaccessible:
        lines += ["", INACCESSIBLE_NOTE]
    return "\n".join(lines), total


def _newest_first(groups: Iterable[FileMatches]) -> list[FileMatches]:
    """Files by modification time, newest first; a file that vanished since rg saw it is dropped (as OpenCode).
    The name itself is examined (`lstat`): one swapped for a link since rg read it says nothing of its target."""
    dated: list[tuple[float, FileMatches]] = []
    for group in groups:
        try:
            dated.append((os.lstat(group.path).st_mtime, group))
        except OSError:
            continue
    dated.sort(key=lambda item: item[0], reverse=True)
    return [group for _, group in dated]
