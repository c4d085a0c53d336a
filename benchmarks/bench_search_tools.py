"""Benchmark of glob, grep and list against bare ripgrep on the same tree, plus their pure-Python parts.

The interesting number is the overhead the tools add over running `rg` yourself (spawn, streaming
parse, mtime sort, rendering). Run `python benchmarks/bench_search_tools.py`; prints a table, then
one JSON line (`{"bench": "search_tools", "results": {name: median_ms}}`) for machines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _timing import median_ms

from toolrt.builtin.glob import glob
from toolrt.builtin.grep import FileMatches, grep, render_matches
from toolrt.builtin.ls import list_directory, render_tree
from toolrt.builtin.ripgrep import ripgrep_binary
from toolrt.builtin.todo import todoread, todowrite
from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall

Handler = Callable[[Mapping[str, Any], ToolContext], Awaitable[dict[str, Any]]]
DIRECTORIES, FILES_PER_DIRECTORY, LINES_PER_FILE = 40, 50, 60


def build_tree(root: Path) -> None:
    """2,000 files of 60 lines; every file has one `needle` line, so grep finds 2,000 matches."""
    for d in range(DIRECTORIES):
        directory = root / f"pkg{d:02}"
        directory.mkdir()
        for f in range(FILES_PER_DIRECTORY):
            lines = [f"value_{d}_{f}_{n} = compute({n})" for n in range(LINES_PER_FILE)]
            lines[f % LINES_PER_FILE] = "needle = True"
            path = directory / f"mod{f:02}.py"
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            os.utime(path, (1_000_000 + d * 100 + f, 1_000_000 + d * 100 + f))


def tool(handler: Handler, args: Mapping[str, Any], root: Path) -> Callable[[], object]:
    # A context per call, as dispatch makes one: its abort event belongs to one event loop.
    return lambda: anyio.run(
        handler, args, ToolContext(DetachedCall(tool_id="bench", root=root, data_dir=root / ".data"))
    )


def bare_rg(args: list[str], cwd: Path) -> Callable[[], object]:
    argv = [ripgrep_binary(), "--no-config", *args]
    return lambda: subprocess.run(argv, cwd=cwd, capture_output=True, check=False)


def synthetic_groups(files: int, per_file: int) -> list[FileMatches]:
    return [FileMatches(f"/p/f{i}.py", [(n, "x" * 80) for n in range(1, per_file + 1)], per_file) for i in range(files)]


def main() -> None:
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        build_tree(root)
        grep_flags = ["-nH", "--null", "--hidden", "--no-messages", "--field-match-separator=|", "--regexp"]
        cases: dict[str, tuple[Callable[[], object], int]] = {
            "rg bare: grep 2000 matches": (bare_rg([*grep_flags, "needle", str(root)], root), 20),
            "grep tool: 2000 matches (100 shown)": (tool(grep, {"pattern": "needle"}, root), 20),
            "rg bare: grep, no match": (bare_rg([*grep_flags, "zz_absent_zz", str(root)], root), 20),
            "grep tool: no match": (tool(grep, {"pattern": "zz_absent_zz"}, root), 20),
            "rg bare: --files sorted by mtime": (bare_rg(["--files", "--sortr=modified"], root), 20),
            "glob tool: **/*.py (2000 files, 100 shown)": (tool(glob, {"pattern": "**/*.py"}, root), 20),
            "list tool: root (100 of 2000 files)": (tool(list_directory, {}, root), 20),
            "todowrite + todoread (10 items)": (
                lambda: (tool(todowrite, {"todos": _todos(10)}, root)(), tool(todoread, {}, root)()),
                50,
            ),
        }
        for name, (fn, repeat) in cases.items():
            fn()  # warm: imports, page cache
            results[name] = median_ms(fn, repeat)

    groups = synthetic_groups(2000, 5)
    results["render_matches: 10,000 matches in 2,000 files"] = median_ms(lambda: render_matches(groups), 50)
    paths = [f"pkg{d:02}/sub{d % 7}/mod{f:02}.py" for d in range(10) for f in range(10)]
    results["render_tree: 100 files"] = median_ms(lambda: render_tree(paths), 200)

    width = max(map(len, results))
    print(f"{'case'.ljust(width)}  median ms")
    for name, value in results.items():
        print(f"{name.ljust(width)}  {value:9.3f}")
    print(json.dumps({"bench": "search_tools", "results": {k: round(v, 4) for k, v in results.items()}}))


def _todos(count: int) -> list[dict[str, str]]:
    return [{"id": str(n), "content": f"task {n}", "status": "pending", "priority": "medium"} for n in range(count)]


if __name__ == "__main__":
    main()
