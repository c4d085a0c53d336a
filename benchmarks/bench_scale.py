"""Per-call cost against the number of offered tools, measured side by side in one run.

`Runtime.call` of one trivial async Python tool (audit on) in a project of 10 tools and in one of
10,000, interleaved repeats, medians. Goal (issue 15): at 10,000 tools within 1.2x of at 10 tools.
Also: `rt.specs("openai")` the first time for a selection (compiles) and again (the cache).

    python benchmarks/bench_scale.py [--small 10] [--large 10000] [--calls 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from toolrt.api import Runtime

HANDLER = """
async def echo(args, ctx):
    return args["text"]
"""

ECHO = """\
id: echo
description: Echo the text back.
parameters: {type: object, properties: {text: {type: string}}, required: [text], additionalProperties: false}
handler: {python: "bench_handlers:echo"}
"""

FILLER = """\
id: tool_{i}
description: Look up record {i} by name and return it as JSON.
parameters:
  type: object
  properties: {{name: {{type: string, minLength: 1}}, limit: {{type: integer, minimum: 1, maximum: 100}}}}
  required: [name]
handler: {{argv: [echo, "{{{{ name }}}}"]}}
"""


def make_project(base: Path, tools: int) -> Path:
    root = base / f"project-{tools}"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "echo.yaml").write_text(ECHO)
    for i in range(tools - 1):
        (root / "tools.d" / f"tool_{i}.yaml").write_text(FILLER.format(i=i))
    (root / "bench_handlers.py").write_text(HANDLER)
    (root / "toolrt.yaml").write_text("builtin_tools: false\n")
    return root


def load(base: Path, tools: int) -> Runtime:
    data = base / f"data-{tools}"  # host-only settings: the host (here the benchmark) gives them
    return Runtime.load(make_project(base, tools), settings={"data_dir": data, "audit": data / "audit.jsonl"})


async def _per_call(rt: Runtime, calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        result = await rt.call("echo", {"text": f"hi{i % 7}"}, session="bench")
        assert result.error is None, result.error
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        small = load(base, options.small)
        large = load(base, options.large)
        started = time.perf_counter()
        first = large.specs("openai")
        specs_first_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        again = large.specs("openai")
        specs_again_ms = (time.perf_counter() - started) * 1000
        assert len(first) == len(again) == options.large

        async def run() -> tuple[float, float]:
            for rt in (small, large):
                await _per_call(rt, options.calls // 10)
            small_times, large_times = [], []
            for _ in range(options.repeats):
                small_times.append(await _per_call(small, options.calls))
                large_times.append(await _per_call(large, options.calls))
            return statistics.median(small_times), statistics.median(large_times)

        small_call, large_call = anyio.run(run)
    result = {
        "call_us_small": small_call * 1e6,
        "call_us_large": large_call * 1e6,
        "call_ratio": large_call / small_call,
        "specs_first_ms": specs_first_ms,
        "specs_cached_ms": specs_again_ms,
    }
    rows = [
        (f"rt.call, {options.small} tools", f"{result['call_us_small']:.1f} µs"),
        (f"rt.call, {options.large} tools", f"{result['call_us_large']:.1f} µs"),
        ("  ratio (goal <= 1.2)", f"{result['call_ratio']:.2f}"),
        (f"rt.specs('openai'), {options.large} tools, first", f"{specs_first_ms:.1f} ms"),
        (f"rt.specs('openai'), {options.large} tools, cached (copies)", f"{specs_again_ms:.1f} ms"),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value:>12}")
    print(
        json.dumps(
            {"benchmark": "scale", "cpus": os.cpu_count(), "small": options.small, "large": options.large, **result}
        )
    )


if __name__ == "__main__":
    main()
