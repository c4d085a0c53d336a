"""An agent loop on the OpenAI Responses API with the tools of the project in the current directory.

pip install 'toolrt[openai]'
OPENAI_API_KEY=... python openai_responses.py "Which tools does this project define?"
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import openai

from toolrt import CallScope, Runtime


async def main(prompt: str) -> None:
    rt = Runtime.load(".")
    model = os.environ.get("MODEL", "gpt-5")
    scope = CallScope(model=model, provider="openai", session="example")  # the same for specs and calls
    client = openai.AsyncOpenAI()
    tools: Any = rt.specs("openai-responses", scope)
    items: list[Any] = [{"role": "user", "content": prompt}]
    while True:
        response = await client.responses.create(model=model, input=items, tools=tools)
        items += response.output  # the model's items, function calls included, go back in as input
        results = await rt.run_tool_calls("openai-responses", response, scope)
        if not results:
            print(response.output_text)
            return
        items += results


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "List the files of this project."))
