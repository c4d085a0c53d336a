"""`toolrt serve` against the official SDK's `MCPServer` and FastMCP, side by side in one run.

The same async echo tool (`async echo(text) -> text`) on each server, each logging at warning; toolrt's
with its permission step and the audit log on. Over streamable HTTP on 127.0.0.1 with both protocol
versions (2025-11-25 with MCP sessions, one per client; 2026-07-28, sessionless) and over stdio (one
connection, the callers multiplexed on it), at 1, 8 and 32 concurrent clients. Each measurement: the
clients connect and warm up, then make `--calls` calls between them; reported are throughput (calls/s)
and the server's CPU time per call (user + system of the server process, from /proc), and the client's
(this process's) CPU time per call. Median of `--repeats` interleaved rounds (every server and setting
once per round, the servers' order reversed every other round).

Goals (issue 15): toolrt's server CPU per call at most 1.05x the SDK server's; toolrt's throughput
with 1,000 offered tools at least 0.9x that with 1 tool (HTTP 2026-07-28, 8 clients).

The state store is a dimension too (issue 29): `--stores sqlite,postgresql` adds `toolrt@sqlite` and
`toolrt@postgresql` servers (`TOOLRT_STORE`; PostgreSQL is a server pgserver starts in a temporary
directory), each compared with toolrt's in-process store. Goal: server CPU per call at most 1.5x.

Authentication (issue 30): `--auth` adds a `toolrt+auth` server, toolrt with `auth.*` set (an issuer's JWKS
served by this script on loopback, a 2048-bit RSA key it makes), every client sending a bearer JWT that
the server verifies on every request. Goal: server CPU per call at most 1.2x toolrt without.

    python benchmarks/bench_serve.py [--calls 400] [--repeats 5] [--clients 1,8,32] [--servers toolrt,sdk,fastmcp]
                                     [--stores sqlite,postgresql] [--auth]

Needs the `bench` extra (FastMCP): pip install -e '.[bench]'.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from bench_scale import make_project as make_scale_project

HERE = Path(__file__).resolve().parent
PEERS = HERE / "_serve_peers.py"
LEGACY, MODERN = "legacy", "2026-07-28"
TICKS = os.sysconf("SC_CLK_TCK")


def _pid_in(pidfile: Path) -> int:
    """The pid a stdio server wrote into `pidfile`."""
    return int(pidfile.read_text())


def make_project(base: Path, tools: int) -> Path:
    """bench_scale's project (the echo tool and fillers, audit on), with a permission rule that decides."""
    root = make_scale_project(base, tools)
    (root / "permissions.yaml").write_text('permission:\n  "*": ask\n  echo: allow\n')
    return root


def server_argv(kind: str, transport: str, port: int, root: Path, extra: Sequence[str] = ()) -> list[str]:
    """The command of a server of `kind`; `extra`: more options of `toolrt serve`."""
    if kind.partition("@")[0].partition("+")[0] == "toolrt":
        argv = [sys.executable, "-m", "toolrt", "serve", "--root", str(root), *extra]
        return argv + (["--transport", "http", "--port", str(port)] if transport == "http" else [])
    return [sys.executable, str(PEERS), kind, transport, str(port)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@contextmanager
def http_server(
    kind: str, root: Path, env: dict[str, str], extra: Sequence[str] = (), port: int | None = None
) -> Iterator[tuple[str, int]]:
    """Start one server on `port` (else a free loopback port); yield (url, pid); stop it.

    Its stderr goes to a file (a pipe nobody reads would fill up and stall a server that logs requests).
    """
    port = port or _free_port()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            server_argv(kind, "http", port, root, extra), env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"{kind} server exited: {log.read().decode(errors='replace')[-2000:]}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{kind} server never listened") from None
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp", process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@dataclass
class Sample:
    calls_per_s: float
    cpu_ms_per_call: float
    client_cpu_ms_per_call: float
    """The benchmark's own CPU per call (the clients): a server whose replies cost the client more is slower."""


