"""An agent loop on Gemini (google-genai) with the tools of the project in the current directory.

pip install 'toolrt[gemini]'
GEMINI_API_KEY=... python gemini.py "Where is the permission logic?"
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from google import genai
from google.genai import types

from toolrt import CallScope, Runtime


async def main(prompt: str) -> None:
    rt = Runtime.load(".")
    model = os.environ.get("MODEL", "gemini-2.5-flash")
    scope = CallScope(model=model, provider="google", session="example")  # the same for specs and calls
    client = genai.Client()  # GEMINI_API_KEY from the environment
    declarations: Any = rt.specs("gemini", scope)
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=declarations)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),  # toolrt runs the calls
    )
    contents: list[Any] = [types.Content(role="user", parts=[types.Part(text=prompt)])]
    while True:
        response = await client.aio.models.generate_content(model=model, contents=contents, config=config)
        if response.candidates and response.candidates[0].content:
            contents.append(response.candidates[0].content)  # keeps the model's thought signatures
        results = await rt.run_tool_calls("gemini", response, scope)
        if not results:
            print(response.text)
            return
        contents += results


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "List the files of this project."))
