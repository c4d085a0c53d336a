"""How fast the guards against hostile config and broken language servers give up (the tests assert only
that they do; a time bound in a test fails on a busy machine, so the goals live here).

    python benchmarks/bench_guards.py [--runs 5]

- a YAML alias bomb (10**9 strings once expanded, under 400 bytes) refused: goal <= 100 ms;
- a self-referencing alias refused, four shapes: goal <= 100 ms each;
- the bomb saved into a loaded project and reloaded (the last good snapshot kept): goal <= 2 s;
- a `$ref` bomb (2**30 nodes once inlined) compiled for gemini and mcp, bounded: goal <= 5 s;
- an edit next to a language server that exits at once, never answers, sends garbage or is not
  installed (`lsp.wait` 1 s): goal <= 5 s per edit.

Medians over the runs; prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _timing import own_data_home

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolrt import Runtime  # noqa: E402
from toolrt.config.loader import load_yaml_text  # noqa: E402
from toolrt.errors import ConfigError  # noqa: E402
from toolrt.specs import compile_spec  # noqa: E402

BOMB = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [
        f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [{','.join(['*' + chr(ord('a') + i - 1)] * 10)}]"
        for i in range(1, 9)
    ]
)
SELF_REFERENCES = ["&a [*a]", "a: &a {b: *a}", "&a {<<: *a}", "x: &x {y: [1, {z: *x}]}"]
GARBAGE = (
    "import sys, time\n"
    "sys.stdout.write('Content-Length: 9\\r\\n\\r\\n{not json')\n"
    "sys.stdout.write('Content-Length: 5\\r\\n\\r\\n[1,2]')\n"
    "sys.stdout.flush()\n"
    "time.sleep(60)\n"
)
BAD_SERVERS = {
    "exits at once": ["/bin/false"],
    "never answers": ["/bin/sleep", "60"],
    "sends garbage": [sys.executable, "-c", GARBAGE],
    "is not installed": ["/nonexistent/bin/pylsp"],
}


def _refused(text: str) -> None:
    try:
        load_yaml_text(text, path=Path("x.yaml"), display="tools.d/x.yaml")
    except ConfigError:
        return
    raise AssertionError("not refused")


def _reload_with_bomb() -> float:
    """Seconds of the reload that meets the bomb."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "toolrt.yaml").write_text("builtin_tools: true\n", encoding="utf-8")
        rt = Runtime.load(root)
        (root / "tools.d").mkdir()
        (root / "tools.d" / "bomb.yaml").write_text(BOMB + "\n", encoding="utf-8")
        started = time.perf_counter()
        status = rt.reload()
        seconds = time.perf_counter() - started
        assert status.last_error is not None and "aliases expand" in str(status.last_error)
        assert "read" in {spec["name"] for spec in rt.specs("mcp")}
        return seconds


def _laughs(levels: int) -> dict[str, Any]:
    """Each definition uses the next one twice: 2**levels nodes once inlined."""
    defs: dict[str, Any] = {f"D{levels}": {"type": "string"}}
    for i in range(levels):
        defs[f"D{i}"] = {
            "type": "object",
            "properties": {"a": {"$ref": f"#/$defs/D{i + 1}"}, "b": {"$ref": f"#/$defs/D{i + 1}"}},
        }
    return {"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": defs}


def _edits_beside(command: list[str]) -> float:
    """The slower of two edits (the second meets the server's back-off or its second start), in seconds."""
    settings = {
        "lsp.enabled": True,
        "lsp.wait": 1.0,
        "lsp.servers.pylsp.command": command,
        "lsp.servers.pyright.disabled": True,
    }
    with tempfile.TemporaryDirectory() as directory, Runtime.load(directory, settings=settings) as rt:
        slowest = 0.0
        for attempt in range(2):
            started = time.perf_counter()
            args = {"filePath": f"app{attempt}.py", "content": f"x = undefined_{attempt}\n"}
            result = rt.call_sync("write", args)
            slowest = max(slowest, time.perf_counter() - started)
            assert result.output == "Wrote file successfully.", result
        return slowest


def _median(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args(argv).runs
    rows: list[tuple[str, float, float]] = []  # (case, seconds, goal seconds)
    rows.append(("alias bomb refused", _median(lambda: _refused(BOMB), runs), 0.1))
    for text in SELF_REFERENCES:
        rows.append((f"self-reference {text!r} refused", _median(functools.partial(_refused, text), runs), 0.1))
    reloads = [_reload_with_bomb() for _ in range(runs)]
    rows.append(("bomb saved, reload keeps tools", statistics.median(reloads), 2.0))
    bomb = _laughs(30)
    for fmt in ("gemini", "mcp"):
        result = compile_spec(fmt, name="demo_tool", description="Demo.", parameters=bomb)
        # Gemini takes no $ref, so its compiler inlines them and stops the bomb; MCP passes $defs through.
        cut = any("grew past 1000 inlined references" in w.message for w in result.warnings)
        assert cut == (fmt == "gemini"), (fmt, [w.message for w in result.warnings][:3])
        compile_bomb = lambda fmt=fmt: compile_spec(fmt, name="demo_tool", description="Demo.", parameters=bomb)  # noqa: E731
        rows.append((f"$ref bomb compiled for {fmt}", _median(compile_bomb, runs), 5.0))
    for name, command in BAD_SERVERS.items():
        rows.append((f"edit beside a server that {name}", _edits_beside(command), 5.0))
    width = max(len(case) for case, _, _ in rows)
    print(f"{'case':<{width}}  {'ms':>10}  {'goal ms':>8}")
    failed = 0
    for case, seconds, goal in rows:
        verdict = "PASS" if seconds <= goal else "FAIL"
        failed += verdict == "FAIL"
        print(f"{case:<{width}}  {seconds * 1000:>10.1f}  {goal * 1000:>8.0f}  {verdict}")
    print(
        json.dumps(
            {
                "bench": "guards",
                "runs": runs,
                "results": [{"case": case, "ms": round(s * 1000, 2), "goal_ms": goal * 1000} for case, s, goal in rows],
                "failed": failed,
            }
        )
    )
    return 0


if __name__ == "__main__":
    with own_data_home():
        status = main(sys.argv[1:])
    sys.exit(status)
