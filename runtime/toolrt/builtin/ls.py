"""The `list` tool: a tree of the files under a directory, build and cache directories left out (OpenCode ls.ts)."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

from ..call.context import ToolContext
from ..errors import ToolFailure
from .filepaths import ReadableNames, guard_read, left_out_note
from .glob import search_directory
from .ripgrep import run_ripgrep

__all__ = ["ENTRY_LIMIT", "IGNORED_DIRECTORIES", "list_directory", "render_tree"]

ENTRY_LIMIT = 100
IGNORED_DIRECTORIES: tuple[str, ...] = (
    "node_modules/",
    "__pycache__/",
    ".git/",
    "dist/",
    "build/",
    "target/",
    "vendor/",
    "bin/",
    "obj/",
    ".idea/",
    ".vscode/",
    ".zig-cache/",
    "zig-out",
    ".coverage",
    "coverage/",
    "tmp/",
    "temp/",
    ".cache/",
    "cache/",
    "logs/",
    ".venv/",
    "venv/",
    "env/",
)
"""OpenCode's list: a trailing `/` names a directory anywhere in the tree, the others any file or directory."""


async def list_directory(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """List the files under `path` (default: the project root) as an indented tree, at most 100 files.

    Honours .gitignore, skips IGNORED_DIRECTORIES and the `ignore` globs, does not follow symlinks.
    Metadata `{count, truncated}`.
    """
    directory = search_directory(ctx, args.get("path"))
    ignore = args.get("ignore") or ()
    if isinstance(ignore, str) or not all(isinstance(item, str) and item for item in ignore):
        raise ToolFailure(
            f'`ignore` must be a list of non-empty glob strings, e.g. ["*.log", "docs/"]; got {ignore!r}.'
        )
    globs = [f"--glob=!{pattern}" for pattern in (*IGNORED_DIRECTORIES, *ignore)]
    if args.get("path"):
        await guard_read(ctx, directory)
    take = ReadableNames(ctx, directory, ENTRY_LIMIT)
    # Sorted by path so that, when truncated, the same 100 files come back on every call.
    run = await run_ripgrep(
        ["--files", "--null", "--hidden", "--sort=path", *globs],
        cwd=directory,
        abort=ctx.abort,
        sandbox=ctx.sandbox_plan(),
        consume=take,
        separator=b"\0",
    )
    found, left_out = take.found, take.left_out
    truncated = len(found) > ENTRY_LIMIT
    files = found[:ENTRY_LIMIT]
    output = f"{directory}/\n" + (render_tree(files) if files else "No files found\n")
    if truncated:
        output += (
            f"\n(Showing the first {ENTRY_LIMIT} files. List a subdirectory, or add `ignore` globs, to see the rest.)\n"
        )
    if left_out:
        output += f"\n{left_out_note(left_out)}\n"
    return {
        "title": os.path.relpath(directory, ctx.root),
        "output": output,
        "metadata": {"count": len(files), "truncated": truncated, "sandbox": run.sandbox},
    }


def render_tree(files: Iterable[str]) -> str:
    """Root-relative `/`-separated file paths → OpenCode's tree: two spaces per level, directories first."""
    directories: set[str] = {"."}
    by_directory: dict[str, list[str]] = {}
    for file in files:
        parent = posixpath.dirname(file) or "."
        parts = [] if parent == "." else parent.split("/")
        directories.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
        by_directory.setdefault(parent, []).append(posixpath.basename(file))
    children: dict[str, list[str]] = {}
    for directory in directories - {"."}:
        children.setdefault(posixpath.dirname(directory) or ".", []).append(directory)

    lines: list[str] = []

    def render(directory: str, depth: int) -> None:
        if depth:
            lines.append(f"{'  ' * depth}{posixpath.basename(directory)}/")
        for child in sorted(children.get(directory, ())):
            render(child, depth + 1)
        lines.extend(f"{'  ' * (depth + 1)}{name}" for name in sorted(by_directory.get(directory, ())))

    render(".", 0)
    return "".join(f"{line}\n" for line in lines)
