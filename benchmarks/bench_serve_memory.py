"""Memory of `toolrt serve` over many short HTTP sessions: RSS after 100 and after 10,000 sessions.

Each session (protocol 2025-11-25, the one with MCP sessions) is opened with `initialize`, makes one
tool call (so the server holds a toolrt session for it), and is closed with `DELETE`, 8 at a time,
on 127.0.0.1. Raw HTTP requests keep the client cheap. Goal (issue 15): the server's RSS after 10,000
sessions within 10 MiB of its RSS after 100 (closed sessions release their state).

    python benchmarks/bench_serve_memory.py [--sessions 10000] [--warm 100] [--concurrency 8] [--servers toolrt,sdk]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from contextlib import ExitStack
from itertools import count
from pathlib import Path
from typing import Any

import anyio
import httpx2
from bench_serve import http_server, make_project, rss_mib

VERSION = "2025-11-25"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def one_session(client: httpx2.AsyncClient, url: str, number: int) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
    }
    opened = await client.post(url, json=init, headers=HEADERS)
    opened.raise_for_status()
    session = opened.headers["mcp-session-id"]
    headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": VERSION}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    (await client.post(url, json=initialized, headers=headers)).raise_for_status()
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": f"s{number}"}},
    }
    answered = await client.post(url, json=call, headers=headers)
    answered.raise_for_status()
    assert f"s{number}" in answered.text, answered.text
    (await client.delete(url, headers=headers)).raise_for_status()


async def sessions(url: str, total: int, concurrency: int, numbers: Any) -> None:

    async def worker(share: int) -> None:
        async with httpx2.AsyncClient(timeout=60) as client:  # one keep-alive connection per worker
            for _ in range(share):
                await one_session(client, url, next(numbers))

    async with anyio.create_task_group() as group:
        for i in range(concurrency):
            group.start_soon(worker, total // concurrency + (1 if i < total % concurrency else 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--warm", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--servers", default="toolrt")
    options = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        base = Path(tmp)
        root = make_project(base, 1)
        env = {**os.environ, "TOOLRT_DATA_DIR": str(base / "data")}
        for kind in options.servers.split(","):
            url, pid = stack.enter_context(http_server(kind, root, env))
            numbers = count()
            anyio.run(sessions, url, options.warm, options.concurrency, numbers)
            warm = rss_mib(pid)
            anyio.run(sessions, url, options.sessions - options.warm, options.concurrency, numbers)
            after = rss_mib(pid)
            results[kind] = {"rss_mib_warm": warm, "rss_mib_after": after, "growth_mib": after - warm}
            print(f"{kind}: done", file=sys.stderr, flush=True)
    print(
        f"{'server':<10}{'RSS after ' + str(options.warm):>18}{'RSS after ' + str(options.sessions):>20}{'growth':>12}"
    )
    for kind, row in results.items():
        print(
            f"{kind:<10}{row['rss_mib_warm']:>15.1f} MiB{row['rss_mib_after']:>17.1f} MiB{row['growth_mib']:>8.1f} MiB"
        )
    if "toolrt" in results:
        print(f"toolrt growth {results['toolrt']['growth_mib']:.1f} MiB (goal <= 10)")
    print(json.dumps({"benchmark": "serve_memory", "sessions": options.sessions, "warm": options.warm, **results}))


if __name__ == "__main__":
    main()
