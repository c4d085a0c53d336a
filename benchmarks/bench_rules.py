"""A call's cost against the size of the ruleset, measured side by side in one run.

The same awaiting Python tool through `Runtime.call` (audit on) in two projects whose only difference is
`permissions.yaml`: the base project's rules, and the same rules followed by N extra ones (default 1,000)
spread over `bash`, `read`, `edit`, `external_directory` and `webfetch`, deny and allow, literal and
wildcard, none of which matches the call. Loops are interleaved so machine drift hits both alike; the
ratio is of this thread's CPU time. Goal: <= 1.2 at 1,000 extra rules (rules are hashed and compiled
once per snapshot, never per call).

Usage: python benchmarks/bench_rules.py [--rules N] [--calls N] [--repeats R]
Prints a table, then one JSON line with every number.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_call import _interleaved, make_project

from toolrt.api import Runtime

GOAL_RATIO = 1.2

BASE_RULES = """\
permission:
  bash: ask
  edit: ask
  webfetch: ask
"""


def extra_rules(count: int, seed: int = 7) -> str:
    """The base rules, then `count` rules that match no call of the benchmark in five permissions, as YAML."""
    rng = random.Random(seed)
    permissions: dict[str, list[str]] = {
        "bash": ['"*": ask'],
        "edit": ['"*": ask'],
        "webfetch": ['"*": ask'],
        "read": [],
        "external_directory": [],
    }
    names = list(permissions)
    for index in range(count):
        permission = names[index % len(names)]
        pattern = {
            "bash": f"tool{index} {rng.choice(['*', '--flag *', 'sub'])}",
            "read": f"secrets{index}/{rng.choice(['*', '*.key', 'a.txt'])}",
            "edit": f"src/module{index}/*",
            "external_directory": f"/srv/data{index}/*",
            "webfetch": f"https://host{index}.example/*",
        }[permission]
        permissions[permission].append(f'"{pattern}": {rng.choice(["allow", "deny", "ask"])}')
    return "permission:\n" + "".join(
        f"  {permission}:\n" + "".join(f"    {line}\n" for line in lines) for permission, lines in permissions.items()
    )


def load(base: Path, name: str, rules: str) -> Runtime:
    root = make_project(base / name)
    (root / "permissions.yaml").write_text(rules, encoding="utf-8")
    data = base / name / "data"
    return Runtime.load(root, settings={"data_dir": data, "audit": base / name / "audit.jsonl"})


def caller(rt: Runtime) -> Callable[[], Awaitable[object]]:
    counter = iter(range(10**9))

    async def call() -> object:
        text = f"hi{next(counter) % 7}"  # varied: identical consecutive calls trip the doom-loop guard
        result = await rt.call("echo_await", {"text": text}, session="bench")
        assert result.output == text, result.error
        return result

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=1000, help="extra rules in the large project")
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed loop")
    parser.add_argument("--repeats", type=int, default=7, help="timed loops per side (the median is reported)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        small = load(base, "base", BASE_RULES)
        large = load(base, "large", extra_rules(options.rules))
        sizes = {name: len(rt.snapshot.permissions.ruleset(None)) for name, rt in (("base", small), ("large", large))}
        assert sizes["large"] - sizes["base"] == options.rules, sizes
        paths = {"base": caller(small), "large": caller(large)}
        medians = anyio.run(_interleaved, paths, options.calls, options.repeats)
    numbers = {
        "rules_base": sizes["base"],
        "rules_large": sizes["large"],
        "base_call_cpu_us": medians["base"][1] * 1e6,
        "large_call_cpu_us": medians["large"][1] * 1e6,
        "base_call_us": medians["base"][0] * 1e6,
        "large_call_us": medians["large"][0] * 1e6,
        "cpu_ratio": medians["large"][1] / medians["base"][1],
        "ratio": medians["large"][0] / medians["base"][0],
    }

    def per_call(name: str) -> str:
        return f"{numbers[f'{name}_call_us']:.1f} / {numbers[f'{name}_call_cpu_us']:.1f} µs"

    rows = [
        (f"rt.call, {sizes['base']} rules (wall / CPU)", per_call("base")),
        (f"rt.call, {sizes['large']} rules", per_call("large")),
        (f"  ratio (goal <= {GOAL_RATIO:g})", f"{numbers['ratio']:.2f} / {numbers['cpu_ratio']:.2f}"),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value:>22}")
    print(json.dumps({"benchmark": "rules", "cpus": os.cpu_count(), "extra_rules": options.rules, **numbers}))


if __name__ == "__main__":
    main()
