"""Benchmark: what language-server diagnostics add to an edit.

The same `edit` (one line changed in a 200-line Python file, alternating between an undefined name
and the fixed text) runs through the whole pipeline twice: without language servers, and with pylsp
(pyflakes) running, whose diagnostics the result waits for. pylsp lints 0.5 s after a change
(its debounce), so most of the added latency is the server's own; toolrt's part is the rest.
Also timed once: the first edit, which starts the server (not waited on past `lsp.wait`).

Run `python benchmarks/bench_lsp.py`; prints a table, then one JSON line
(`{"bench": "lsp", "results": {...}}`) for machines. Needs pylsp (the test extra).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _timing import print_table

from toolrt import Runtime

EDITS = 10


def _project(base: Path) -> Path:
    base.mkdir(parents=True)
    (base / "pyproject.toml").write_text("[project]\nname = 'bench'\n", encoding="utf-8")
    lines = [f"def function_{i}(value):\n    return value * {i}\n\n" for i in range(66)]
    (base / "app.py").write_text("".join(lines) + "RESULT = function_1(2)\n", encoding="utf-8")
    return base


def _edits(rt: Runtime, count: int) -> tuple[list[float], list[str]]:
    rt.call_sync("read", {"filePath": "app.py"}, session="bench")
    times, outputs = [], []
    pairs = [("RESULT = function_1(2)", "RESULT = function_1(missing_name)")]
    pairs.append((pairs[0][1], pairs[0][0]))
    for index in range(count):
        old, new = pairs[index % 2]
        started = time.perf_counter()
        result = rt.call_sync("edit", {"filePath": "app.py", "oldString": old, "newString": new}, session="bench")
        times.append((time.perf_counter() - started) * 1000)
        assert result.error is None, result.error
        outputs.append(result.output)
    return times, outputs


def main() -> None:
    pylsp = shutil.which("pylsp", path=os.path.dirname(sys.executable)) or shutil.which("pylsp")
    if pylsp is None:
        raise SystemExit("pylsp is not installed: pip install 'python-lsp-server[pyflakes]' (the test extra)")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as temp:
        base = Path(temp)
        data = {"data_dir": str(base / "data"), "audit": False}
        with Runtime.load(_project(base / "plain"), settings={**data, "lsp.enabled": False}) as rt:
            plain, _ = _edits(rt, EDITS)
        settings = {
            **data,
            "lsp.enabled": True,
            "lsp.wait": 10.0,
            "lsp.servers.pylsp.command": [pylsp],
            "lsp.servers.pyright.disabled": True,
        }
        with Runtime.load(_project(base / "served"), settings=settings) as rt:
            first, _ = _edits(rt, 2)  # break, fix: the text is as it started
            served, outputs = _edits(rt, EDITS)
        reported = sum("undefined name 'missing_name'" in output for output in outputs)
    without, with_server = statistics.median(plain), statistics.median(served)
    results = {
        "edit_without_server_ms": round(without, 2),
        "edit_with_diagnostics_ms": round(with_server, 2),
        "added_ms": round(with_server - without, 2),
        "first_edit_starting_server_ms": round(first[0], 2),
        "errors_reported": f"{reported}/{(EDITS + 1) // 2}",
    }
    print_table(
        [
            ("edit, no language server (median ms)", f"{without:.2f}"),
            ("edit + pylsp diagnostics (median ms)", f"{with_server:.2f}"),
            ("added latency (ms)", f"{with_server - without:.2f}"),
            ("first edit, server starting (ms)", f"{first[0]:.2f}"),
            ("undefined-name errors reported", results["errors_reported"]),
        ]
    )
    print(json.dumps({"bench": "lsp", "results": results}))


if __name__ == "__main__":
    main()
