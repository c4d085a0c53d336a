"""Scripted fakes of the OpenAI, Anthropic and Gemini HTTP APIs on 127.0.0.1, for the official SDKs.

A `FakeProvider` answers each POST with the next scripted reply (a JSON body, or a list of
server-sent events) and checks every request body against the SDK's own request types through
pydantic `TypeAdapter`: a tool-result message the real API would refuse fails the test.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import ConfigDict, TypeAdapter

Validator = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Stream:
    """A streamed reply: (event name or None, data) pairs; `done` adds OpenAI's `data: [DONE]`."""

    events: Sequence[tuple[str | None, Mapping[str, Any]]]
    done: bool = False


Reply = Mapping[str, Any] | Stream


def _force(value: Any) -> Any:
    """Consume pydantic's lazy iterators (`Iterable[...]` fields) so every nested item is validated."""
    if isinstance(value, Mapping):
        return {k: _force(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_force(v) for v in value]
    if hasattr(value, "__next__"):
        return [_force(v) for v in value]
    return value


@cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    forbid = ConfigDict(extra="forbid")
    if kind == "openai":
        from openai.types.chat import ChatCompletionMessageParam

        return TypeAdapter(ChatCompletionMessageParam, config=forbid)
    if kind == "openai-responses":
        from openai.types.responses import ResponseInputItemParam

        return TypeAdapter(ResponseInputItemParam, config=forbid)
    if kind == "anthropic":
        from anthropic.types import MessageParam

        return TypeAdapter(MessageParam, config=forbid)
    from google.genai import types

    return TypeAdapter(types.Content)


def validate_body(kind: str, body: Mapping[str, Any]) -> None:
    """Raise `pydantic.ValidationError` when one message of `body` is not a valid request item for `kind`."""
    key = {"openai": "messages", "openai-responses": "input", "anthropic": "messages", "gemini": "contents"}[kind]
    entries = body.get(key)
    assert isinstance(entries, list), f"{key} is not a list: {entries!r}"
    adapter = _adapter(kind)
    for entry in entries:
        if kind == "gemini":
            adapter.validate_json(json.dumps(entry))  # camelCase and base64 bytes, as on the wire
        else:
            _force(adapter.validate_python(entry))


@dataclass
class FakeProvider:
    """One scripted API: `url` is its base URL; `requests` the (path, body) pairs it received."""

    kind: str
    replies: list[Reply]
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    url: str = ""

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        self.requests.append((path, body))
        try:
            validate_body(self.kind, body)
        except Exception as error:  # reported by the test, and as a 400 to the SDK
            self.problems.append(f"{path}: {error}")
            return {"error": {"message": str(error), "type": "invalid_request_error"}}
        if not self.replies:
            self.problems.append(f"{path}: no scripted reply left")
            return {"error": {"message": "no scripted reply left", "type": "invalid_request_error"}}
        return self.replies.pop(0)


def _handler(provider: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            reply = provider.answer(self.path, body)
            if isinstance(reply, Stream):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for name, data in reply.events:
                    event = f"event: {name}\n" if name else ""
                    self.wfile.write(f"{event}data: {json.dumps(data)}\n\n".encode())
                if reply.done:
                    self.wfile.write(b"data: [DONE]\n\n")
                return
            status = 400 if "error" in reply else 200
            payload = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def serve(provider: FakeProvider) -> Iterator[FakeProvider]:
    """Run `provider` on 127.0.0.1 (a free port) for the duration of a `with`/fixture."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(provider))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    provider.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- replies in each API's response shape ---------------------------------------------------------


def chat_completion(*, text: str | None = None, calls: Sequence[tuple[str, str, str]] = ()) -> dict[str, Any]:
    """A `ChatCompletion` with `calls` as (id, name, arguments JSON text)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
    }


def chat_stream(*, text: str = "", calls: Sequence[tuple[str, str, str]] = (), pieces: int = 3) -> Stream:
    """The same turn as `ChatCompletion` chunks: text in words, each call's arguments in `pieces` parts."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "fake",
            "choices": [choice],
        }

    events: list[tuple[str | None, Mapping[str, Any]]] = [(None, chunk({"role": "assistant", "content": ""}))]
    for word in text.split(" ") if text else ():
        events.append((None, chunk({"content": word + " "})))
    for index, (call_id, name, arguments) in enumerate(calls):
        start = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        events.append((None, chunk({"tool_calls": [start]})))
        size = max(1, -(-len(arguments) // pieces))
        for offset in range(0, len(arguments), size):
            piece = {"index": index, "function": {"arguments": arguments[offset : offset + size]}}
            events.append((None, chunk({"tool_calls": [piece]})))
    events.append((None, chunk({}, "tool_calls" if calls else "stop")))
    return Stream(events, done=True)


def response(*, text: str | None = None, calls: Sequence[tuple[str, str, str]] = ()) -> dict[str, Any]:
    """An OpenAI `Response` whose output holds a message (text) and `function_call` items."""
    output: list[dict[str, Any]] = []
    if text:
        content = [{"type": "output_text", "text": text, "annotations": []}]
        output.append(
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": content}
        )
    for call_id, name, arguments in calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{call_id}",
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
                "status": "completed",
            }
        )
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "fake",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def message(*, text: str | None = None, calls: Sequence[tuple[str, str, Any]] = ()) -> dict[str, Any]:
    """An Anthropic `Message` with a text block and `tool_use` blocks (id, name, input object)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "fake",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def message_stream(*, text: str = "", calls: Sequence[tuple[str, str, str]] = (), pieces: int = 3) -> Stream:
    """The same turn as Messages stream events; each call's input JSON text in `pieces` deltas."""
    start = message()
    events: list[tuple[str | None, Mapping[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    index = 0
    if text:
        text_block: dict[str, Any] = {"type": "text", "text": ""}
        events.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": text_block}))
        for word in text.split(" "):
            delta = {"type": "text_delta", "text": word + " "}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for call_id, name, arguments in calls:
        block: dict[str, Any] = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        size = max(1, -(-len(arguments) // pieces))
        for offset in range(0, len(arguments), size):
            delta = {"type": "input_json_delta", "partial_json": arguments[offset : offset + size]}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    stop = {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None}
    events.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 1}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return Stream(events)


def generate_content(*, text: str | None = None, calls: Sequence[tuple[str, str, Any]] = ()) -> dict[str, Any]:
    """A Gemini `GenerateContentResponse` (wire shape, camelCase) with text and `functionCall` parts."""
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    for call_id, name, args in calls:
        call: dict[str, Any] = {"name": name, "args": args}
        if call_id:
            call["id"] = call_id
        parts.append({"functionCall": call})
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}]}
