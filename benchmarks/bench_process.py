"""Process runner benchmarks, measured side by side in one run.

1. Spawn overhead: `run_process(["true"])` against `anyio.run_process(["true"])` (goal: ratio <= 1.2).
2. 100 MB of output through `sh -c`: peak memory growth (goal: < 32 MiB), by tracemalloc (Python heap)
   and by ru_maxrss (whole process), plus throughput.
3. The OS sandbox through `rt.call`, sandboxed (the default policy) against `--sandbox off`,
   alternating call by call, medians of single calls: `true` (goal: ratio <= 1.5) and `git status` in a
   small repository (goal: ratio <= 1.2), and the CPU time per call of each (toolrt's threads and its
   processes, in blocks of one kind: on a busy machine wall time swings, CPU time much less); the
   same two in a repository whose `read` rules deny two files, which the sandbox masks (`masked_*`,
   same goals: the walk and the masks' mount namespace included); and
   `true` through the fork server (the path of unprivileged users) against the thread launcher.
   And the sandbox's cost inside the program, with no launch in it (`program_*`): `git status` run in a
   loop by one bash, in the sandbox `rt.call` gives it and with one mechanism left out at a time, against
   the loop unsandboxed; and what that leaves of the 1.2x goal for everything a launch does
   (`launch_budget_ms`; an upper bound: the loop reuses one warm namespace, a call gets a cold one).
4. `network:` names: a sandboxed `curl` fetching 64 KiB from a local server through toolrt's proxy
   (its own network namespace, the listener, the proxy's checks) against the same fetch with the
   network on, and the proxy's start-up cost (its thread and loop, on first use) and per-process cost
   (taking one more listener).

Usage: python benchmarks/bench_process.py [--calls N] [--repeats R]
Prints a table, then one JSON line with every number.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import anyio
from _timing import own_data_home

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolrt import Runtime
from toolrt.execute import build_env, run_process
from toolrt.sandbox import proxy
from toolrt.sandbox.config import call_plan
from toolrt.sandbox.netrules import NetworkRules
from toolrt.sandbox.plan import SandboxPlan, plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import Launch, detect_support

BIG = 100_000_000
BIG_SCRIPT = f"head -c {BIG} /dev/zero | tr '\\0' a"


async def _per_call(fn: Callable[[], Awaitable[object]], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await fn()
    return (time.perf_counter() - start) / calls


async def spawn_overhead(calls: int, repeats: int) -> dict[str, float]:
    env = build_env()
    cwd = Path.cwd()

    async def ours() -> object:
        return await run_process(["true"], cwd=cwd, env=env, timeout=30)

    async def baseline() -> object:
        return await anyio.run_process(["true"], env=env, cwd=cwd)

    for fn in (ours, baseline):  # warm both paths (imports, child watcher) before timing
        await _per_call(fn, 10)
    ours_times: list[float] = []
    base_times: list[float] = []
    for _ in range(repeats):  # interleaved so machine drift hits both alike
        ours_times.append(await _per_call(ours, calls))
        base_times.append(await _per_call(baseline, calls))
    ours_median, base_median = statistics.median(ours_times), statistics.median(base_times)
    return {
        "run_process_true_ms": ours_median * 1000,
        "anyio_run_process_true_ms": base_median * 1000,
        "ratio": ours_median / base_median,
    }


async def big_output(spill_dir: Path) -> dict[str, float]:
    env = build_env()

    async def once() -> tuple[float, int]:
        start = time.perf_counter()
        outcome = await run_process(["sh", "-c", BIG_SCRIPT], cwd=Path.cwd(), env=env, timeout=300, spill_dir=spill_dir)
        if outcome.total_bytes != BIG or outcome.exit_code != 0:
            raise SystemExit(f"unexpected outcome: {outcome.total_bytes} bytes, exit {outcome.exit_code}")
        if outcome.spill_path is not None:
            outcome.spill_path.unlink()
        return time.perf_counter() - start, len(outcome.output)

    # RSS first, on the very first big run: the conservative number (it includes first-use costs).
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    await once()
    rss_growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    elapsed, kept = await once()

    tracemalloc.start()
    heap_before = tracemalloc.get_traced_memory()[0]
    await once()
    heap_peak = tracemalloc.get_traced_memory()[1] - heap_before
    tracemalloc.stop()
    return {
        "big_output_seconds": elapsed,
        "big_output_mb_per_s": BIG / elapsed / 1e6,
        "big_output_kept_chars": kept,
        "big_output_heap_peak_mib": heap_peak / (1 << 20),
        "big_output_rss_growth_mib": rss_growth_kib / 1024,
    }


TOOLS = {
    "true_tool": 'id: true_tool\ndescription: Runs true, for the benchmark.\nhandler: {argv: ["true"]}\n',
    "git_status": "id: git_status\ndescription: Runs git status, for the benchmark.\nhandler: {argv: [git, status]}\n",
}


MASKED_PERMISSIONS = 'permission:\n  "*": allow\n  read:\n    "*": allow\n    "*.env": deny\n'


def _small_repo(root: Path, *, deny: bool = False) -> None:
    (root / "tools.d").mkdir(parents=True)
    for name, text in TOOLS.items():
        (root / "tools.d" / f"{name}.yaml").write_text(text)
    (root / "permissions.yaml").write_text(MASKED_PERMISSIONS if deny else 'permission:\n  "*": allow\n')
    if deny:
        (root / "sub").mkdir()
        (root / ".env").write_text("KEY=secret\n")
        (root / "sub" / "app.env").write_text("KEY=secret\n")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n")
    for index in range(20):
        (root / f"file{index}.txt").write_text(f"line {index}\n" * 50)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)


def _load(root: Path, mode: str | None) -> Runtime:
    return Runtime.load(root, settings={"sandbox.mode": mode} if mode else None)


async def sandbox_overhead(root: Path, calls: int, repeats: int, label: str = "") -> dict[str, float]:
    sandboxed, unsandboxed = _load(root, None), _load(root, "off")
    results: dict[str, float] = {}
    for tool in ("true_tool", "git_status"):
        probe = await sandboxed.call(tool, {})
        if probe.error or probe.metadata.get("sandbox") in (None, "none"):
            raise SystemExit(f"{tool}: not sandboxed as expected: {probe.error or probe.metadata}")
        if (await unsandboxed.call(tool, {})).metadata.get("sandbox") != "none":
            raise SystemExit(f"{tool}: the unsandboxed runtime ran in a sandbox")
        on: list[float] = []
        off: list[float] = []
        for _ in range(calls * repeats):  # alternate call by call: load swings on a shared machine hit both alike
            start = time.perf_counter()
            await sandboxed.call(tool, {})
            middle = time.perf_counter()
            await unsandboxed.call(tool, {})
            on.append(middle - start)
            off.append(time.perf_counter() - middle)
        for name, runtime in (("sandboxed", sandboxed), ("unsandboxed", unsandboxed)):
            results[f"{label}{tool}_{name}_cpu_ms"] = await _cpu_per_call(runtime, tool, calls) * 1000
        results[f"{label}{tool}_sandboxed_ms"] = statistics.median(on) * 1000
        results[f"{label}{tool}_unsandboxed_ms"] = statistics.median(off) * 1000
        results[f"{label}{tool}_ratio"] = statistics.median(on) / statistics.median(off)
    results[f"{label}sandbox"] = probe.metadata["sandbox"]
    return results


PROGRAM_LOOP = "TIMEFORMAT=%R; time (for i in $(seq {loops}); do git status > /dev/null; done)"


async def program_cost(root: Path, loops: int, repeats: int) -> dict[str, float]:
    """What the sandbox costs inside the program, no launch in it: one bash runs `git status` `loops` times
    (timed by bash itself), in the sandbox `rt.call` gives it and in that sandbox with one mechanism left
    out (the absent-name cover, the PID namespace, the UNIX-socket filter: plans made for this measurement
    only, no config gives them), against the same loop unsandboxed; variants interleaved, medians of
    `repeats`. What is left of the 1.2x budget of one `rt.call` once the program has paid for the sandbox is
    what any launcher (plan, namespace, threads, Landlock) may cost."""
    snapshot = _load(root, None).snapshot
    plan = call_plan(snapshot.sandbox_for("git_status"), root=root, output_dir=snapshot.truncation_dir)
    if plan is None or not plan.covered or not plan.pid_namespace or not plan.no_unix_sockets:
        raise SystemExit(f"the sandbox here lacks a mechanism this measures: {plan and plan.description}")
    variants: dict[str, SandboxPlan | None] = {
        "every_mechanism": plan,
        "no_cover": replace(plan, covered=()),
        "no_pid_namespace": replace(plan, pid_namespace=False),
        "no_socket_filter": replace(plan, no_unix_sockets=False),
        "unsandboxed": None,
    }
    env = build_env()
    script = PROGRAM_LOOP.format(loops=loops)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, variant in variants.items():
            outcome = await run_process(["bash", "-c", script], cwd=root, env=env, timeout=120, sandbox=variant)
            if outcome.exit_code != 0:
                raise SystemExit(f"{name}: the git status loop failed: {outcome.output[-300:]}")
            times[name].append(float(outcome.output.split()[-1]) / loops)
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians["unsandboxed"]
    results = {f"program_{name}_ms": value * 1000 for name, value in medians.items()}
    results.update({f"program_{name}_ratio": value / base for name, value in medians.items() if name != "unsandboxed"})
    return results


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _cpu_per_call(runtime: Runtime, tool: str, calls: int) -> float:
    """CPU seconds per call, toolrt's threads (the namespaces made ahead and unmounted after, included)
    and the processes it waited for: what a busy machine's other work cannot inflate, unlike wall time.
    A block of calls of one kind: work a call leaves to a thread lands in its own block."""
    start = _cpu_seconds()
    for _ in range(calls):
        await runtime.call(tool, {})
    return (_cpu_seconds() - start) / calls


async def launcher_overhead(root: Path, calls: int, repeats: int) -> dict[str, float]:
    """`true` in the same sandbox, started from a sandboxed thread vs by the fork server."""
    support = detect_support()
    launches: tuple[Launch, ...] = ("thread", "forkserver")
    plans = {
        launch: plan_sandbox(
            _load(root, None).snapshot.sandbox, replace(support, launch=launch), root=root, output_dir=root
        )
        for launch in launches
    }
    env = build_env()
    times: dict[str, list[float]] = {"thread": [], "forkserver": []}
    for _ in range(repeats):
        for launch, plan in plans.items():
            times[launch].append(
                await _per_call(lambda p=plan: run_process(["true"], cwd=root, env=env, timeout=30, sandbox=p), calls)  # type: ignore[misc]
            )
    thread, served = statistics.median(times["thread"]), statistics.median(times["forkserver"])
    return {"thread_true_ms": thread * 1000, "forkserver_true_ms": served * 1000, "forkserver_ratio": served / thread}


async def _curl(url: str, root: Path, env: dict[str, str], plan: object) -> object:
    return await run_process(["curl", "-sfo", "/dev/null", url], cwd=root, env=env, timeout=30, sandbox=plan)  # type: ignore[arg-type]


async def proxied_fetch(root: Path, calls: int, repeats: int) -> dict[str, float]:
    """`curl` of 64 KiB from a local server: through the proxy (`network:` names) vs with the network on."""
    import functools
    import http.server
    import socket
    import threading

    (root / "site").mkdir()
    (root / "site" / "blob").write_bytes(b"x" * 65536)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(root / "site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    proxy.use_resolver(lambda name: ["127.0.0.1"] if name == "bench.test" else [])
    support = detect_support()
    proxied = SandboxPolicy(network=False, network_rules=NetworkRules(((f"bench.test:{port}",),)))
    plans = {
        "proxied": (plan_sandbox(proxied, support, root=root, output_dir=root), f"http://bench.test:{port}/blob"),
        "network_on": (
            plan_sandbox(SandboxPolicy(), support, root=root, output_dir=root),
            f"http://127.0.0.1:{port}/blob",
        ),
    }
    env = build_env()
    times: dict[str, list[float]] = {name: [] for name in plans}
    try:
        for _ in range(repeats):
            for name, (plan, url) in plans.items():
                times[name].append(await _per_call(functools.partial(_curl, url, root, env, plan), calls))
        starts: list[float] = []
        serves: list[float] = []
        for _ in range(repeats):
            proxy.stop_proxy()
            for sample in (starts, serves):
                listener = socket.create_server(("127.0.0.1", 0))
                begin = time.perf_counter()
                session = proxy.serve(listener.detach(), proxied.network_rules)  # type: ignore[arg-type]
                sample.append(time.perf_counter() - begin)
                session.close()
    finally:
        proxy.use_resolver(None)
        server.shutdown()
        server.server_close()
    through, direct = statistics.median(times["proxied"]), statistics.median(times["network_on"])
    return {
        "proxied_fetch_ms": through * 1000,
        "direct_fetch_ms": direct * 1000,
        "proxied_fetch_ratio": through / direct,
        "proxy_start_ms": statistics.median(starts) * 1000,
        "proxy_serve_ms": statistics.median(serves) * 1000,
    }


async def main(calls: int, repeats: int) -> dict[str, float]:
    results = await spawn_overhead(calls, repeats)
    with tempfile.TemporaryDirectory() as spill:
        results.update(await big_output(Path(spill)))
    with tempfile.TemporaryDirectory() as project:
        root = Path(project).resolve()
        _small_repo(root)
        results.update(await sandbox_overhead(root, max(calls // 4, 20), repeats))
        results.update(await program_cost(root, max(calls // 2, 50), repeats))
        results.update(await launcher_overhead(root, max(calls // 4, 20), repeats))
        results.update(await proxied_fetch(root, max(calls // 10, 10), repeats))
    in_program = results["program_every_mechanism_ms"] - results["program_unsandboxed_ms"]
    results["launch_budget_ms"] = 0.2 * results["git_status_unsandboxed_ms"] - in_program
    with tempfile.TemporaryDirectory() as project:
        root = Path(project).resolve()
        _small_repo(root, deny=True)
        results.update(await sandbox_overhead(root, max(calls // 4, 20), repeats, "masked_"))
    return results


def _table(r: dict[str, float], calls: int, repeats: int) -> str:
    rows = [
        ("spawn `true`: run_process", f"{r['run_process_true_ms']:.3f} ms", "median per call"),
        ("spawn `true`: anyio.run_process", f"{r['anyio_run_process_true_ms']:.3f} ms", "median per call"),
        ("ratio (goal <= 1.2)", f"{r['ratio']:.3f}", "PASS" if r["ratio"] <= 1.2 else "FAIL"),
        ("100 MB via sh -c: time", f"{r['big_output_seconds']:.2f} s", f"{r['big_output_mb_per_s']:.0f} MB/s"),
        (
            "100 MB: heap peak growth",
            f"{r['big_output_heap_peak_mib']:.1f} MiB",
            "PASS" if r["big_output_heap_peak_mib"] < 32 else "FAIL",
        ),
        (
            "100 MB: RSS growth (goal < 32)",
            f"{r['big_output_rss_growth_mib']:.1f} MiB",
            "PASS" if r["big_output_rss_growth_mib"] < 32 else "FAIL",
        ),
        ("sandbox", str(r["sandbox"]), ""),
        ("rt.call `true`: sandboxed", f"{r['true_tool_sandboxed_ms']:.3f} ms", "median per call"),
        ("rt.call `true`: sandbox off", f"{r['true_tool_unsandboxed_ms']:.3f} ms", "median per call"),
        ("ratio (goal <= 1.5)", f"{r['true_tool_ratio']:.3f}", "PASS" if r["true_tool_ratio"] <= 1.5 else "FAIL"),
        ("rt.call `git status`: sandboxed", f"{r['git_status_sandboxed_ms']:.3f} ms", "median per call"),
        ("rt.call `git status`: sandbox off", f"{r['git_status_unsandboxed_ms']:.3f} ms", "median per call"),
        ("ratio (goal <= 1.2)", f"{r['git_status_ratio']:.3f}", "PASS" if r["git_status_ratio"] <= 1.2 else "FAIL"),
        ("CPU per call `true`: sandboxed", f"{r['true_tool_sandboxed_cpu_ms']:.3f} ms", "toolrt + its processes"),
        ("CPU per call `true`: sandbox off", f"{r['true_tool_unsandboxed_cpu_ms']:.3f} ms", ""),
        ("CPU per call `git status`: sandboxed", f"{r['git_status_sandboxed_cpu_ms']:.3f} ms", ""),
        ("CPU per call `git status`: off", f"{r['git_status_unsandboxed_cpu_ms']:.3f} ms", ""),
        ("masked sandbox", str(r["masked_sandbox"]), ""),
        ("rt.call `true`: masked", f"{r['masked_true_tool_sandboxed_ms']:.3f} ms", "median per call"),
        ("rt.call `true`: masked, sandbox off", f"{r['masked_true_tool_unsandboxed_ms']:.3f} ms", "median per call"),
        (
            "ratio (goal <= 1.5)",
            f"{r['masked_true_tool_ratio']:.3f}",
            "PASS" if r["masked_true_tool_ratio"] <= 1.5 else "FAIL",
        ),
        ("rt.call `git status`: masked", f"{r['masked_git_status_sandboxed_ms']:.3f} ms", "median per call"),
        ("rt.call `git status`: masked, off", f"{r['masked_git_status_unsandboxed_ms']:.3f} ms", "median per call"),
        (
            "ratio (goal <= 1.2)",
            f"{r['masked_git_status_ratio']:.3f}",
            "PASS" if r["masked_git_status_ratio"] <= 1.2 else "FAIL",
        ),
        ("git status, in one bash: unsandboxed", f"{r['program_unsandboxed_ms']:.3f} ms", "per run, no launch"),
        ("  in the sandbox (every mechanism)", f"{r['program_every_mechanism_ratio']:.3f}", "x unsandboxed"),
        ("  without the absent-name cover", f"{r['program_no_cover_ratio']:.3f}", "x unsandboxed"),
        ("  without the PID namespace", f"{r['program_no_pid_namespace_ratio']:.3f}", "x unsandboxed"),
        ("  without the UNIX-socket filter", f"{r['program_no_socket_filter_ratio']:.3f}", "x unsandboxed"),
        (
            "left for launching (1.2x rt.call)",
            f"{r['launch_budget_ms']:.3f} ms",
            "1.2x goal less the program's own sandbox cost",
        ),
        ("sandboxed `true`: thread launcher", f"{r['thread_true_ms']:.3f} ms", "median per call"),
        ("sandboxed `true`: fork server", f"{r['forkserver_true_ms']:.3f} ms", f"ratio {r['forkserver_ratio']:.2f}"),
        ("curl 64 KiB: network on", f"{r['direct_fetch_ms']:.3f} ms", "median per call"),
        ("curl 64 KiB: through the proxy", f"{r['proxied_fetch_ms']:.3f} ms", f"ratio {r['proxied_fetch_ratio']:.2f}"),
        ("proxy start-up (first use)", f"{r['proxy_start_ms']:.3f} ms", "thread, loop, first listener"),
        ("proxy: one more process", f"{r['proxy_serve_ms']:.3f} ms", "taking its listener"),
    ]
    width = max(len(name) for name, _, _ in rows)
    lines = [f"process runner ({calls} calls x {repeats} repeats, interleaved)"]
    lines += [f"  {name:<{width}}  {value:>12}  {note}" for name, value, note in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    with own_data_home():
        numbers = anyio.run(main, options.calls, options.repeats)
    print(_table(numbers, options.calls, options.repeats))
    print(
        json.dumps(
            {"benchmark": "process", **{k: round(v, 4) if isinstance(v, float) else v for k, v in numbers.items()}}
        )
    )
