"""Memory of `toolrt serve` over many HTTP sessions, short ones and open ones, against the SDK's server.

Short sessions: each (protocol 2025-11-25, the one with MCP sessions) is opened with `initialize`, makes
one tool call (so the server holds a toolrt session for it), and is closed with `DELETE`, 8 at a time,
on 127.0.0.1; RSS after 100 and after 10,000. Goal (issue 15): toolrt's RSS after 10,000 within 10 MiB
of its RSS after 100 (closed sessions release their state).

Open sessions: a fresh server (toolrt with `--max-sessions 10000`) gets `--open` sessions opened the
same way and left open, all held at once; every one is then used again (a `tools/list`), which must
answer 200 (none refused, none released). Reported: RSS growth per open session (after `--open`
against after 100). Goal (issue 33, item 7): toolrt's at most 1.1x the SDK `MCPServer`'s
(`open_ratio`). Raw HTTP requests keep the client cheap.

    python benchmarks/bench_serve_memory.py [--sessions 10000] [--open 10000] [--warm 100] [--concurrency 8]
        [--servers toolrt,sdk]
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


async def one_session(client: httpx2.AsyncClient, url: str, number: int, *, close: bool = True) -> dict[str, str]:
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
    if close:
        (await client.delete(url, headers=headers)).raise_for_status()
    return headers


async def sessions(url: str, total: int, concurrency: int, numbers: Any) -> None:

    async def worker(share: int) -> None:
        async with httpx2.AsyncClient(timeout=60) as client:  # one keep-alive connection per worker
            for _ in range(share):
                await one_session(client, url, next(numbers))

    async with anyio.create_task_group() as group:
        for i in range(concurrency):
            group.start_soon(worker, total // concurrency + (1 if i < total % concurrency else 0))


async def open_sessions(url: str, total: int, concurrency: int, numbers: Any, held: list[dict[str, str]]) -> None:
    """`total` sessions opened and left open; their request headers appended to `held`."""

    async def worker(share: int) -> None:
        async with httpx2.AsyncClient(timeout=60) as client:
            for _ in range(share):
                held.append(await one_session(client, url, next(numbers), close=False))

    async with anyio.create_task_group() as group:
        for i in range(concurrency):
            group.start_soon(worker, total // concurrency + (1 if i < total % concurrency else 0))


async def still_served(url: str, held: list[dict[str, str]], concurrency: int) -> int:
    """How many of the `held` sessions answer a `tools/list` with 200."""
    served = 0
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}

    async def worker(share: list[dict[str, str]]) -> None:
        nonlocal served
        async with httpx2.AsyncClient(timeout=60) as client:
            for headers in share:
                answered = await client.post(url, json=listing, headers=headers)
                served += answered.status_code == 200

    async with anyio.create_task_group() as group:
        for i in range(concurrency):
            group.start_soon(worker, held[i::concurrency])
    return served


def open_row(kind: str, root: Path, env: dict[str, str], options: argparse.Namespace) -> dict[str, float]:
    """RSS growth per session of `options.open` sessions held at once by a fresh server of `kind`."""
    extra = ["--max-sessions", str(options.open)] if kind == "toolrt" else []
    with http_server(kind, root, env, extra) as (url, pid):
        held: list[dict[str, str]] = []
        numbers = count()
        anyio.run(open_sessions, url, options.warm, options.concurrency, numbers, held)
        warm = rss_mib(pid)
        anyio.run(open_sessions, url, options.open - options.warm, options.concurrency, numbers, held)
        after = rss_mib(pid)
        served = anyio.run(still_served, url, held, options.concurrency)
    per_session_kib = (after - warm) * 1024 / (options.open - options.warm)
    return {"rss_mib_warm": warm, "rss_mib_after": after, "kib_per_session": per_session_kib, "served": served}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--warm", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--open", type=int, default=10_000, help="sessions held open at once (0: skip)")
    parser.add_argument("--servers", default="toolrt,sdk")
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
        opened: dict[str, dict[str, float]] = {}
        if options.open:
            for kind in options.servers.split(","):
                opened[kind] = open_row(kind, root, env, options)
                print(f"{kind}: {options.open} open sessions done", file=sys.stderr, flush=True)
    print(
        f"{'server':<10}{'RSS after ' + str(options.warm):>18}{'RSS after ' + str(options.sessions):>20}{'growth':>12}"
    )
    for kind, row in results.items():
        print(
            f"{kind:<10}{row['rss_mib_warm']:>15.1f} MiB{row['rss_mib_after']:>17.1f} MiB{row['growth_mib']:>8.1f} MiB"
        )
    if "toolrt" in results:
        print(f"toolrt growth {results['toolrt']['growth_mib']:.1f} MiB (goal <= 10)")
    summary: dict[str, Any] = {"benchmark": "serve_memory", "sessions": options.sessions, "warm": options.warm}
    if opened:
        print(f"\n{'server':<10}{'open sessions':>14}{'served':>8}{'RSS growth per session':>26}")
        for kind, row in opened.items():
            print(f"{kind:<10}{options.open:>14}{row['served']:>8.0f}{row['kib_per_session']:>22.1f} KiB")
        if {"toolrt", "sdk"} <= opened.keys():
            ratio = opened["toolrt"]["kib_per_session"] / opened["sdk"]["kib_per_session"]
            summary["open_ratio"] = round(ratio, 3)
            print(f"toolrt / SDK memory per open session: {ratio:.2f}x (goal <= 1.1)")
        if "toolrt" in opened:
            summary["open_all_served"] = float(opened["toolrt"]["served"] == options.open)
    print(json.dumps({**summary, **results, "open": opened}))


if __name__ == "__main__":
    main()
