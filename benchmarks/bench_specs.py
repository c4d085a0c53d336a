"""Spec compilation speed: every fixture schema × every format (`python benchmarks/bench_specs.py`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolrt.specs import FORMATS, compile_spec  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "schemas"
ROUNDS = 200


def main() -> None:
    schemas = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(FIXTURES.glob("*.json"))}
    results: dict[str, float] = {}
    for fmt in FORMATS:
        started = time.perf_counter()
        for _ in range(ROUNDS):
            for schema in schemas.values():
                compile_spec(fmt, name="bench", description="Benchmark tool.", parameters=schema)
        results[fmt] = (time.perf_counter() - started) / (ROUNDS * len(schemas)) * 1e6
    print(f"{'format':<18}{'µs per tool (mean over ' + str(len(schemas)) + ' schemas)':>40}")
    for fmt, micros in results.items():
        print(f"{fmt:<18}{micros:>40.1f}")
    print(json.dumps({"bench": "specs", "unit": "us_per_tool", "schemas": len(schemas), **results}))


if __name__ == "__main__":
    main()
