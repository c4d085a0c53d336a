"""Anthropic Messages: `tool_use` blocks out of a `Message` (or its stream events), `tool_result` blocks back in.

```python
calls = tool_calls(message)                    # Message, or the same as a dict
messages.append({"role": "assistant", "content": message.content})
messages += result_messages(zip(calls, results))   # one user message holding every tool_result
```
A `tool_result` takes text, image and document blocks, so attachments travel inside it;
`is_error` is set on every failed call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .fields import field, items, plain, text_field
from .media import MB, Media, MediaBudget, MediaLimits
from .model import ToolCall
from .results import Pair, result_text

__all__ = ["FORMAT", "LIMITS", "StreamAccumulator", "result_messages", "tool_calls"]

FORMAT = "anthropic"
LIMITS = MediaLimits(
    provider="Anthropic",
    images=frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"}),
    documents=frozenset({"application/pdf"}),
    max_image_bytes=5 * MB,
    max_document_bytes=32 * MB,
    max_request_bytes=32 * MB,
    max_images=100,
)


def _call(block: Any) -> ToolCall:
    return ToolCall(id=text_field(block, "id"), name=text_field(block, "name"), arguments=field(block, "input"))


def tool_calls(response: Any) -> list[ToolCall]:
    """The `tool_use` blocks of the turn in order; `[]` when there are none."""
    content = response if isinstance(response, (list, tuple)) else field(response, "content")
    return [_call(block) for block in items(content) if field(block, "type") == "tool_use"]


def _media_block(media: Media) -> dict[str, Any]:
    source = {"type": "base64", "media_type": media.mime, "data": media.encoded}
    if media.is_image:
        return {"type": "image", "source": source}
    return {"type": "document", "source": source, "title": media.filename}


def result_messages(pairs: Iterable[Pair]) -> list[dict[str, Any]]:
    """One user message with a `tool_result` block per call; `[]` when there are no calls."""
    budget = MediaBudget(LIMITS)
    blocks: list[dict[str, Any]] = []
    for call, result in pairs:
        sent, notes = budget.take(result.attachments)
        text = result_text(result, notes)
        content: Any = text
        if sent:
            content = [{"type": "text", "text": text}, *(_media_block(m) for m in sent)]
        blocks.append(
            {"type": "tool_result", "tool_use_id": call.id, "content": content, "is_error": result.error is not None}
        )
    return [{"role": "user", "content": blocks}] if blocks else []


class StreamAccumulator:
    """Turns Messages stream events into complete `ToolCall`s as each `tool_use` block stops.

    Takes the raw events (`content_block_start`, `content_block_delta` with `input_json_delta`,
    `content_block_stop`, ...) from `client.messages.create(stream=True)` or from
    `client.messages.stream()`, whose extra events are ignored. `content` holds the finished blocks
    (plain data) for the assistant message; `message()` is that message.
    """

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.content: list[dict[str, Any]] = []
        self.stop_reason: str | None = None
        self._open: dict[int, tuple[dict[str, Any], list[str]]] = {}

    @property
    def text(self) -> str:
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    def feed(self, event: Any) -> list[ToolCall]:
        kind = field(event, "type")
        index = field(event, "index")
        if kind == "content_block_start" and isinstance(index, int):
            block = plain(field(event, "content_block"))
            if isinstance(block, dict):
                self._open[index] = (block, [])
        elif kind == "content_block_delta" and index in self._open:
            block, pieces = self._open[index]
            delta = field(event, "delta")
            delta_kind = field(delta, "type")
            if delta_kind == "input_json_delta":
                pieces.append(text_field(delta, "partial_json"))
            elif delta_kind == "text_delta":
                block["text"] = str(block.get("text", "")) + text_field(delta, "text")
            elif delta_kind == "thinking_delta":
                block["thinking"] = str(block.get("thinking", "")) + text_field(delta, "thinking")
            elif delta_kind == "signature_delta":
                block["signature"] = text_field(delta, "signature")
        elif kind == "content_block_stop" and index in self._open:
            return self._stop(index)
        elif kind == "message_delta":
            reason = field(field(event, "delta"), "stop_reason")
            self.stop_reason = str(reason) if reason is not None else self.stop_reason
        return []

    def _stop(self, index: int) -> list[ToolCall]:
        block, pieces = self._open.pop(index)
        self.content.append(block)
        if block.get("type") != "tool_use":
            return []
        call = _call(block)
        if pieces:
            text = "".join(pieces)
            try:
                block["input"] = json.loads(text) if text.strip() else {}
                call = _call(block)
            except json.JSONDecodeError:
                # The argument step tells the model its text is not JSON; the history keeps an object.
                block["input"] = {}
                call = ToolCall(call.id, call.name, text)
        self.calls.append(call)
        return [call]

    def message(self) -> dict[str, Any]:
        """The assistant message the stream amounted to, in Messages request shape."""
        return {"role": "assistant", "content": list(self.content)}
