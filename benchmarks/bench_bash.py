"""Bash analysis vs tree-sitter's bare parse of the same command, measured side by side.

Run: `python benchmarks/bench_bash.py`. Prints two tables and one JSON line. The goals: analysing
`git commit -m "x" && git push origin main` costs at most 10x the bare parse (rounds alternate
between the two so that machine load affects both alike; the ratio is of the medians), and a
decision for any 100 KB hostile line (analysis, then both of the issue's rulesets) takes at most
100 ms: past its time budget the analysis stops and fails closed.
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
HOSTILE_GOAL_MS = 100.0
_N = 99_000
HOSTILE = {
    "50k words": "echo " + "a " * (_N // 2),
    "brace commas": "echo {" + "," * (_N - 10),
    "brackets": "[[ " + "[" * (_N - 10) + " ]]",
    "subscripts": "[[ a" + "[a" * (_N // 2 - 10) + " ]]",
    "unclosed $(": "echo " + "$(" * (_N // 2 - 10),
    "3000 nested $(": "echo " + "$(" * 3000 + "x" + ")" * 3000,
    "backticks": "echo " + "`" * (_N - 10),
    "33k pipeline": "ls|" * (_N // 3 - 5) + "ls",
    "heredoc of $( )": "cat <<EOF\n" + "$(x)\n" * (_N // 5 - 10) + "EOF",
    "arithmetic": "echo $((" + "1+" * (_N // 2 - 10) + "1))",
    "globs": "ls " + "*?[" * (_N // 3 - 5),
    "parse error": "(((((" * (_N // 5 - 5),
    "cd chain": "cd a;" * (_N // 5 - 5),
}


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


def decide_ms(command: str, site: CallSite, *, repeat: int = 5) -> float:
    """Median milliseconds from the command text to a decision under both of the issue's rulesets."""
    from toolrt.permissions.evaluate import decide
    from toolrt.permissions.model import Rule
    from toolrt.permissions.rules import Ruleset

    rulesets = [
        Ruleset([Rule("bash", "*", "deny"), Rule("bash", "ls*", "allow"), Rule("bash", "echo *", "allow")]),
        Ruleset([Rule("bash", "*", "allow"), Rule("bash", "rm *", "deny"), Rule("bash", "curl *", "deny")]),
    ]
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        requests = analyze_command(command, site)
        for ruleset in rulesets:
            decide(requests, ruleset, locked=Ruleset())
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        site = CallSite(root=root, cwd=root, home=root.parent)
        rows = {name: measure(command, site) for name, command in COMMANDS.items()}
        hostile = {name: decide_ms(command, site) for name, command in HOSTILE.items()}
    print(f"{'command':<26} {'parse µs':>10} {'analyze µs':>11} {'ratio':>7}")
    for name, (parsed, analysed) in rows.items():
        print(f"{name:<26} {parsed:>10.1f} {analysed:>11.1f} {analysed / parsed:>6.1f}x")
    parsed, analysed = rows["git commit && push"]
    ratio = analysed / parsed
    print(f"goal: analysis <= {GOAL:.0f}x bare parse for `{COMMANDS['git commit && push']}`: {ratio:.1f}x")
    print(f"\n{'hostile line (~100 KB)':<26} {'decision ms':>12}")
    for name, elapsed in hostile.items():
        print(f"{name:<26} {elapsed:>12.1f}")
    worst = max(hostile.values())
    print(f"goal: every decision <= {HOSTILE_GOAL_MS:.0f} ms: worst {worst:.1f} ms")
    print(
        json.dumps(
            {
                "benchmark": "bash_analysis",
                "command": COMMANDS["git commit && push"],
                "parse_us": round(parsed, 2),
                "analyze_us": round(analysed, 2),
                "ratio": round(ratio, 2),
                "goal": GOAL,
                "ok": ratio <= GOAL and worst <= HOSTILE_GOAL_MS,
                "hostile_ms": {name: round(elapsed, 1) for name, elapsed in hostile.items()},
                "hostile_goal_ms": HOSTILE_GOAL_MS,
                "others": {name: {"parse_us": round(p, 2), "analyze_us": round(a, 2)} for name, (p, a) in rows.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
