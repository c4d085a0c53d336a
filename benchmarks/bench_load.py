"""Load + validate + compile generated tool files, against libyaml parsing the same files.

Goals (issue 33 item 5), side by side in one run (interleaved repeats, medians), at 10,000 tool files:
a cold `Runtime.load` takes at most 1.3x the time libyaml alone needs to read and parse the files, a
cold `validate` (which also checks examples, lint and five spec formats) at most 2x, and the memory
the loaded runtime holds per tool (what it keeps for its next reload included, tracemalloc) at most
2x what the parsed YAML documents hold. Wall and CPU time are both reported (the CPU ratios are the
steadier ones on a shared machine).

Each build is timed twice in the same rounds: as a library user gets it (the cyclic collector runs),
and as the `toolrt` command and `toolrt serve` run it, which opt in to pausing the collector during a
build (`toolrt.config.collect.pause_collector_during_builds`). The validate goal is read on the
command's row, since `validate` is what `toolrt validate` runs; the load goal on the library's row,
since `Runtime.load` is the Python API and a host that does not opt in gets that time (serve's
opted-in load is reported beside it).

    python benchmarks/bench_load.py [--tools 10000] [--repeats 7]
    python benchmarks/bench_load.py --tools 1000 --repeats 3   # a quick look
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from _timing import own_data_home

from toolrt.api import Runtime
from toolrt.config.collect import pause_collector_during_builds
from toolrt.faces.project_checks import validate

GOAL_LOAD = 1.3
GOAL_VALIDATE = 2.0
GOAL_MEMORY = 2.0

TOOL = """\
id: tool_{i}
title: "Fetch {{{{ name }}}}"
description: |
  Look up record {i} by name and return it as JSON. Use it when the user names a record;
  do not use it to list records. Example: {{"name": "alpha", "limit": 5}}
parameters:
  type: object
  properties:
    name: {{type: string, minLength: 1, description: "Record name"}}
    limit: {{type: integer, minimum: 1, maximum: 100, default: 10}}
    verbose: {{type: boolean}}
  required: [name]
  additionalProperties: false
handler:
  argv: [echo, "{{{{ name }}}}", "{{{{ limit }}}}"]
permission:
  key: lookup
  patterns: ["{{{{ name }}}}"]
annotations: {{read_only: true}}
examples:
  valid: [{{name: alpha}}]
  invalid: [{{limit: 3}}]
