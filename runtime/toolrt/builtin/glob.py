"""The `glob` tool: find files by name pattern with `rg --files`, newest first, at most 100 (OpenCode §14)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..call.context import ToolContext
from ..errors import ToolFailure
from .filepaths import ReadableNames, guard_read, left_out_note
from .ripgrep import run_ripgrep

__all__ = ["FILE_LIMIT", "TRUNCATED_NOTE", "glob", "search_directory"]

FILE_LIMIT = 100
TRUNCATED_NOTE = "(Results are truncated. Consider using a more specific path or pattern.)"


def search_directory(ctx: ToolContext, path: object) -> Path:
    """The directory a search tool runs in: `path` against the root (the root when empty); ToolFailure if not a dir."""
    directory = ctx.resolve(str(path or "."))
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise ToolFailure(
            f"{directory} {what}. Give an existing directory, absolute or relative to the project root, "
            "or leave `path` out to use the project root."
        )
    return directory


async def glob(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """List files under `path` whose path matches the glob `pattern`, newest first.

    Returns absolute paths one per line (or `No files found`) with metadata `{count, truncated}`.
    Symlinks are not followed, so nothing outside the searched tree is listed through one.
    """
    pattern = str(args["pattern"])
    if not pattern:
        raise ToolFailure("The pattern is empty. Give a glob such as `**/*.py` or `src/**/test_*.ts`.")
    directory = search_directory(ctx, args.get("path"))
    if args.get("path"):
        await guard_read(ctx, directory)
    take = ReadableNames(ctx, directory, FILE_LIMIT)
    # rg sorts by mtime itself, so the 100 shown are the newest of all matches, not of the first 100 found.
    run = await run_ripgrep(
        ["--files", "--null", "--hidden", f"--glob={pattern}", "--glob=!.git/", "--sortr=modified"],
        cwd=directory,
        abort=ctx.abort,
        sandbox=ctx.sandbox_plan(),
        consume=take,
        separator=b"\0",
    )
    found, left_out = take.found, take.left_out
    if run.exit_code == 2 and not found and run.stderr:
        raise ToolFailure(
            f"ripgrep could not use this glob:\n{run.stderr}\nFix `pattern` (e.g. `**/*.py`, `src/*.{{ts,tsx}}`)."
        )
    truncated = len(found) > FILE_LIMIT
    files = [str(directory / name) for name in found[:FILE_LIMIT]]
    output = "\n".join(files) if files else "No files found"
    if truncated:
        output += "\n\n" + TRUNCATED_NOTE
    if left_out:
        output += "\n\n" + left_out_note(left_out)
    return {
        "title": os.path.relpath(directory, ctx.root),
        "output": output,
        "metadata": {"count": len(files), "truncated": truncated, "sandbox": run.sandbox},
    }
