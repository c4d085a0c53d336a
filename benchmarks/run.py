"""Run every benchmark in this directory, side by side in one go, and print their tables and JSON.

    python benchmarks/run.py            # all of them
    python benchmarks/run.py load call  # only bench_load.py and bench_call.py

Each benchmark prints its own table and, last, one JSON line; this runner collects those lines into
one JSON document at the end (`{"bench_name": {...}, ...}`), for reports and for comparing runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    wanted = set(argv)
    scripts = sorted(p for p in HERE.glob("bench_*.py") if not wanted or p.stem.removeprefix("bench_") in wanted)
    results: dict[str, object] = {}
    failed = []
    for script in scripts:
        print(f"\n== {script.name}", flush=True)
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
        lines = run.stdout.rstrip().splitlines()
        print("\n".join(line for line in lines if not line.startswith("{")))
        if run.returncode != 0:
            failed.append(script.name)
            print(run.stderr[-2000:], file=sys.stderr)
            continue
        for line in reversed(lines):
            if line.startswith("{"):
                results[script.stem] = json.loads(line)
                break
    print("\n" + json.dumps(results, indent=2))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
