"""Bash analysis vs tree-sitter's bare parse of the same command, measured side by side.

Run: `python benchmarks/bench_bash.py`. Prints a table and one JSON line. The goal is that analysing
`git commit -m "x" && git push origin main` costs at most 10x the bare parse. Rounds alternate
between the two so that machine load affects both alike; the ratio is of the medians.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolrt.permissions.model import CallSite
from toolrt.shell import analyze_command
from toolrt.shell.parser import parse

COMMANDS = {
    "git commit && push": 'git commit -m "x" && git push origin main',
    "ls -la": "ls -la",
    "wrapped + substitution": "sudo -u root timeout 5 bash -lc 'rm -rf build' && echo $(git rev-parse HEAD) > out.txt",
}
GOAL = 10.0


def per_call_us(function: Callable[[], object], loops: int) -> float:
    start = time.perf_counter()
    for _ in range(loops):
        function()
    return (time.perf_counter() - start) / loops * 1e6


def measure(command: str, site: CallSite, *, rounds: int = 15, loops: int = 2000) -> tuple[float, float]:
    source = command.encode()
    analyze_command(command, site)
    parses: list[float] = []
    analyses: list[float] = []
    for _ in range(rounds):
        parses.append(per_call_us(lambda: parse(source), loops))
        analyses.append(per_call_us(lambda: analyze_command(command, site), loops))
    return statistics.median(parses), statistics.median(analyses)


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        site = CallSite(root=root, cwd=root, home=root.parent)
        rows = {name: measure(command, site) for name, command in COMMANDS.items()}
    print(f"{'command':<26} {'parse µs':>10} {'analyze µs':>11} {'ratio':>7}")
    for name, (parsed, analysed) in rows.items():
        print(f"{name:<26} {parsed:>10.1f} {analysed:>11.1f} {analysed / parsed:>6.1f}x")
    parsed, analysed = rows["git commit && push"]
    ratio = analysed / parsed
    print(f"goal: analysis <= {GOAL:.0f}x bare parse for `{COMMANDS['git commit && push']}`: {ratio:.1f}x")
    print(
        json.dumps(
            {
                "benchmark": "bash_analysis",
                "command": COMMANDS["git commit && push"],
                "parse_us": round(parsed, 2),
                "analyze_us": round(analysed, 2),
                "ratio": round(ratio, 2),
                "goal": GOAL,
                "ok": ratio <= GOAL,
                "others": {name: {"parse_us": round(p, 2), "analyze_us": round(a, 2)} for name, (p, a) in rows.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