async def _drive(clients: list[Any], callers: int, calls: int, label: str) -> None:
    """`calls` echo calls spread over `callers` concurrent tasks, caller i using clients[i % len]."""
    counter = iter(range(10**9))

    async def caller(client: Any, count: int) -> None:
        for _ in range(count):
            text = f"{label}{next(counter)}"  # distinct arguments: repeated ones would (rightly) trip the doom loop
            result = await client.call_tool("echo", {"text": text})
            assert not result.is_error and result.content[0].text == text, result

    per = [calls // callers + (1 if i < calls % callers else 0) for i in range(callers)]
    async with anyio.create_task_group() as group:
        for i, count in enumerate(per):
            group.start_soon(caller, clients[i % len(clients)], count)


async def measure(
    connect: Callable[[AsyncExitStack], Awaitable[list[Any]]], pid: Callable[[], int], callers: int, calls: int
) -> Sample:
    with anyio.fail_after(600):
        async with AsyncExitStack() as stack:
            clients = await connect(stack)
            await _drive(clients, callers, max(callers * 3, 20), "warm")
            server = pid()
            cpu0, wall0, client0 = cpu_seconds(server), time.perf_counter(), time.process_time()
            await _drive(clients, callers, calls, "t")
            wall, cpu = time.perf_counter() - wall0, cpu_seconds(server) - cpu0
            client = time.process_time() - client0
    return Sample(calls / wall, cpu * 1000 / calls, client * 1000 / calls)


def http_connect(
    url: str, mode: str, count: int, token: str | None = None
) -> Callable[[AsyncExitStack], Awaitable[list[Any]]]:
    """Clients of `url`; with `token`, each sends it as its bearer token."""
    from mcp import Client

    async def client(stack: AsyncExitStack) -> Any:
        if token is None:
            return await stack.enter_async_context(Client(url, mode=mode))
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300))
        )
        return await stack.enter_async_context(Client(streamable_http_client(url, http_client=http), mode=mode))

    async def connect(stack: AsyncExitStack) -> list[Any]:
        # 2025-11-25: one MCP session per client; 2026-07-28 has no sessions, so one client's calls
        # are as independent as several clients' and one client object serves every caller.
        return [await client(stack) for _ in range(count if mode == LEGACY else 1)]

    return connect


class _Issuer:
    """An OAuth issuer's JWKS on a loopback port (a thread of this process) and tokens signed by its key."""

    def __init__(self, stack: Any) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa

        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        body = json.dumps({"keys": [{**public, "kid": "bench", "use": "sig", "alg": "RS256"}]}).encode()

        class Keys(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Keys)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        stack.callback(server.server_close)
        stack.callback(server.shutdown)
        self.url = f"http://127.0.0.1:{server.server_port}"

    def env(self, audience: str) -> dict[str, str]:
        return {
            "TOOLRT_AUTH__ISSUER": self.url,
            "TOOLRT_AUTH__AUDIENCE": audience,
            "TOOLRT_AUTH__JWKS_URL": f"{self.url}/jwks",
        }

    def token(self, audience: str) -> str:
        import jwt

        now = int(time.time())
        claims = {"iss": self.url, "aud": audience, "sub": "bench", "iat": now, "exp": now + 3600, "scope": "tools"}
        return jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": "bench"})