"""


def make_project(base: Path, count: int) -> Path:
    tools = base / "tools.d"
    tools.mkdir(parents=True)
    (base / "toolrt.yaml").write_text("builtin_tools: false\n")
    for i in range(count):
        (tools / f"tool_{i:04d}.yaml").write_text(TOOL.format(i=i))
    return base


def libyaml_parse(files: list[Path]) -> None:
    loader = yaml.CSafeLoader
    for file in files:
        yaml.load(file.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - CSafeLoader is the safe loader


def toolrt_load(root: Path) -> None:
    rt = Runtime.load(root)  # a new Runtime: cold (only the installed built-in layer is shared)
    assert len(rt.snapshot.tools) == len(list((root / "tools.d").iterdir()))


def toolrt_validate(root: Path) -> None:
    report = validate(root)
    assert not report.errors, report.errors[:3]


def as_the_command(run: Callable[[], None]) -> Callable[[], None]:
    """`run` with builds pausing the collector, as the `toolrt` command and `toolrt serve` opt in to."""

    def opted_in() -> None:
        previous = pause_collector_during_builds(True)
        try:
            run()
        finally:
            pause_collector_during_builds(previous)

    return opted_in


def parsed_memory_per_tool(files: list[Path]) -> float:
    """Bytes the parsed YAML documents hold per file (libyaml's loader; the file texts not kept)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    loader = yaml.CSafeLoader
    documents = [yaml.load(file.read_text(encoding="utf-8"), Loader=loader) for file in files]  # noqa: S506
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(documents) == len(files)
    return held / len(files)


def memory_per_tool(root: Path, tools: int) -> float:
    """Bytes the loaded runtime holds per tool (the parse's garbage excluded: measured after the build)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    rt = Runtime.load(root)  # what it keeps for its next reload included
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert rt.snapshot.tools
    return held / tools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = make_project(Path(temp), options.tools)
        files = sorted((root / "tools.d").glob("*.yaml"))
        toolrt_validate(root)  # warm imports
        runs: tuple[tuple[str, Callable[[], None]], ...] = (
            ("libyaml", lambda: libyaml_parse(files)),
            ("load", lambda: toolrt_load(root)),
            ("validate_library", lambda: toolrt_validate(root)),
            ("load_command", as_the_command(lambda: toolrt_load(root))),
            ("validate", as_the_command(lambda: toolrt_validate(root))),
        )
        timings: dict[str, list[float]] = {name: [] for name, _ in runs}
        cpu: dict[str, list[float]] = {name: [] for name, _ in runs}
        for _ in range(options.repeats):
            for name, run in runs:
                start, start_cpu = time.perf_counter(), time.process_time()
                run()
                timings[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
        per_tool = memory_per_tool(root, options.tools)
        parsed_per_tool = parsed_memory_per_tool(files)
    row = {"tools": options.tools, **{f"{k}_ms": statistics.median(v) * 1000 for k, v in timings.items()}}
    row.update({f"{k}_cpu_ms": statistics.median(v) * 1000 for k, v in cpu.items()})
    for name in timings:
        if name != "libyaml":
            row[f"{name}_ratio"] = row[f"{name}_ms"] / row["libyaml_ms"]
            # CPU time as well: on a shared machine the wall-clock ratios carry the other processes' noise.
            row[f"{name}_cpu_ratio"] = row[f"{name}_cpu_ms"] / row["libyaml_cpu_ms"]
    row["bytes_per_tool"] = per_tool
    row["parsed_bytes_per_tool"] = parsed_per_tool
    row["memory_ratio"] = per_tool / parsed_per_tool
    goals = {"load": GOAL_LOAD, "validate": GOAL_VALIDATE, "memory": GOAL_MEMORY}
    row["goals"] = goals
    row["met"] = {
        "load": row["load_ratio"] <= GOAL_LOAD,
        "validate": row["validate_ratio"] <= GOAL_VALIDATE,
        "memory": row["memory_ratio"] <= GOAL_MEMORY,
    }
    print(f"{'what':48s} {'wall':>12s} {'cpu':>12s}")
    for label, key in (
        (f"libyaml: read + parse {options.tools} files", "libyaml"),
        ("toolrt: Runtime.load (cold), library", "load"),
        ("toolrt: Runtime.load (cold), as serve runs it", "load_command"),
        ("toolrt: validate (cold), library", "validate_library"),
        ("toolrt: validate (cold), as the command runs it", "validate"),
    ):
        print(f"{label:48s} {row[key + '_ms']:9.1f} ms {row[key + '_cpu_ms']:9.1f} ms")
    for label, key in (
        (f"  load ratio, library (goal <= {GOAL_LOAD})", "load"),
        ("  load ratio, as serve runs it", "load_command"),
        ("  validate ratio, library", "validate_library"),
        (f"  validate ratio, the command (goal <= {GOAL_VALIDATE})", "validate"),
    ):
        print(f"{label:48s} {row[key + '_ratio']:12.2f} {row[key + '_cpu_ratio']:12.2f}")
    print(f"{'memory held per tool (kept for reloads included)':48s} {per_tool / 1024:9.1f} KiB")
    print(f"{'memory of the parsed YAML per tool (libyaml)':48s} {parsed_per_tool / 1024:9.1f} KiB")
    print(f"{f'  memory ratio (goal <= {GOAL_MEMORY})':48s} {row['memory_ratio']:12.2f}")
    print(json.dumps({"bench": "load", **row}))


if __name__ == "__main__":
    with own_data_home():
        main()
