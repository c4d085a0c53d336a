"""Per-request permission evaluation: the built-in default ruleset vs generated 10,000-rule rulesets.

Run: `python benchmarks/bench_permissions.py`. Prints a table, then one JSON line
(`{"benchmark": "permissions", "results": [...]}`) for tracking. The budget is 50 µs per request
against 10,000 rules.
"""

from __future__ import annotations

import json
import random
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolrt.config.document import Document  # noqa: E402
from toolrt.permissions.config import build_permission_config  # noqa: E402
from toolrt.permissions.evaluate import decide  # noqa: E402
from toolrt.permissions.model import Action, PermissionRequest, Rule  # noqa: E402
from toolrt.permissions.rules import Ruleset  # noqa: E402

BUDGET_US = 50.0
PROJECT = "/home/me/project"
ACTIONS: tuple[Action, ...] = ("allow", "ask", "deny")
WORDS = ["git", "npm", "cargo", "docker", "kubectl", "make", "python", "rm", "ls", "cat", "curl", "terraform"]


def default_ruleset() -> Ruleset:
    path = ROOT / "permissions.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    document = Document(path, data, {}, "permissions.yaml")
    config = build_permission_config(
        document,
        None,
        None,
        home=Path.home(),
        data_dir=Path("/tmp/toolrt"),
        truncation_dir=Path("/tmp/toolrt/out"),
        root=Path(PROJECT),
    )
    return config.ruleset("build")


def path_ruleset(size: int, rng: random.Random) -> Ruleset:
    """`read` rules in both forms (relative to the root and absolute), matched in both forms."""
    rules: list[Rule] = [Rule("read", "*", "allow")]
    while len(rules) < size:
        directory = f"dir{rng.randrange(5000)}/*"
        pattern = directory if rng.random() < 0.5 else f"{PROJECT}/{directory}"
        rules.append(Rule("read", pattern, rng.choice(ACTIONS)))
    return Ruleset(rules, root=PROJECT)


def spread_ruleset(size: int, rng: random.Random) -> Ruleset:
    """Rules over 500 permission keys (MCP-style tool ids), a few wildcard keys, mixed patterns."""
    rules: list[Rule] = [Rule("*", "*", "allow"), Rule("mcp_*", "*", "ask")]
    while len(rules) < size:
        key = f"mcp_server{rng.randrange(50)}_tool{rng.randrange(10)}"
        pattern = rng.choice(["*", f"/srv/data{rng.randrange(1000)}/*", f"{rng.choice(WORDS)} {rng.randrange(99)} *"])
        rules.append(Rule(key, pattern, rng.choice(ACTIONS)))
    return Ruleset(rules)


def one_key_ruleset(size: int, rng: random.Random) -> Ruleset:
    """The worst case for a key index: every rule is a `bash` rule (distinct command patterns)."""
    rules: list[Rule] = [Rule("bash", "*", "ask")]
    while len(rules) < size:
        word = rng.choice(WORDS)
        rules.append(Rule("bash", f"{word} sub{rng.randrange(100_000)} *", rng.choice(ACTIONS)))
    rules.append(Rule("bash", "rm -rf *", "deny"))
    return Ruleset(rules)


def measure(func: Callable[[], object], number: int = 20_000) -> float:
    """Best of five runs, in microseconds per call."""
    return min(timeit.repeat(func, number=number, repeat=5)) / number * 1e6


def main() -> None:
    rng = random.Random(7)
    empty = Ruleset()
    defaults = default_ruleset()
    spread = spread_ruleset(10_000, rng)
    one_key = one_key_ruleset(10_000, rng)
    paths = path_ruleset(10_000, rng)
    deep = [PermissionRequest("read", (f"{PROJECT}/dir42/sub/file.txt",))]
    read = [PermissionRequest("read", ("/home/me/project/src/app.py",))]
    env = [PermissionRequest("read", ("/home/me/project/.env.local",))]
    mcp = [PermissionRequest("mcp_server7_tool3", ("/srv/data42/report.csv",))]
    bash = [PermissionRequest("bash", ("git sub123 status", "rm -rf build", "ls -la"))]
    cases: list[tuple[str, int, Callable[[], object], int]] = [
        ("default: read src file", len(defaults), lambda: decide(read, defaults, locked=empty), 1),
        ("default: read .env.local", len(defaults), lambda: decide(env, defaults, locked=empty), 1),
        ("10k spread over 500 keys", len(spread), lambda: decide(mcp, spread, locked=empty), 1),
        ("10k bash rules, 3 commands", len(one_key), lambda: decide(bash, one_key, locked=empty), 3),
        ("10k read rules, both path forms", len(paths), lambda: decide(deep, paths, locked=empty), 1),
        ("10k spread: Ruleset.evaluate", len(spread), lambda: spread.evaluate("mcp_server7_tool3", "/srv/x/y"), 1),
    ]
    results = []
    print(f"{'case':32} {'rules':>7} {'patterns':>8} {'µs/call':>9} {'µs/pattern':>11} {'budget':>7}")
    for name, size, func, patterns in cases:
        per_call = measure(func)
        per_pattern = per_call / patterns
        ok = per_pattern < BUDGET_US
        print(f"{name:32} {size:>7} {patterns:>8} {per_call:>9.2f} {per_pattern:>11.2f} {'ok' if ok else 'OVER':>7}")
        results.append({"case": name, "rules": size, "patterns": patterns, "us_per_call": round(per_call, 3), "ok": ok})
    started = time.perf_counter()
    Ruleset(spread.rules + one_key.rules)
    build_ms = (time.perf_counter() - started) * 1e3
    print(f"building a {len(spread) + len(one_key)}-rule Ruleset (patterns already compiled): {build_ms:.1f} ms")
    print(
        json.dumps(
            {"benchmark": "permissions", "budget_us": BUDGET_US, "results": results, "build_20k_ms": round(build_ms, 1)}
        )
    )


if __name__ == "__main__":
    main()
