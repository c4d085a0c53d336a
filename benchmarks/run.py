"""Run every benchmark in this directory, side by side in one go, and print their tables and JSON.

    python benchmarks/run.py            # all of them
    python benchmarks/run.py load call  # only bench_load.py and bench_call.py
    python benchmarks/run.py serve_auth # bench_serve.py --auth (HTTP, authentication on and off), see RUNS

Each benchmark prints its own table and, last, one JSON line; this runner collects those lines into
one JSON document at the end (`{"bench_name": {...}, ..., "goals": [...]}`), for reports and for comparing
runs; before it, a table of every goal (`GOALS`) with its measured number: met, NOT MET, or not run.
"""

from __future__ import annotations

import json
import operator
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

AT_MOST, AT_LEAST = operator.le, operator.ge
GOALS: list[tuple[str, tuple[str, ...], Callable[[float, float], bool], float, str]] = [
    # (benchmark, path to the number in its JSON line, comparison, limit, what it measures)
    ("bench_call", ("cpu_ratio_vs_bare",), AT_MOST, 1.3, "rt.call (awaiting handler) / SDK bare call_tool, CPU"),
    ("bench_call", ("cpu_speedup_vs_client",), AT_LEAST, 6.0, "SDK in-memory client / rt.call, CPU"),
    ("bench_call", ("cpu_abort_ratio",), AT_MOST, 1.2, "rt.call with abort= / without, CPU"),
    ("bench_call", ("ratio",), AT_MOST, 1.2, "argv `true` through rt.call / anyio.run_process"),
    ("bench_call", ("otel_cpu_no_provider_ratio",), AT_MOST, 1.05, "rt.call, no tracer provider / SDK disabled, CPU"),
    ("bench_rules", ("cpu_ratio",), AT_MOST, 1.2, "rt.call at 1,000 extra rules / base, CPU"),
    ("bench_scale", ("call_ratio",), AT_MOST, 1.2, "rt.call at 10,000 tools / at 10"),
    ("bench_providers", ("ratio",), AT_MOST, 1.1, "run_tool_calls / call_many by hand"),
    ("bench_process", ("ratio",), AT_MOST, 1.2, "run_process(true) / anyio.run_process(true)"),
    ("bench_process", ("big_output_rss_growth_mib",), AT_MOST, 32.0, "100 MB of output: RSS growth, MiB"),
    ("bench_process", ("true_tool_ratio",), AT_MOST, 1.5, "sandboxed `true` / unsandboxed"),
    ("bench_process", ("git_status_ratio",), AT_MOST, 1.2, "sandboxed `git status` / unsandboxed"),
    ("bench_bash", ("worst_ratio",), AT_MOST, 5.0, "bash analysis / bare parse, worst ordinary line"),
    ("bench_bash", ("hostile_decisions_ok",), AT_LEAST, 1.0, "every hostile 100 KB line decided correctly"),
    ("bench_startup", ("toolrt validate", "ratio"), AT_MOST, 0.3, "toolrt validate / import mcp, wall"),
    ("bench_startup", ("toolrt --help", "ratio"), AT_MOST, 0.15, "toolrt --help / import mcp, wall"),
    ("bench_load", ("load_cpu_ratio",), AT_MOST, 1.3, "Runtime.load (library) / libyaml, 10,000 files, CPU"),
    ("bench_load", ("validate_cpu_ratio",), AT_MOST, 2.0, "validate (as the command) / libyaml, 10,000 files, CPU"),
    ("bench_load", ("memory_ratio",), AT_MOST, 2.0, "memory per tool / parsed YAML"),
    ("bench_serve_memory", ("toolrt", "growth_mib"), AT_MOST, 10.0, "serve RSS growth over 10,000 sessions, MiB"),
    ("bench_serve_memory", ("open_ratio",), AT_MOST, 1.1, "serve memory per open HTTP session / SDK MCPServer's"),
    ("bench_serve_memory", ("open_all_served",), AT_LEAST, 1.0, "10,000 open sessions all served (--max-sessions)"),
    ("bench_reload", ("ratio_10",), AT_MOST, 3.0, "save -> client's new tools/list / bare watchfiles, 10 files"),
    ("bench_reload", ("ratio_1000",), AT_MOST, 5.0, "save -> client's new tools/list / bare watchfiles, 1,000 files"),
    ("bench_serve", ("cpu_ratio_toolrt_sdk_worst",), AT_MOST, 1.05, "serve CPU per call / SDK MCPServer's, worst case"),
    ("bench_serve", ("throughput_ratio_many_tools",), AT_LEAST, 0.9, "serve throughput, 1,000 tools / 1 tool"),
    ("bench_serve_auth", ("cpu_ratio_auth_worst",), AT_MOST, 1.2, "serve CPU per call, auth on / off"),
    ("bench_guards", ("failed",), AT_MOST, 0.0, "guards past their time goals"),
]
"""Every goal the benchmarks hold, where its number is in each one's JSON line (benchmarks/README.md)."""

RUNS: dict[str, tuple[str, ...]] = {
    "bench_serve_auth": (
        "bench_serve.py",
        "--auth",
        "--servers",
        "toolrt",
        "--no-scale",
        "--transports",
        "http:legacy,http:2026-07-28",
    ),
}
"""Runs of a benchmark with arguments, under names of their own (`bench_serve --auth` measures HTTP only)."""


def judge(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal with its measured number and whether it is met (None: its benchmark did not run)."""
    judged = []
    for bench, path, compare, limit, what in GOALS:
        value: Any = results.get(bench)
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        number = float(value) if isinstance(value, (int, float)) else None
        met = None if number is None else bool(compare(number, limit))
        sign = "<=" if compare is AT_MOST else ">="
        judged.append({"benchmark": bench, "goal": f"{what} {sign} {limit:g}", "value": number, "met": met})
    return judged


def main(argv: list[str]) -> int:
    wanted = set(argv)
    runs = {path.stem: (path.name,) for path in HERE.glob("bench_*.py")} | RUNS
    chosen = sorted(name for name in runs if not wanted or name.removeprefix("bench_") in wanted)
    results: dict[str, object] = {}
    failed = []
    for name in chosen:
        script, *arguments = runs[name]
        print(f"\n== {name}" + (f" ({script} {' '.join(arguments)})" if arguments else ""), flush=True)
        run = subprocess.run([sys.executable, str(HERE / script), *arguments], capture_output=True, text=True)
        lines = run.stdout.rstrip().splitlines()
        print("\n".join(line for line in lines if not line.startswith("{")))
        if run.returncode != 0:
            failed.append(name)
            print(run.stderr[-2000:], file=sys.stderr)
            continue
        for line in reversed(lines):
            if line.startswith("{"):
                results[name] = json.loads(line)
                break
    goals = judge(results)
    print("\n== goals")
    for goal in goals:
        verdict = {True: "met", False: "NOT MET", None: "not run"}[goal["met"]]
        value = "" if goal["value"] is None else f"{goal['value']:.3g}"
        print(f"{goal['goal']:<72} {value:>8}  {verdict}")
    print("\n" + json.dumps({**results, "goals": goals}, indent=2))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
