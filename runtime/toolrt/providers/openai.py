"""OpenAI Chat Completions: tool calls out of a `ChatCompletion` (or a stream of chunks), results back in.

```python
calls = tool_calls(completion)                 # ChatCompletion, its message, or the same as dicts
messages += result_messages(zip(calls, results))
```
Tool messages take only text, so images and PDFs follow in one user message after the tool
messages, each introduced by the call it came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .fields import field, items, text_field
from .media import MB, Media, MediaBudget, MediaLimits
from .model import ToolCall
from .results import Pair, result_text

__all__ = ["FORMAT", "LIMITS", "StreamAccumulator", "result_messages", "tool_calls"]

FORMAT = "openai"
LIMITS = MediaLimits(
    provider="OpenAI Chat Completions",
    images=frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"}),
    documents=frozenset({"application/pdf"}),
    max_image_bytes=50 * MB,
    max_document_bytes=50 * MB,
    max_request_bytes=50 * MB,
    max_images=500,
)


def _message(response: Any) -> Any:
    """The assistant message of a completion (its first choice), or `response` when it is one."""
    choices = items(field(response, "choices"))
    if choices:
        return field(choices[0], "message")
    return response


def _call(raw: Any) -> ToolCall:
    function = field(raw, "function") or field(raw, "custom")
    arguments = field(function, "arguments")
    if arguments is None:
        arguments = field(function, "input")
    return ToolCall(id=text_field(raw, "id"), name=text_field(function, "name"), arguments=arguments)


def tool_calls(response: Any) -> list[ToolCall]:
    """The calls of the turn in order; `[]` when the model answered without tools."""
    return [_call(raw) for raw in items(field(_message(response), "tool_calls"))]


def _media_part(media: Media) -> dict[str, Any]:
    if media.is_image:
        return {"type": "image_url", "image_url": {"url": media.data_url}}
    return {"type": "file", "file": {"file_data": media.data_url, "filename": media.filename}}


def result_messages(pairs: Iterable[Pair]) -> list[dict[str, Any]]:
    """One `{"role": "tool", "tool_call_id", "content"}` per call, then a user message with the attachments."""
    budget = MediaBudget(LIMITS)
    messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for call, result in pairs:
        sent, notes = budget.take(result.attachments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result_text(result, notes)})
        for media in sent:
            parts.append({"type": "text", "text": f"{media.filename}, from the {call.name} call {call.id}:"})
            parts.append(_media_part(media))
    if parts:
        messages.append({"role": "user", "content": parts})
    return messages


@dataclass
class _Partial:
    id: str = ""
    name: str = ""
    arguments: str = ""


class StreamAccumulator:
    """Turns `ChatCompletionChunk`s into complete `ToolCall`s as each one finishes.

    `feed(chunk)` returns the calls the chunk completed: a call is complete when the next one
    starts or the choice finishes. `message()` is the assistant message to append to the history.
    """

    def __init__(self) -> None:
        self.text = ""
        self.finish_reason: str | None = None
        self.calls: list[ToolCall] = []
        self._open: dict[int, _Partial] = {}

    def feed(self, chunk: Any) -> list[ToolCall]:
        done: list[ToolCall] = []
        for choice in items(field(chunk, "choices")):
            if (field(choice, "index") or 0) != 0:
                continue  # n > 1: the first choice is the conversation
            delta = field(choice, "delta")
            self.text += text_field(delta, "content")
            for raw in items(field(delta, "tool_calls")):
                index = field(raw, "index")
                index = index if isinstance(index, int) else len(self.calls) + len(self._open)
                if index not in self._open:
                    done += self._close(before=index)
                    self._open[index] = _Partial()
                partial = self._open[index]
                partial.id = partial.id or text_field(raw, "id")
                function = field(raw, "function")
                partial.name += text_field(function, "name")
                partial.arguments += text_field(function, "arguments")
            reason = field(choice, "finish_reason")
            if reason is not None:
                self.finish_reason = str(reason)
                done += self._close()
        return done

    def finish(self) -> list[ToolCall]:
        """Calls still open when the stream ended without a finish reason (a cut connection)."""
        return self._close()

    def _close(self, before: int | None = None) -> list[ToolCall]:
        """Complete the open calls (those with a lower index than `before`, when given), in index order."""
        done = []
        for index in sorted(i for i in self._open if before is None or i < before):
            partial = self._open.pop(index)
            done.append(ToolCall(partial.id, partial.name, partial.arguments))
        self.calls += done
        return done

    def message(self) -> dict[str, Any]:
        """The assistant message the stream amounted to, in Chat Completions request shape."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.calls
            ]
        return message
