"""Wall time of `toolrt validate` and `toolrt specs` on the default config, process start to exit.

Goal (issue 2): each starts and finishes in under 0.5 s. Bytecode caches are warmed first (a user's
install has them); a bare `python -c pass` is measured alongside for the interpreter's own share.

    python benchmarks/bench_startup.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _wall(argv: list[str], cwd: str, env: dict[str, str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "toolrt validate": [sys.executable, "-m", "toolrt", "validate"],
        "toolrt specs --format openai": [sys.executable, "-m", "toolrt", "specs", "--format", "openai"],
    }
    with tempfile.TemporaryDirectory() as project:
        env["TOOLRT_DATA_DIR"] = os.path.join(project, ".data")
        for argv in commands.values():  # warm the bytecode caches and the file system
            subprocess.run(argv, cwd=project, env=env, stdout=subprocess.DEVNULL, check=True)
        rows = {name: _wall(argv, project, env, options.repeats) * 1000 for name, argv in commands.items()}
    print(f"{'command (default config, empty project)':44s} {'median ms':>10s}")
    for name, ms in rows.items():
        print(f"{name:44s} {ms:10.0f}")
    print(f"{'goal: each toolrt command':44s} {'< 500':>10s}")
    print(json.dumps({"bench": "startup", "median_ms": rows}))


if __name__ == "__main__":
    main()
