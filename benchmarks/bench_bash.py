"""Bash analysis vs tree-sitter's bare parse of the same command, measured side by side.

Run: `python benchmarks/bench_bash.py`. Prints two tables and one JSON line. The goals: analysing
`git commit -m "x" && git push origin main` costs at most 10x the bare parse (rounds alternate
between the two so that machine load affects both alike; the ratio is of the medians), and a
decision for any 100 KB hostile line (analysis, then both of the issue's rulesets) takes at most
100 ms: past its time budget the analysis stops and fails closed. Every hostile row also checks its
decision: never allow under the allow-list, and deny under the deny-list when it holds `rm`.
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

from toolrt.permissions.model import Action, CallSite
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
    "rm of 40k words": "rm -rf " + "a " * 40_000 + "build",
    "rm after 30k words": "echo " + "a " * 30_000 + "; rm -rf build",
    "rm past the nodes": "true;" * 12_000 + "rm -rf build",
}
RULESETS: dict[str, list[tuple[str, Action]]] = {
    "allow-list": [("*", "deny"), ("ls*", "allow"), ("echo *", "allow")],
    "deny-list": [("*", "allow"), ("rm *", "deny"), ("curl *", "deny")],
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


def decide_ms(command: str, site: CallSite, *, repeat: int = 5) -> tuple[float, dict[str, str]]:
    """Median milliseconds from the command text to a decision under both of the issue's rulesets,
    and the decision under each."""
    from toolrt.permissions.evaluate import decide
    from toolrt.permissions.model import Rule
    from toolrt.permissions.rules import Ruleset

    rulesets = {
        name: Ruleset([Rule("bash", pattern, action) for pattern, action in rules]) for name, rules in RULESETS.items()
    }
    samples = []
    actions: dict[str, str] = {}
    for _ in range(repeat):
        start = time.perf_counter()
        requests = analyze_command(command, site)
        actions = {name: decide(requests, ruleset, locked=Ruleset()).action for name, ruleset in rulesets.items()}
        samples.append((time.perf_counter() - start) * 1000)
    actions["seen"] = "partly" if any(request.opaque for request in requests) else "all"
    return statistics.median(samples), actions


def decision_ok(command: str, actions: dict[str, str]) -> bool:
    """Never allowed blindly: a line the analysis could not see all of is never allowed, and a line
    that runs `rm` is denied under the deny-list. (A line it saw all of gets what its rules say:
    `echo {,,,…` is a literal word, which the allow-list's `echo *` allows.)"""
    if actions["seen"] == "partly" and "allow" in (actions["allow-list"], actions["deny-list"]):
        return False
    return actions["deny-list"] == "deny" if "rm -rf" in command else True


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        site = CallSite(root=root, cwd=root, home=root.parent)
        rows = {name: measure(command, site) for name, command in COMMANDS.items()}
        hostile = {name: decide_ms(command, site) for name, command in HOSTILE.items()}
        checked = {name: decision_ok(HOSTILE[name], actions) for name, (_, actions) in hostile.items()}
    print(f"{'command':<26} {'parse µs':>10} {'analyze µs':>11} {'ratio':>7}")
    for name, (parsed, analysed) in rows.items():
        print(f"{name:<26} {parsed:>10.1f} {analysed:>11.1f} {analysed / parsed:>6.1f}x")
    parsed, analysed = rows["git commit && push"]
    ratio = analysed / parsed
    print(f"goal: analysis <= {GOAL:.0f}x bare parse for `{COMMANDS['git commit && push']}`: {ratio:.1f}x")
    header = f"{'decision ms':>12} {'seen':>7} {'allow-list':>11} {'deny-list':>10} {'ok':>4}"
    print(f"\n{'hostile line (~100 KB)':<26} {header}")
    for name, (elapsed, actions) in hostile.items():
        verdict = "yes" if checked[name] else "NO"
        row = f"{actions['seen']:>7} {actions['allow-list']:>11} {actions['deny-list']:>10} {verdict:>4}"
        print(f"{name:<26} {elapsed:>12.1f} {row}")
    worst = max(elapsed for elapsed, _ in hostile.values())
    print(f"goal: every decision <= {HOSTILE_GOAL_MS:.0f} ms: worst {worst:.1f} ms")
    print(f"goal: no hostile row allowed blindly, rm denied: {'met' if all(checked.values()) else 'NOT MET'}")
    print(
        json.dumps(
            {
                "benchmark": "bash_analysis",
                "command": COMMANDS["git commit && push"],
                "parse_us": round(parsed, 2),
                "analyze_us": round(analysed, 2),
                "ratio": round(ratio, 2),
                "goal": GOAL,
                "ok": ratio <= GOAL and worst <= HOSTILE_GOAL_MS and all(checked.values()),
                "hostile_ms": {name: round(elapsed, 1) for name, (elapsed, _) in hostile.items()},
                "hostile_decisions": {name: actions for name, (_, actions) in hostile.items()},
                "hostile_decisions_ok": all(checked.values()),
                "hostile_goal_ms": HOSTILE_GOAL_MS,
                "others": {name: {"parse_us": round(p, 2), "analyze_us": round(a, 2)} for name, (p, a) in rows.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