def stdio_connect(
    kind: str, root: Path, env: dict[str, str], pidfile: Path
) -> Callable[[AsyncExitStack], Awaitable[list[Any]]]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    argv = server_argv(kind, "stdio", 0, root)
    # exec keeps the pid: the wrapper writes it for the CPU reading, then becomes the server.
    wrapper = "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); os.execv(sys.argv[2], sys.argv[2:])"
    params = StdioServerParameters(
        command=sys.executable, args=["-c", wrapper, str(pidfile), *argv], env=env, cwd=str(root)
    )

    async def connect(stack: AsyncExitStack) -> list[Any]:
        return [await stack.enter_async_context(Client(params, mode=LEGACY))]

    return connect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="timed calls per measurement")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (medians are reported)")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--servers", default="toolrt,sdk,fastmcp")
    parser.add_argument("--transports", default=f"http:{LEGACY},http:{MODERN},stdio")
    parser.add_argument("--many-tools", type=int, default=1000, help="offered tools for the scale comparison")
    parser.add_argument("--no-scale", action="store_true", help="leave out the 1 vs --many-tools comparison")
    parser.add_argument("--stores", default="", help="state stores to measure toolrt with too: sqlite,postgresql")
    parser.add_argument("--auth", action="store_true", help="measure toolrt with authentication on too")
    options = parser.parse_args()
    counts = [int(c) for c in options.clients.split(",")]
    stores = [store for store in options.stores.split(",") if store]
    kinds = options.servers.split(",") + [f"toolrt@{store}" for store in stores]
    kinds += ["toolrt+auth"] if options.auth else []
    tokens: dict[str, str] = {}
    transports = options.transports.split(",")
    samples: dict[str, list[Sample]] = {}
    scale = "toolrt" in kinds and not options.no_scale
    with tempfile.TemporaryDirectory() as tmp, contextlib_exit() as stack:
        base = Path(tmp)
        one = make_project(base, 1)
        many = make_project(base, options.many_tools) if scale else one
        # `toolrt` is the in-process store (`toolrt serve` defaults to sqlite); `toolrt@STORE` the others.
        env = {**os.environ, "TOOLRT_DATA_DIR": str(base / "data"), "PYTHONUNBUFFERED": "1", "TOOLRT_STORE": "memory"}
        envs = dict.fromkeys(kinds, env)
        for store in stores:
            envs[f"toolrt@{store}"] = {**env, "TOOLRT_STORE": _store_setting(store, base, stack)}
        ports: dict[str, int] = {}
        if options.auth:
            if any(not t.startswith("http") for t in transports):
                raise SystemExit("--auth measures HTTP only: pass --transports with http: entries alone")
            issuer = _Issuer(stack)
            ports["toolrt+auth"] = _free_port()
            audience = f"http://127.0.0.1:{ports['toolrt+auth']}/mcp"
            envs["toolrt+auth"] = {**env, **issuer.env(audience)}
            tokens["toolrt+auth"] = issuer.token(audience)
        servers = {
            kind: stack.enter_context(http_server(kind, one, envs[kind], port=ports.get(kind)))
            for kind in kinds
            if any(t.startswith("http") for t in transports) or (scale and kind == "toolrt")
        }
        if scale:
            servers["toolrt-many"] = stack.enter_context(http_server("toolrt", many, env))
        for round_ in range(options.repeats):
            order = kinds if round_ % 2 == 0 else kinds[::-1]  # no server is always measured first
            for transport in transports:
                for callers in counts:
                    for kind in order:
                        key = f"{transport}|{callers}|{kind}"
                        if transport == "stdio":
                            pidfile = base / f"{kind}.pid"
                            connect = stdio_connect(kind, one, envs[kind], pidfile)
                            pid: Callable[[], int] = functools.partial(_pid_in, pidfile)
                        else:
                            url, server_pid = servers[kind]
                            connect = http_connect(url, transport.split(":", 1)[1], callers, tokens.get(kind))
                            pid = functools.partial(int, server_pid)
                        samples.setdefault(key, []).append(anyio.run(measure, connect, pid, callers, options.calls))
            if scale:
                for kind in ("toolrt", "toolrt-many") if round_ % 2 == 0 else ("toolrt-many", "toolrt"):
                    url, server_pid = servers[kind]
                    key = f"scale|8|{kind}"
                    connect = http_connect(url, MODERN, 8)
                    samples.setdefault(key, []).append(
                        anyio.run(measure, connect, lambda server_pid=server_pid: server_pid, 8, options.calls)
                    )
            print(f"round {round_ + 1}/{options.repeats} done", file=sys.stderr, flush=True)
    report(samples, transports, counts, kinds, options, scale)


def _store_setting(store: str, base: Path, stack: Any) -> str:
    """The `store` setting of a `toolrt@STORE` server; PostgreSQL: a server started for the run."""
    if store == "sqlite":
        return "sqlite"
    if store != "postgresql":
        raise SystemExit(f"--stores: {store!r} is not sqlite or postgresql")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver  # the test extra's PostgreSQL (pip install -e '.[test]')

    server = pgserver.postgres_server.get_server(base / "postgresql", cleanup_mode="stop")
    stack.callback(server.cleanup)
    uri: str = server.get_uri()
    return uri


class contextlib_exit:
    """An ExitStack usable in a `with` with other managers (servers stop however the run ends)."""

    def __enter__(self) -> Any:
        from contextlib import ExitStack

        self._stack = ExitStack()
        return self._stack.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._stack.__exit__(*exc)


