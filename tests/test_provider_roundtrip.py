"""Property: for every built-in tool and every provider format, the arguments of a call survive the trip.

A response is built the way each provider sends a call of that tool (the name its spec gives, the
arguments as JSON text or as an object), parsed by the official SDK's response type, and read back
with the adapter's `tool_calls`, whole and as a stream cut into pieces; the arguments must come back
exactly as generated from the tool's declared schema.
"""

from __future__ import annotations

import json
import tempfile
from functools import cache
from typing import Any

import pytest
from fake_providers import chat_stream, message_stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_strategies import from_schema

from toolrt.api import Runtime
from toolrt.providers import FORMATS, adapter
from toolrt.providers import anthropic as anthropic_adapter
from toolrt.providers import openai as openai_adapter
from toolrt.specs import compile_spec
from toolrt.specs.core import thaw

pytestmark = pytest.mark.slow  # every call parsed by the provider SDKs' response types


@cache
def _builtin_tools() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every built-in tool: id → (description, declared parameter schema)."""
    rt = Runtime.load(tempfile.mkdtemp())  # an empty project: the built-in layer alone
    return {
        tool_id: (tool.description, thaw(tool.definition.parameters))
        for tool_id, tool in sorted(rt.snapshot.tools.items())
        if tool.definition.layer == "builtin"
    }


def _spec_name(format: str, spec: dict[str, Any]) -> str:
    return str(spec["function"]["name"] if format == "openai" else spec["name"])


@st.composite
def tool_call(draw: st.DrawFn, format: str) -> tuple[str, dict[str, Any]]:
    """(the name the spec offers, arguments valid against the declared schema) for a drawn built-in tool."""
    tools = _builtin_tools()
    tool_id = draw(st.sampled_from(sorted(tools)))
    description, parameters = tools[tool_id]
    spec = compile_spec(format, name=tool_id, description=description, parameters=parameters).spec
    arguments = draw(_arguments(tool_id))
    return _spec_name(format, spec), arguments


@cache
def _arguments(tool_id: str) -> st.SearchStrategy[Any]:
    return from_schema(_builtin_tools()[tool_id][1])  # every root is `type: object`: a dict


def _sdk_response(format: str, name: str, arguments: dict[str, Any]) -> Any:
    """The provider's wire JSON for one call, parsed by the SDK's own response type."""
    text = json.dumps(arguments)
    if format == "openai":
        from openai.types.chat import ChatCompletion

        call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": text}}
        choice = {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [call]}}
        return ChatCompletion.model_validate(
            {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
        )
    if format == "openai-responses":
        from openai.types.responses import ResponseFunctionToolCall

        item = {"type": "function_call", "id": "fc", "call_id": "c1", "name": name, "arguments": text}
        return [ResponseFunctionToolCall.model_validate(item)]
    if format == "anthropic":
        from anthropic.types import Message

        block = {"type": "tool_use", "id": "c1", "name": name, "input": json.loads(text)}
        return Message.model_validate(
            {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [block],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )
    from google.genai import types

    part = {"functionCall": {"id": "c1", "name": name, "args": json.loads(text)}}
    return types.GenerateContentResponse.model_validate(
        {"candidates": [{"content": {"role": "model", "parts": [part]}}]}
    )


def _decoded(arguments: Any) -> Any:
    return json.loads(arguments) if isinstance(arguments, str) else arguments


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@pytest.mark.parametrize("format", FORMATS)
def test_tool_calls_round_trip_the_arguments_of_every_builtin_tool(format: str) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(tool_call(format))
    def check(drawn: tuple[str, dict[str, Any]]) -> None:
        name, arguments = drawn
        [call] = adapter(format).tool_calls(_sdk_response(format, name, arguments))
        assert (call.id, call.name) == ("c1", name)
        assert _decoded(call.arguments) == arguments

    check()


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@pytest.mark.parametrize("format", ["openai", "anthropic"])
def test_streamed_calls_round_trip_the_arguments_of_every_builtin_tool(format: str) -> None:
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(tool_call(format), st.integers(min_value=1, max_value=7))
    def check(drawn: tuple[str, dict[str, Any]], pieces: int) -> None:
        name, arguments = drawn
        calls = [("c1", name, json.dumps(arguments)), ("c2", name, json.dumps(arguments))]
        if format == "openai":
            accumulator: Any = openai_adapter.StreamAccumulator()
            events = chat_stream(calls=calls, pieces=pieces).events
        else:
            accumulator = anthropic_adapter.StreamAccumulator()
            events = message_stream(calls=calls, pieces=pieces).events
        for _, event in events:
            accumulator.feed(event)
        assert [(c.id, c.name) for c in accumulator.calls] == [("c1", name), ("c2", name)]
        assert [_decoded(c.arguments) for c in accumulator.calls] == [arguments, arguments]

    check()
