"""Start-up of the `toolrt` command against `python -c "import mcp"`, process start to exit, side by side.

Goals (issue 33 item 5), wall time as ratios to `python -c "import mcp"` in the same environment,
medians of the repeats, every command of a round run before the next round starts:

- `toolrt validate` on a fresh `toolrt init` project: <= 0.3x
- `toolrt --help`: <= 0.15x

Bytecode caches are warmed first (a user's install has them; PYTHONDONTWRITEBYTECODE is dropped).
The commands run as a fresh user: no TOOLRT_ variable, empty XDG data and config directories; one
more row runs `validate` with TOOLRT_DATA_DIR set (the environment layer imports pydantic-settings).
`python -c pass` is measured alongside for the interpreter's own share, CPU time (user + system, of
the child) beside wall time, and the sum of `python -X importtime`'s self column (what the imports
cost) for both commands. `--against TREE` measures a second source tree (its `runtime/` first on
PYTHONPATH, e.g. a worktree of main) in the same rounds, so a change is shown before/after in one run.

    python benchmarks/bench_startup.py [--repeats 7]
    python benchmarks/bench_startup.py --against /work/wt/main-base
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOALS = {"toolrt validate": 0.3, "toolrt --help": 0.15}
ANCHOR = 'python -c "import mcp"'
ENV_ROW = "toolrt validate, TOOLRT_DATA_DIR set"


def _run(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of one run; it must succeed."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {child.returncode} in {cwd}")
    return wall, usage.ru_utime + usage.ru_stime


def _import_ms(argv: list[str], cwd: str, env: dict[str, str]) -> float:
    """The sum of `python -X importtime`'s self column for one run, in ms."""
    run = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return sum(int(m) for m in re.findall(r"^import time:\s+(\d+) \|", run.stderr, re.MULTILINE)) / 1000


def _env(tree: str | None, home: Path) -> dict[str, str]:
    """A fresh user's environment: no TOOLRT_ variable, empty data and config directories."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("TOOLRT_")}
    env.update(XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"))
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(tree, "runtime")), *filter(None, [env.get("PYTHONPATH")])])
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--against", metavar="TREE", help="a second source tree, measured in the same rounds")
    options = parser.parse_args()
    trees = {"this": None} if options.against is None else {"this": str(HERE.parent), "against": options.against}
    commands = {
        ANCHOR: [sys.executable, "-c", "import mcp"],
        "python -c pass": [sys.executable, "-c", "pass"],
        "toolrt --help": [sys.executable, "-m", "toolrt", "--help"],
        "toolrt validate": [sys.executable, "-m", "toolrt", "validate"],
    }
    with tempfile.TemporaryDirectory() as temp:
        runs: list[tuple[str, str, list[str], str, dict[str, str]]] = []
        for tree_name, tree in trees.items():
            project = Path(temp, tree_name)
            project.mkdir()
            env = _env(tree, Path(temp, f"{tree_name}-home"))
            init = [sys.executable, "-m", "toolrt", "init"]
            subprocess.run(init, cwd=project, env=env, check=True, capture_output=True)
            for name, argv in commands.items():
                if tree_name == "this" or name.startswith("toolrt"):
                    runs.append((tree_name, name, argv, str(project), env))
            # context: a setting in the environment brings pydantic-settings in (no goal of its own)
            with_variable = {**env, "TOOLRT_DATA_DIR": str(Path(temp, f"{tree_name}-data"))}
            runs.append((tree_name, ENV_ROW, commands["toolrt validate"], str(project), with_variable))
        for _, _, argv, cwd, env in runs:  # warm the bytecode caches and the file system
            _run(argv, cwd, env)
        wall: dict[tuple[str, str], list[float]] = {(t, n): [] for t, n, *_ in runs}
        cpu: dict[tuple[str, str], list[float]] = {(t, n): [] for t, n, *_ in runs}
        for _ in range(options.repeats):
            for tree_name, name, argv, cwd, env in runs:
                seconds, cpu_seconds = _run(argv, cwd, env)
                wall[tree_name, name].append(seconds * 1000)
                cpu[tree_name, name].append(cpu_seconds * 1000)
        imports = {
            (t, n): statistics.median(_import_ms(argv, cwd, env) for _ in range(5))
            for t, n, argv, cwd, env in runs
            if n.startswith("toolrt")
        }
    anchor, anchor_cpu = statistics.median(wall["this", ANCHOR]), statistics.median(cpu["this", ANCHOR])
    result: dict[str, object] = {"bench": "startup", "anchor": ANCHOR, "anchor_ms": anchor, "anchor_cpu_ms": anchor_cpu}
    print(
        f"{'command (fresh init project), tree':48s} {'wall ms':>9s} {'cpu ms':>9s} {'x anchor':>9s} "
        f"{'cpu x':>7s} {'goal':>6s} {'imports ms':>11s}"
    )
    for tree_name, name, *_ in runs:
        ms, cpu_ms = statistics.median(wall[tree_name, name]), statistics.median(cpu[tree_name, name])
        ratio, goal = ms / anchor, GOALS.get(name)
        label = name if options.against is None else f"{name} [{tree_name}]"
        met = "" if goal is None else f"<={goal}" + (" ok" if ratio <= goal else " NO")
        imported = f"{imports[tree_name, name]:11.0f}" if (tree_name, name) in imports else ""
        print(f"{label:48s} {ms:9.0f} {cpu_ms:9.0f} {ratio:9.3f} {cpu_ms / anchor_cpu:7.3f} {met:>6s} {imported}")
        key = name if tree_name == "this" else f"{name} [{tree_name}]"
        entry: dict[str, object] = {"wall_ms": ms, "cpu_ms": cpu_ms, "ratio": ratio, "cpu_ratio": cpu_ms / anchor_cpu}
        if goal is not None:
            entry.update(goal=goal, met=ratio <= goal)
        if (tree_name, name) in imports:
            entry["importtime_ms"] = imports[tree_name, name]
        result[key] = entry
    print(json.dumps(result))


if __name__ == "__main__":
    main()