def report(
    samples: dict[str, list[Sample]],
    transports: list[str],
    counts: list[int],
    kinds: list[str],
    options: argparse.Namespace,
    scale: bool,
) -> None:
    medians = {
        key: {
            "calls_per_s": statistics.median(s.calls_per_s for s in found),
            "cpu_ms_per_call": statistics.median(s.cpu_ms_per_call for s in found),
            "client_cpu_ms_per_call": statistics.median(s.client_cpu_ms_per_call for s in found),
        }
        for key, found in samples.items()
    }
    ratios = _table(medians, transports, counts, kinds)
    result: dict[str, Any] = {
        "benchmark": "serve",
        "cpus": os.cpu_count(),
        "calls": options.calls,
        "repeats": options.repeats,
        "medians": medians,
        "cpu_ratio_toolrt_sdk": ratios,
    }
    if scale:
        few, lots = medians["scale|8|toolrt"], medians["scale|8|toolrt-many"]
        result["throughput_ratio_many_tools"] = lots["calls_per_s"] / few["calls_per_s"]
        print(
            f"\nHTTP {MODERN}, 8 clients: 1 tool {few['calls_per_s']:.0f} calls/s, {options.many_tools} tools "
            f"{lots['calls_per_s']:.0f} calls/s: ratio {result['throughput_ratio_many_tools']:.2f} (goal >= 0.9)"
        )
    if ratios:
        result["cpu_ratio_toolrt_sdk_worst"] = max(ratios.values())
        print(f"server CPU per call, toolrt / SDK: worst {max(ratios.values()):.2f} (goal <= 1.05)")
    stored = [kind for kind in kinds if kind.startswith("toolrt@")]
    if stored and "toolrt" in kinds:
        result["cpu_ratio_store_memory"] = {
            f"{kind}|{key}": ratio
            for kind in stored
            for key, ratio in _against_plain(
                medians, kind, transports, counts, f"{kind} / in-process store", 1.5
            ).items()
        }
    if "toolrt+auth" in kinds and "toolrt" in kinds:
        auth_ratios = _against_plain(medians, "toolrt+auth", transports, counts, "authentication on / off", 1.2)
        result["cpu_ratio_auth"] = auth_ratios
        result["cpu_ratio_auth_worst"] = max(auth_ratios.values())
    print(json.dumps(result))


def _table(
    medians: dict[str, dict[str, float]], transports: list[str], counts: list[int], kinds: list[str]
) -> dict[str, float]:
    """Print a row per transport and client count; toolrt's server CPU per call over the SDK's, by row."""
    width = max(len(k) for k in kinds) + 11
    both = "toolrt" in kinds and "sdk" in kinds
    header = f"{'transport':<18}{'clients':>8}" + "".join(
        f"{k + ' calls/s':>{width}}{k + ' cpu ms':>{width}}{k + ' client ms':>{width}}" for k in kinds
    )
    print(header + (f"{'cpu toolrt/sdk':>16}" if both else ""))
    ratios: dict[str, float] = {}
    for transport in transports:
        for callers in counts:
            key = f"{transport}|{callers}"
            row = f"{transport:<18}{callers:>8}"
            for kind in kinds:
                m = medians[f"{key}|{kind}"]
                row += f"{m['calls_per_s']:>{width}.0f}{m['cpu_ms_per_call']:>{width}.3f}"
                row += f"{m['client_cpu_ms_per_call']:>{width}.3f}"
            if both:
                ratios[key] = medians[f"{key}|toolrt"]["cpu_ms_per_call"] / medians[f"{key}|sdk"]["cpu_ms_per_call"]
                row += f"{ratios[key]:>16.2f}"
            print(row)
    return ratios


def _against_plain(
    medians: dict[str, dict[str, float]],
    kind: str,
    transports: list[str],
    counts: list[int],
    label: str,
    goal: float,
) -> dict[str, float]:
    """`kind`'s server CPU per call over plain toolrt's, by transport and client count, each printed as `label`."""
    ratios: dict[str, float] = {}
    for transport in transports:
        for callers in counts:
            key = f"{transport}|{callers}"
            ratios[key] = medians[f"{key}|{kind}"]["cpu_ms_per_call"] / medians[f"{key}|toolrt"]["cpu_ms_per_call"]
            print(f"server CPU per call, {label}, {transport}, {callers} clients: {ratios[key]:.2f} (goal <= {goal})")
    return ratios


if __name__ == "__main__":
    main()
