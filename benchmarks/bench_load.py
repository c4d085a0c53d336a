"""Load + validate + compile 1,000 generated tool files, against libyaml parsing the same files.

Goal (issue 2): toolrt's cold build of the snapshot takes at most twice the time libyaml alone needs to
read and parse the files, measured side by side in one run (interleaved repeats, medians).

    python benchmarks/bench_load.py [--tools 1000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolrt import snapshot  # noqa: E402
from toolrt.config import layers  # noqa: E402

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


def toolrt_build(root: Path) -> None:
    # A cold build: forget what earlier builds parsed and compiled.
    layers._TOOL_FILES.clear()
    layers._SINGLE_FILES.clear()
    snapshot._COMPILED.clear()
    snapshot._PERMISSIONS.clear()
    built = snapshot.build_snapshot(root)
    assert len(built.tools) >= 1000 or len(built.tools) == len(list((root / "tools.d").iterdir()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = make_project(Path(temp), options.tools)
        files = sorted((root / "tools.d").glob("*.yaml"))
        toolrt_build(root)  # warm imports
        ours: list[float] = []
        base: list[float] = []
        for _ in range(options.repeats):
            start = time.perf_counter()
            libyaml_parse(files)
            base.append(time.perf_counter() - start)
            start = time.perf_counter()
            toolrt_build(root)
            ours.append(time.perf_counter() - start)
    row = {
        "tools": options.tools,
        "libyaml_ms": statistics.median(base) * 1000,
        "toolrt_ms": statistics.median(ours) * 1000,
    }
    row["ratio"] = row["toolrt_ms"] / row["libyaml_ms"]
    print(f"{'what':44s} {'median ms':>10s}")
    print(f"{'libyaml: read + parse ' + str(options.tools) + ' files':44s} {row['libyaml_ms']:10.1f}")
    print(f"{'toolrt: load + validate + compile (cold)':44s} {row['toolrt_ms']:10.1f}")
    print(f"{'ratio (goal <= 2.0)':44s} {row['ratio']:10.2f}")
    print(json.dumps({"bench": "load", **row}))


if __name__ == "__main__":
    main()
