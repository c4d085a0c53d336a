"""Provider adapters, measured side by side in one run.

1. One model turn of 8 calls to a trivial async `parallel: true` Python tool:
   `rt.run_tool_calls("openai", completion)` (find the calls, run them, build the tool messages)
   against `rt.call_many(...)` on the same calls already extracted (what a host would do by hand).
   Goal: ratio <= 1.1 (the adapters cost nothing next to the calls).
2. The adapters alone on that turn, per format: `tool_calls` + `result_messages`, on plain dicts and
   on the official SDK's parsed objects (when the SDK is installed).

Usage: python benchmarks/bench_providers.py [--turns N] [--repeats R]
Prints a table, then one JSON line with every number.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _timing import interleaved_medians, own_data_home, print_table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolrt.api import Runtime
from toolrt.providers import FORMATS, ToolCall, adapter
from toolrt.result import ToolResult

CALLS = 8
HANDLER = """
async def echo(args, ctx):
    return args["text"]
"""
ECHO_TOOL = """
id: echo
description: Echo the text back.
parameters: {type: object, properties: {text: {type: string}}, required: [text]}
handler: {python: "bench_handlers:echo"}
parallel: true
"""


def make_project(base: Path) -> Path:
    root = base / "project"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "echo.yaml").write_text(ECHO_TOOL)
    (root / "bench_handlers.py").write_text(HANDLER)
    (root / "toolrt.yaml").write_text(f"builtin_tools: false\ndefaults:\n  data_dir: {base / 'data'}\n")
    return root


def completion(turn: int) -> dict[str, Any]:
    calls = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "echo", "arguments": json.dumps({"text": f"t{turn}.{i}"})},
        }
        for i in range(CALLS)
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}


def responses_for(format: str) -> dict[str, Any]:
    """One turn of CALLS calls in each format's response shape (plain dicts)."""
    args = [{"text": f"t{i}"} for i in range(CALLS)]
    if format == "openai":
        return completion(0)
    if format == "openai-responses":
        output = [
            {"type": "function_call", "id": f"fc{i}", "call_id": f"c{i}", "name": "echo", "arguments": json.dumps(a)}
            for i, a in enumerate(args)
        ]
        return {"id": "r", "object": "response", "created_at": 0, "model": "m", "status": "completed", "output": output}
    if format == "anthropic":
        content = [{"type": "tool_use", "id": f"c{i}", "name": "echo", "input": a} for i, a in enumerate(args)]
        return {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": content,
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    parts = [{"functionCall": {"id": f"c{i}", "name": "echo", "args": a}} for i, a in enumerate(args)]
    return {"candidates": [{"content": {"role": "model", "parts": parts}}]}


def sdk_object(format: str, data: dict[str, Any]) -> Any:
    try:
        if format == "openai":
            from openai.types.chat import ChatCompletion

            return ChatCompletion.model_validate(data)
        if format == "openai-responses":
            from openai.types.responses import Response

            return Response.model_construct(**data)
        if format == "anthropic":
            from anthropic.types import Message

            return Message.model_validate(data)
        from google.genai import types

        return types.GenerateContentResponse.model_validate(data)
    except ImportError:
        return None


async def turn_side_by_side(rt: Runtime, turns: int, repeats: int) -> dict[str, float]:
    async def ours(turn: int) -> object:
        messages = await rt.run_tool_calls("openai", completion(turn), session=f"s{turn}")
        assert messages[-1]["content"] == f"t{turn}.{CALLS - 1}", messages
        return messages

    async def by_hand(turn: int) -> object:
        data = completion(turn)
        calls = [
            (c["function"]["name"], c["function"]["arguments"]) for c in data["choices"][0]["message"]["tool_calls"]
        ]
        results = await rt.call_many(calls, session=f"s{turn}")
        assert results[-1].output == f"t{turn}.{CALLS - 1}", results
        return results

    ours_median, hand_median = await interleaved_medians(ours, by_hand, turns, repeats)
    return {
        "run_tool_calls_us": ours_median * 1e6,
        "call_many_us": hand_median * 1e6,
        "ratio": ours_median / hand_median,
    }


def adapters_alone(repeats: int) -> dict[str, float]:
    numbers: dict[str, float] = {}
    results = [ToolResult("t", f"output {i}") for i in range(CALLS)]
    for format in FORMATS:
        module = adapter(format)
        data = responses_for(format)
        for kind, response in (("dict", data), ("sdk", sdk_object(format, data))):
            if response is None:
                continue
            calls: list[ToolCall] = module.tool_calls(response)
            assert len(calls) == CALLS, (format, kind, calls)
            loops = 2000
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(loops):
                    module.result_messages(zip(module.tool_calls(response), results, strict=True))
                samples.append((time.perf_counter() - start) / loops)
            numbers[f"{format}_{kind}_us"] = statistics.median(samples) * 1e6
    return numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns per timed loop")
    parser.add_argument("--repeats", type=int, default=7, help="timed loops per side (the median is reported)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime.load(make_project(Path(tmp)))
        turn = anyio.run(turn_side_by_side, rt, options.turns, options.repeats)
    alone = adapters_alone(options.repeats)
    rows = [
        (f"turn of {CALLS} calls: rt.run_tool_calls", f"{turn['run_tool_calls_us']:.0f} µs"),
        (f"turn of {CALLS} calls: rt.call_many by hand", f"{turn['call_many_us']:.0f} µs"),
        ("  ratio (goal <= 1.1)", f"{turn['ratio']:.2f}"),
    ]
    rows += [(f"adapters alone: {name.removesuffix('_us')}", f"{value:.1f} µs") for name, value in alone.items()]
    print_table(rows)
    print(json.dumps({"benchmark": "providers", "cpus": os.cpu_count(), **turn, **alone}))


if __name__ == "__main__":
    with own_data_home():
        main()
