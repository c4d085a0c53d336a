"""The official SDKs against scripted fakes of each provider's API on 127.0.0.1.

One model turn with seven tool calls (two that must run at once, a text read, an image read, a
denied read, bad arguments, an unknown tool) goes through `Runtime.run_tool_calls`; the fake checks
every request body the SDK sends against the SDK's own request types, and the tests check what the
model reads back: texts, error flags and the image.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_providers import (
    FakeProvider,
    chat_completion,
    chat_stream,
    generate_content,
    message,
    message_stream,
    response,
    serve,
)
from provider_project import PIXEL_PNG, json_calls, make_provider_project, object_calls

from toolrt.api import Runtime
from toolrt.providers import anthropic as anthropic_adapter
from toolrt.providers import openai as openai_adapter

PIXEL_B64 = base64.b64encode(PIXEL_PNG).decode()


@contextmanager
def fake(kind: str, *replies: Any) -> Iterator[FakeProvider]:
    provider = FakeProvider(kind, list(replies))
    yield from serve(provider)
    assert provider.problems == []


@pytest.fixture
def rt(tmp_path: Path) -> Runtime:
    return Runtime.load(make_provider_project(tmp_path / "project"))


def check_texts(texts: dict[str, str], errors: dict[str, bool] | None = None) -> None:
    """What the model reads for each call of the scripted turn (and the error flag, where the provider has one)."""
    assert texts["call_meet_a"] == "met a"
    assert texts["call_meet_b"] == "met b"
    assert "remember the milk" in texts["call_notes"]
    assert texts["call_pixel"] == "Image read successfully"
    assert "Denied:" in texts["call_secret"] and "secret.txt" in texts["call_secret"]
    assert "The read tool was called with invalid arguments" in texts["call_bad"]
    assert "Model tried to call unavailable tool 'fly'" in texts["call_fly"]
    if errors is not None:
        assert errors == {
            "call_meet_a": False,
            "call_meet_b": False,
            "call_notes": False,
            "call_pixel": False,
            "call_secret": True,
            "call_bad": True,
            "call_fly": True,
        }


def specs(rt: Runtime, format: str) -> Any:
    """The specs as the SDKs' parameter types see them (plain JSON data, typed as `Any`)."""
    return rt.specs(format)


def run(rt: Runtime, format: str, turn: Any) -> list[dict[str, Any]]:
    return anyio.run(lambda: rt.run_tool_calls(format, turn, session=format))


