"""An agent loop on OpenAI Chat Completions, streamed, with the tools of the project in the current directory.

    pip install 'toolrt[openai]'
    OPENAI_API_KEY=... python openai_chat.py "What do the tests in this project cover?"

Any OpenAI-compatible endpoint works: set OPENAI_BASE_URL (and MODEL).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import openai

from toolrt import CallScope, Runtime
from toolrt.providers.openai import StreamAccumulator


async def main(prompt: str) -> None:
    rt = Runtime.load(".")
    model = os.environ.get("MODEL", "gpt-5")
    scope = CallScope(model=model, provider="openai", session="example")  # the same for specs and calls
    client = openai.AsyncOpenAI()  # OPENAI_API_KEY and OPENAI_BASE_URL from the environment
    tools: Any = rt.specs("openai", scope)
    messages: list[Any] = [{"role": "user", "content": prompt}]
    while True:
        turn = StreamAccumulator()
        stream = await client.chat.completions.create(model=model, messages=messages, tools=tools, stream=True)
        async for chunk in stream:
            shown = len(turn.text)
            for call in turn.feed(chunk):  # each call as soon as its arguments are complete
                print(f"\n[{call.name} {call.arguments}]", flush=True)
            print(turn.text[shown:], end="", flush=True)
        messages.append(turn.message())
        # No asker here: whatever the rules put at "ask" is refused, and the model is told why.
        results = await rt.run_tool_calls("openai", turn.calls, scope)
        if not results:
            print()
            return
        messages += results


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "List the files of this project."))
