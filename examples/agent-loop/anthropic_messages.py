"""An agent loop on the Anthropic Messages API, streamed, with the tools of the project in the current directory.

pip install 'toolrt[anthropic]'
ANTHROPIC_API_KEY=... python anthropic_messages.py "Summarise README.md"
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import anthropic

from toolrt import CallScope, Runtime
from toolrt.providers.anthropic import StreamAccumulator


async def main(prompt: str) -> None:
    rt = Runtime.load(".")
    model = os.environ.get("MODEL", "claude-sonnet-4-5")
    scope = CallScope(model=model, provider="anthropic", session="example")  # the same for specs and calls
    client = anthropic.AsyncAnthropic()  # ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL) from the environment
    tools: Any = rt.specs("anthropic", scope)
    messages: list[Any] = [{"role": "user", "content": prompt}]
    while True:
        turn = StreamAccumulator()
        async with client.messages.stream(model=model, max_tokens=4096, messages=messages, tools=tools) as stream:
            async for event in stream:
                if event.type == "text":
                    print(event.text, end="", flush=True)
                for call in turn.feed(event):
                    print(f"\n[{call.name} {call.arguments}]", flush=True)
        messages.append(turn.message())
        results = await rt.run_tool_calls("anthropic", turn.calls, scope)
        if not results:
            print()
            return
        messages += results


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "List the files of this project."))