def test_openai_chat_completions(rt: Runtime) -> None:
    import openai

    with fake("openai", chat_completion(calls=json_calls()), chat_completion(text="done")) as provider:
        client = openai.OpenAI(base_url=provider.url, api_key="test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "go"}]
        first = client.chat.completions.create(model="fake", messages=messages, tools=specs(rt, "openai"))
        messages.append(first.choices[0].message)
        messages += run(rt, "openai", first)
        final = client.chat.completions.create(model="fake", messages=messages, tools=specs(rt, "openai"))
    assert final.choices[0].message.content == "done"
    sent = provider.requests[1][1]["messages"]
    tools = [m for m in sent if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == [c[0] for c in json_calls()]  # call order
    check_texts({m["tool_call_id"]: m["content"] for m in tools})
    assert sent[-1]["role"] == "user"  # tool messages take text only: the image follows them
    assert sent[-1]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL_B64}"}}


def test_openai_chat_completions_stream(rt: Runtime) -> None:
    import openai

    turn = chat_stream(text="Let me look.", calls=json_calls())
    with fake("openai", turn, chat_completion(text="done")) as provider:
        client = openai.OpenAI(base_url=provider.url, api_key="test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "go"}]
        accumulator = openai_adapter.StreamAccumulator()
        finished = []
        for chunk in client.chat.completions.create(model="fake", messages=messages, stream=True):
            finished.append([c.id for c in accumulator.feed(chunk)])
        messages.append(accumulator.message())
        messages += run(rt, "openai", accumulator.calls)
        client.chat.completions.create(model="fake", messages=messages)
    assert accumulator.text == "Let me look. "
    assert [ids for ids in finished if ids][0] == ["call_meet_a"]  # complete when the next call starts
    tools = [m for m in provider.requests[1][1]["messages"] if m["role"] == "tool"]
    check_texts({m["tool_call_id"]: m["content"] for m in tools})


def test_openai_responses(rt: Runtime) -> None:
    import openai

    with fake("openai-responses", response(calls=json_calls()), response(text="done")) as provider:
        client = openai.OpenAI(base_url=provider.url, api_key="test", max_retries=0)
        items: list[Any] = [{"role": "user", "content": "go"}]
        first = client.responses.create(model="fake", input=items, tools=specs(rt, "openai-responses"))
        items += first.output
        items += run(rt, "openai-responses", first)
        final = client.responses.create(model="fake", input=items)
    assert final.output_text == "done"
    outputs = [i for i in provider.requests[1][1]["input"] if i.get("type") == "function_call_output"]
    texts = {o["call_id"]: o["output"] if isinstance(o["output"], str) else o["output"][0]["text"] for o in outputs}
    check_texts(texts)
    pixel = next(o for o in outputs if o["call_id"] == "call_pixel")
    assert pixel["output"][1] == {"type": "input_image", "image_url": f"data:image/png;base64,{PIXEL_B64}"}


def _anthropic_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [b for b in last["content"] if b["type"] == "tool_result"]


def _anthropic_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else content[0]["text"]


def test_anthropic_messages(rt: Runtime) -> None:
    import anthropic

    with fake("anthropic", message(text="Looking.", calls=object_calls()), message(text="done")) as provider:
        client = anthropic.Anthropic(base_url=provider.url, api_key="test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "go"}]
        first = client.messages.create(model="fake", max_tokens=100, messages=messages, tools=specs(rt, "anthropic"))
        messages.append({"role": "assistant", "content": first.content})
        messages += run(rt, "anthropic", first)
        final = client.messages.create(model="fake", max_tokens=100, messages=messages)
    assert final.content[0].type == "text" and final.content[0].text == "done"
    results = _anthropic_results(provider.requests[1][1])
    check_texts(
        {b["tool_use_id"]: _anthropic_text(b) for b in results}, {b["tool_use_id"]: b["is_error"] for b in results}
    )
    pixel = next(b for b in results if b["tool_use_id"] == "call_pixel")
    assert pixel["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PIXEL_B64},
    }


def test_anthropic_messages_stream(rt: Runtime) -> None:
    import anthropic

    turn = message_stream(text="Looking now.", calls=json_calls(bad='{"filePath": 5}'))
    with fake("anthropic", turn, message(text="done")) as provider:
        client = anthropic.Anthropic(base_url=provider.url, api_key="test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "go"}]
        accumulator = anthropic_adapter.StreamAccumulator()
        with client.messages.stream(model="fake", max_tokens=100, messages=messages) as stream:
            for event in stream:
                accumulator.feed(event)
        messages.append(accumulator.message())
        messages += run(rt, "anthropic", accumulator.calls)
        client.messages.create(model="fake", max_tokens=100, messages=messages)
    assert accumulator.text == "Looking now. "
    assert accumulator.stop_reason == "tool_use"
    results = _anthropic_results(provider.requests[1][1])
    check_texts(
        {b["tool_use_id"]: _anthropic_text(b) for b in results}, {b["tool_use_id"]: b["is_error"] for b in results}
    )


def test_gemini(rt: Runtime) -> None:
    from google import genai
    from google.genai import types

    with fake("gemini", generate_content(calls=object_calls()), generate_content(text="done")) as provider:
        client = genai.Client(api_key="test", http_options=types.HttpOptions(base_url=provider.url))
        config = types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=specs(rt, "gemini"))],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        contents: list[Any] = [types.Content(role="user", parts=[types.Part(text="go")])]
        first = client.models.generate_content(model="fake", contents=contents, config=config)
        assert first.candidates and first.candidates[0].content
        contents.append(first.candidates[0].content)
        contents += run(rt, "gemini", first)
        final = client.models.generate_content(model="fake", contents=contents, config=config)
    assert final.text == "done"
    last = provider.requests[1][1]["contents"][-1]
    assert last["role"] == "user"
    responses = [p["functionResponse"] for p in last["parts"]]
    texts = {r["id"]: r["response"].get("output", r["response"].get("error")) for r in responses}
    check_texts(texts, {r["id"]: "error" in r["response"] for r in responses})
    pixel = next(r for r in responses if r["id"] == "call_pixel")
    # The SDK sends a function response's own parts as given; the API reads both spellings (proto JSON).
    blob = pixel["parts"][0].get("inlineData") or pixel["parts"][0]["inline_data"]
    assert blob.get("mimeType", blob.get("mime_type")) == "image/png"
    assert base64.urlsafe_b64decode(blob["data"]) == PIXEL_PNG  # the SDK writes bytes URL-safe
