"""Bash analysis vs tree-sitter's bare parse of the same lines, measured side by side.

Run: `python benchmarks/bench_bash.py`. Prints two tables and one JSON line. The goals (issue 26's
Show, issue 33 item 6): analysing an ordinary line costs at most 5x the bare parse of it, with every
line made unique per call (a counter in one of its words) so that no cache answers for either side;
rounds alternate between the two so that machine load affects both alike, times are the calling
thread's CPU time, and the ratio is of the medians. A decision for any 100 KB hostile line (analysis,
then the rulesets below) takes at most 100 ms: past its time budget the analysis stops and fails
closed. Every hostile row also checks its decision: never allowed under `bash: ask` nor under the
allow-list, and denied under the deny-list when it holds `rm`.
"""

from __future__ import annotations

import itertools
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
from toolrt.shell.listings import SETTLED_NS
from toolrt.shell.parser import parse

# Ordinary lines, `{i}` replaced by a counter so that each call analyses a line it never saw.
ORDINARY = {
    "git commit && push": 'git commit -m "x{i}" && git push origin main',
    "ls -la": "ls -la src{i}",
    "grep | head": "grep -rn TODO{i} src | head -20",
    "cd && pytest && cd ..": "cd src && python3 -m pytest -q -k t{i} && cd ..",
    "cat | wc": "cat README{i}.md | wc -l",
}
# Shown for context, not held to the goal: a wrapper chain, a nested script and a substitution; and
# twenty existing files named in one line (answered from one listing of their directory).
FILES = [f"f{n}.py" for n in range(20)]
CONTEXT = {
    "wrapped + substitution": "sudo -u root timeout 5 bash -lc 'rm -rf b{i}' && echo $(git rev-parse HEAD) > out",
    "git add 20 files": "git add " + " ".join(FILES) + " new{i}.py",
}
HEADLINE = "git commit && push"
GOAL = 5.0
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
    "ask": [("*", "ask")],
    "allow-list": [("*", "deny"), ("ls*", "allow"), ("echo *", "allow")],
    "deny-list": [("*", "allow"), ("rm *", "deny"), ("curl *", "deny")],
}


def per_call_us(function: Callable[[str], object], lines: list[str]) -> float:
    """CPU time of the calling thread per call of `function` over `lines`, in microseconds."""
    start = time.thread_time()
    for line in lines:
        function(line)
    return (time.thread_time() - start) / len(lines) * 1e6


def measure(template: str, site: CallSite, *, rounds: int = 15, loops: int = 400) -> tuple[float, float]:
    """Medians (µs) of the bare parse and of the analysis of `template`, each call on a new line."""
    counter = itertools.count()

    def fresh() -> list[str]:
        return [template.replace("{i}", str(next(counter))) for _ in range(loops)]

    per_call_us(lambda line: analyze_command(line, site), fresh())  # warm: tables, parser, caches
    parses: list[float] = []
    analyses: list[float] = []
    for _ in range(rounds):
        parses.append(per_call_us(lambda line: parse(line.encode()), fresh()))
        analyses.append(per_call_us(lambda line: analyze_command(line, site), fresh()))
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
    """Never allowed blindly: no line is allowed under `bash: ask` (a 50,000-word line asks), a line
    the analysis could not see all of is never allowed, and a line that runs `rm` is denied under the
    deny-list. (A line it saw all of gets what its rules say:
    `echo {,,,…` is a literal word, which the allow-list's `echo *` allows.)"""
    if actions["ask"] == "allow" or actions["allow-list"] == "allow" and actions["seen"] == "partly":
        return False
    if actions["seen"] == "partly" and actions["deny-list"] == "allow":
        return False
    return actions["deny-list"] == "deny" if "rm -rf" in command else True


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "src").mkdir()
        for name in FILES:
            (root / name).write_text("x = 1\n", encoding="utf-8")
        # A project whose root has not changed for a few seconds, as most are between calls: bare
        # names are answered from its listing (shell/listings.py); a root changed within the last
        # 2 s (its change time, which nothing can set back) is asked name by name instead. So wait.
        time.sleep(SETTLED_NS / 1e9 + 0.1)
        site = CallSite(root=root, cwd=root, home=root.parent)
        rows = {name: measure(template, site) for name, template in {**ORDINARY, **CONTEXT}.items()}
        hostile = {name: decide_ms(command, site) for name, command in HOSTILE.items()}
        checked = {name: decision_ok(HOSTILE[name], actions) for name, (_, actions) in hostile.items()}
    print(f"{'ordinary line (unique)':<26} {'parse µs':>10} {'analyze µs':>11} {'ratio':>7}")
    for name, (parsed, analysed) in rows.items():
        print(f"{name:<26} {parsed:>10.1f} {analysed:>11.1f} {analysed / parsed:>6.1f}x")
    ratios = {name: rows[name][1] / rows[name][0] for name in ORDINARY}
    worst_ordinary = max(ratios, key=ratios.__getitem__)
    worst_ratio = ratios[worst_ordinary]
    print(
        f"goal: analysis <= {GOAL:.0f}x bare parse on every ordinary line: worst {worst_ratio:.1f}x ({worst_ordinary})"
    )
    header = f"{'decision ms':>12} {'seen':>7} {'ask':>5} {'allow-list':>11} {'deny-list':>10} {'ok':>4}"
    print(f"\n{'hostile line (~100 KB)':<26} {header}")
    for name, (elapsed, actions) in hostile.items():
        verdict = "yes" if checked[name] else "NO"
        decisions = f"{actions['ask']:>5} {actions['allow-list']:>11} {actions['deny-list']:>10}"
        row = f"{actions['seen']:>7} {decisions} {verdict:>4}"
        print(f"{name:<26} {elapsed:>12.1f} {row}")
    worst = max(elapsed for elapsed, _ in hostile.values())
    print(f"goal: every decision <= {HOSTILE_GOAL_MS:.0f} ms: worst {worst:.1f} ms")
    print(f"goal: no hostile row allowed blindly, rm denied: {'met' if all(checked.values()) else 'NOT MET'}")
    parsed, analysed = rows[HEADLINE]
    print(
        json.dumps(
            {
                "benchmark": "bash_analysis",
                "command": ORDINARY[HEADLINE],
                "parse_us": round(parsed, 2),
                "analyze_us": round(analysed, 2),
                "ratio": round(analysed / parsed, 2),
                "worst_ratio": round(worst_ratio, 2),
                "goal": GOAL,
                "ok": max(ratios.values()) <= GOAL and worst <= HOSTILE_GOAL_MS and all(checked.values()),
                "hostile_ms": {name: round(elapsed, 1) for name, (elapsed, _) in hostile.items()},
                "hostile_decisions": {name: actions for name, (_, actions) in hostile.items()},
                "hostile_decisions_ok": all(checked.values()),
                "hostile_goal_ms": HOSTILE_GOAL_MS,
                "ordinary": {
                    name: {"parse_us": round(p, 2), "analyze_us": round(a, 2), "ratio": round(a / p, 2)}
                    for name, (p, a) in rows.items()
                },
            }
        )
    )


if __name__ == "__main__":
    main()
