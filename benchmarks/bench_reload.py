"""Time from a file write to the new snapshot answering calls (watchfiles → reload → swap → call).

    python benchmarks/bench_reload.py [--runs 20]

Two projects: the default config (built-in tools plus one project tool), and 1,000 project tool
files of which one changes. Each run rewrites the changed tool with a new version string, then
calls it until the answer carries that version. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolrt.api import Runtime
from toolrt.reload import Reloader

TOOL = """\
id: {id}
description: "Benchmark tool {id}, version {v}: echoes the version it was loaded with."
parameters: {{type: object, properties: {{}}}}
handler: {{python: "benchhandlers:version"}}
annotations: {{read_only: true}}
"""
HANDLERS = """\
def version(args, ctx):
    return ctx.tool
"""


def make_project(root: Path, count: int, *, builtin: bool) -> Path:
    (root / "tools.d").mkdir(parents=True)
    for i in range(count):
        (root / "tools.d" / f"t{i:04d}.yaml").write_text(TOOL.format(id=f"t{i:04d}", v=0), encoding="utf-8")
    if not builtin:
        (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    return root


async def measure(rt: Runtime, path: Path, runs: int) -> list[float]:
    timings: list[float] = []
    ready = anyio.Event()
    reloader = Reloader(rt)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: reloader.run(ready=ready))
        await ready.wait()
        for run in range(1, runs + 1):
            expected = f"version {run}"
            swapped = anyio.Event()
            # Reload listeners run on the event loop (swap listeners run in the reload's worker thread).
            unsubscribe = reloader.on_reload(lambda event, swapped=swapped: swapped.set() if event.change else None)
            started = time.perf_counter()
            temp = path.with_name(".bench.tmp")
            temp.write_text(TOOL.format(id="t0000", v=run), encoding="utf-8")
            os.replace(temp, path)
            with anyio.fail_after(10):
                await swapped.wait()
                while expected not in rt.snapshot.tools["t0000"].description:
                    await anyio.sleep(0)
                result = await rt.call("t0000", {}, session=f"run{run}")
            timings.append((time.perf_counter() - started) * 1000)
            unsubscribe()
            assert result.error is None, result.error
        group.cancel_scope.cancel()
    return timings


def bench(label: str, count: int, builtin: bool, runs: int) -> dict[str, float | str | int]:
    with tempfile.TemporaryDirectory() as directory:
        root = make_project(Path(directory) / "project", count, builtin=builtin)
        sys.path.insert(0, str(root))
        (root / "benchhandlers.py").write_text(HANDLERS, encoding="utf-8")
        os.environ.setdefault("TOOLRT_DATA_DIR", str(Path(directory) / "data"))
        rt = Runtime.load(root)
        started = time.perf_counter()
        rt.reload()
        load_ms = (time.perf_counter() - started) * 1000
        timings = anyio.run(measure, rt, root / "tools.d" / "t0000.yaml", runs)
        sys.path.remove(str(root))
    return {
        "config": label,
        "tools": len(rt.snapshot.tools),
        "median_ms": round(statistics.median(timings), 1),
        "p90_ms": round(sorted(timings)[int(len(timings) * 0.9) - 1], 1),
        "rebuild_ms": round(load_ms, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    rows = [
        bench("default (built-ins + 1 project tool)", 1, True, options.runs),
        bench("1,000 tool files, one changed", 1000, False, options.runs),
    ]
    print(f"{'config':<40} {'tools':>6} {'median ms':>10} {'p90 ms':>8} {'rebuild ms':>11}")
    for row in rows:
        cells = f"{row['tools']:>6} {row['median_ms']:>10} {row['p90_ms']:>8} {row['rebuild_ms']:>11}"
        print(f"{row['config']:<40} {cells}")
    extra = float(rows[1]["median_ms"]) - float(rows[0]["median_ms"])
    print(json.dumps({"bench": "reload", "runs": options.runs, "rows": rows, "extra_for_1000_ms": round(extra, 1)}))


if __name__ == "__main__":
    main()
