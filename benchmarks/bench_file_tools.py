"""Benchmark of the file tools' hot paths: replacers, patch application, and read windows.

Run `python benchmarks/bench_file_tools.py`; prints a table, then one JSON line
(`{"bench": "file_tools", "results": {name: median_ms}}`) for machines.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _timing import median_ms

from toolrt.builtin.patch_format import (
    UpdateFile,
    apply_chunks,
    parse_patch,
)
from toolrt.builtin.read import read
from toolrt.builtin.replacers import replace
from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall
from toolrt.errors import ToolFailure


def source(lines: int) -> str:
    """Python-like text: functions of five lines each."""
    body = []
    for index in range(lines // 5):
        body += [
            f"def function_{index}(value):",
            f"    total = value * {index}",
            "    if total > 10:",
            "        return total",
            "    return 0",
        ]
    return "\n".join(body) + "\n"


def not_found(content: str) -> None:
    try:
        replace(content, "def missing():\n    pass\n    return 1", "x")
    except ToolFailure:
        return
    raise AssertionError("the search text should not have been found")


def main() -> None:
    content = source(2000)
    patch_text = "\n".join(
        [
            "*** Begin Patch",
            "*** Update File: big.py",
            "@@ def function_10(value):",
            "-    total = value * 10",
            "+    total = value * 11",
            "@@ def function_200(value):",
            "-    total = value * 200",
            "+    total = value * 201",
            "@@",
            "-def function_399(value):",
            "+def function_three_ninety_nine(value):",
            "*** End Patch",
        ]
    )
    hunk = parse_patch(patch_text)[0]
    assert isinstance(hunk, UpdateFile)
    cases: dict[str, tuple[Callable[[], object], int]] = {
        "replace exact, 2000 lines": (lambda: replace(content, "    total = value * 123\n", "x\n"), 200),
        "replace line-trimmed, 2000 lines": (
            lambda: replace(content, "def function_399(value):\ntotal = value * 399", "x"),
            50,
        ),
        "replace not found (all 9), 2000 lines": (lambda: not_found(content), 10),
        "parse_patch, 3 chunks": (lambda: parse_patch(patch_text), 500),
        "apply_chunks, 2000 lines, 3 chunks": (lambda: apply_chunks(content, "big.py", hunk.chunks), 100),
    }
    results = {name: median_ms(fn, repeat) for name, (fn, repeat) in cases.items()}

    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        big = root / "big.log"
        chunk = b"".join(b"%09d some log text that is long enough\n" % i for i in range(50_000))
        with big.open("wb") as handle:
            while handle.tell() < 50 * 1024 * 1024:
                handle.write(chunk)
        ctx = ToolContext(DetachedCall(tool_id="read", root=root, data_dir=root / "data"))
        for label, args in (
            ("read 50 MB file, first window", {"filePath": "big.log"}),
            ("read 50 MB file, offset 1,000,000", {"filePath": "big.log", "offset": 1_000_000}),
        ):
            results[label] = median_ms(lambda args=args: anyio.run(read, args, ctx), 5)  # type: ignore[misc]

    width = max(len(name) for name in results)
    print(f"{'case':<{width}}  median ms")
    for name, value in results.items():
        print(f"{name:<{width}}  {value:9.3f}")
    print(json.dumps({"bench": "file_tools", "results": {name: round(value, 3) for name, value in results.items()}}))


if __name__ == "__main__":
    main()
