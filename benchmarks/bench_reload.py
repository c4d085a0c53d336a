"""Hot reload as a connected MCP client sees it, against bare watchfiles seeing the same write, in one run.

For 10 and for 1,000 tool files, a real `toolrt serve` per transport (stdio, and streamable HTTP on
127.0.0.1 with protocol 2025-11-25), each with the official SDK client connected. One round: a tool file
of the served project is saved (written beside it and renamed over it, as editors save), and timed
from the save to

- `bare`: a bare `watchfiles.awatch(tools.d, debounce=50, step=10)` in this process yielding the change;
- `client`: the client receiving `notifications/tools/list_changed`, asking `tools/list` and receiving the
  listing that carries the saved version (the end of the round: what a person waits for).

Each transport's server has its own copy of the project (one save reloads one server), and the bare
watcher watches that same directory; rounds alternate the transports. Every save must bring its own
`list_changed` (a round that needs a second notification fails the benchmark). Reported: medians and
p90 per (files, transport), and the ratio client / bare of the medians. Goals (issue 33): at most 3x
with 10 tool files and 5x with 1,000 (`ratio_10`, `ratio_1000`: the worse transport).

    python benchmarks/bench_reload.py [--rounds 15] [--counts 10,1000] [--transports stdio,http]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import watchfiles
from bench_serve import LEGACY, http_server, server_argv

TOOL = """\
id: {id}
description: "Benchmark tool {id}, version {v}."
parameters: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
handler: {{argv: [echo, "{{{{ name }}}}"]}}
"""


def make_project(root: Path, count: int) -> Path:
    (root / "tools.d").mkdir(parents=True)
    for i in range(count):
        (root / "tools.d" / f"t{i:04d}.yaml").write_text(TOOL.format(id=f"t{i:04d}", v=0), encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    return root


def save(root: Path, version: int) -> float:
    """Save tools.d/t0000.yaml with `version` as an editor does (write beside, rename over); the time of the save."""
    temp = root / ".t0000.yaml.saving"
    temp.write_text(TOOL.format(id="t0000", v=version), encoding="utf-8")
    started = time.perf_counter()
    os.replace(temp, root / "tools.d" / "t0000.yaml")
    return started


@dataclass
class Watched:
    """A served project: its connected client, what it was told, and the bare watcher on its tools.d."""

    root: Path
    client: Any = None
    changed: anyio.Event = field(default_factory=anyio.Event)
    notices: int = 0
    bare: anyio.Event = field(default_factory=anyio.Event)
    bare_at: float = 0.0

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.notices += 1
            self.changed.set()

    async def watch_bare(self, ready: anyio.Event) -> None:
        ready.set()
        async for _batch in watchfiles.awatch(self.root / "tools.d", debounce=50, step=10, recursive=False):
            self.bare_at = time.perf_counter()
            self.bare.set()

    async def round(self, version: int) -> tuple[float, float]:
        """One save; (bare watchfiles ms, client ms)."""
        self.changed, self.bare = anyio.Event(), anyio.Event()
        before = self.notices
        started = save(self.root, version)
        with anyio.fail_after(30):
            await self.changed.wait()
            listing = await self.client.list_tools()
            received = time.perf_counter()
            await self.bare.wait()
        expected = f"version {version}."
        described = {tool.name: tool.description for tool in listing.tools}
        if expected not in (described.get("t0000") or "") or self.notices != before + 1:
            raise RuntimeError(f"round {version}: the listing after one list_changed lacks {expected!r}")
        return (self.bare_at - started) * 1000, (received - started) * 1000


@asynccontextmanager
async def connected(watched: Watched, transport: str, env: dict[str, str], stack: ExitStack) -> AsyncIterator[None]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    target: Any
    if transport == "stdio":
        argv = server_argv("toolrt", "stdio", 0, watched.root)
        quiet = ["-c", 'exec "$@" 2>/dev/null', "sh", *argv]  # its start-up notice is not the benchmark's output
        target = StdioServerParameters(command="/bin/sh", args=quiet, env=env, cwd=str(watched.root))
    else:
        url, _pid = stack.enter_context(http_server("toolrt", watched.root, env))
        target = url
    async with Client(target, mode=LEGACY, message_handler=watched.on_message) as client:
        watched.client = client
        await client.list_tools()
        yield


async def measure(
    projects: dict[str, Watched], env: dict[str, str], rounds: int, warm: int
) -> dict[str, tuple[list[float], list[float]]]:
    timings: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in projects}
    with ExitStack() as stack:
        async with anyio.create_task_group() as group:
            async with AsyncExitStack() as clients:
                for transport, watched in projects.items():
                    await clients.enter_async_context(connected(watched, transport, env, stack))
                    ready = anyio.Event()
                    group.start_soon(watched.watch_bare, ready)
                    await ready.wait()
                await anyio.sleep(0.5)  # the watchers' threads are up (a save before would be missed)
                for number in range(1, warm + rounds + 1):
                    for transport, watched in projects.items():
                        bare, client = await watched.round(number)
                        if number > warm:
                            timings[transport][0].append(bare)
                            timings[transport][1].append(client)
            group.cancel_scope.cancel()
    return timings


def p90(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.9) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed saves per (files, transport)")
    parser.add_argument("--warm", type=int, default=2, help="untimed saves first")
    parser.add_argument("--counts", default="10,1000", help="tool files in the project")
    parser.add_argument("--transports", default="stdio,http")
    options = parser.parse_args()
    transports = options.transports.split(",")
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"bench": "reload", "rounds": options.rounds}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        env = {**os.environ, "TOOLRT_DATA_DIR": str(base / "data"), "PYTHONUNBUFFERED": "1"}
        for count in (int(c) for c in options.counts.split(",")):
            projects = {t: Watched(make_project(base / f"{t}-{count}", count)) for t in transports}
            timings = anyio.run(measure, projects, env, options.rounds, options.warm)
            worst = 0.0
            for transport, (bare, client) in timings.items():
                ratio = statistics.median(client) / statistics.median(bare)
                worst = max(worst, ratio)
                row: dict[str, Any] = {
                    "files": count,
                    "transport": transport,
                    "bare_median_ms": round(statistics.median(bare), 1),
                    "client_median_ms": round(statistics.median(client), 1),
                    "client_p90_ms": round(p90(client), 1),
                    "ratio": round(ratio, 2),
                }
                rows.append(row)
                summary[f"ratio_{count}_{transport}"] = row["ratio"]
            summary[f"ratio_{count}"] = round(worst, 2)
            print(f"{count} files: done", file=sys.stderr, flush=True)
    goals = {10: 3.0, 1000: 5.0}
    header = f"{'files':>6} {'transport':<10} {'bare ms':>8} {'client ms':>10} {'client p90':>11} {'ratio':>6}  goal"
    print(header)
    for row in rows:
        goal = goals.get(row["files"])
        cells = f"{row['bare_median_ms']:>8} {row['client_median_ms']:>10} {row['client_p90_ms']:>11} {row['ratio']:>6}"
        print(f"{row['files']:>6} {row['transport']:<10} {cells}  {'<= ' + str(goal) if goal else ''}")
    print(json.dumps({**summary, "rows": rows}))


if __name__ == "__main__":
    main()
