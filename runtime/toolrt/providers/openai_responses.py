"""OpenAI Responses: `function_call` items out of a `Response` (or its stream events), outputs back in.

```python
calls = tool_calls(response)                   # Response, its `output` list, or the same as dicts
input_items += response.output                 # the calls themselves, then
input_items += result_messages(zip(calls, results))
```
A `function_call_output` takes text, images and files, so attachments travel inside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from . import openai
from .fields import field, items, plain, text_field
from .media import Media, MediaBudget
from .model import ToolCall
from .results import Pair, result_text

__all__ = ["FORMAT", "LIMITS", "StreamAccumulator", "result_messages", "tool_calls"]

FORMAT = "openai-responses"
LIMITS = replace(openai.LIMITS, provider="OpenAI Responses")


def _call(item: Any) -> ToolCall:
    return ToolCall(id=text_field(item, "call_id"), name=text_field(item, "name"), arguments=field(item, "arguments"))


def tool_calls(response: Any) -> list[ToolCall]:
    """The `function_call` items of the turn in order; `[]` when there are none."""
    output = response if isinstance(response, (list, tuple)) else field(response, "output")
    return [_call(item) for item in items(output) if field(item, "type") == "function_call"]


def _media_item(media: Media) -> dict[str, Any]:
    if media.is_image:
        return {"type": "input_image", "image_url": media.data_url}
    return {"type": "input_file", "file_data": media.data_url, "filename": media.filename}


def result_messages(pairs: Iterable[Pair]) -> list[dict[str, Any]]:
    """One `{"type": "function_call_output", "call_id", "output"}` input item per call."""
    budget = MediaBudget(LIMITS)
    outputs: list[dict[str, Any]] = []
    for call, result in pairs:
        sent, notes = budget.take(result.attachments)
        text = result_text(result, notes)
        output: Any = text
        if sent:
            output = [{"type": "input_text", "text": text}, *(_media_item(m) for m in sent)]
        outputs.append({"type": "function_call_output", "call_id": call.id, "output": output})
    return outputs


class StreamAccumulator:
    """Turns Responses stream events into complete `ToolCall`s as each `function_call` item finishes.

    Arguments arrive as `response.function_call_arguments.delta` events; the item is complete at
    `response.output_item.done`. `items` are the finished output items (plain data) to append to
    the next request's input, as `response.output` would be.
    """

    def __init__(self) -> None:
        self.text = ""
        self.calls: list[ToolCall] = []
        self.items: list[dict[str, Any]] = []
        self._open: dict[str, dict[str, Any]] = {}
        self._done: set[str] = set()

    def feed(self, event: Any) -> list[ToolCall]:
        kind = field(event, "type")
        if kind == "response.output_text.delta":
            self.text += text_field(event, "delta")
        elif kind == "response.output_item.added":
            item = field(event, "item")
            if field(item, "type") == "function_call":
                self._open[text_field(item, "id") or text_field(item, "call_id")] = plain(item)
        elif kind == "response.function_call_arguments.delta":
            partial = self._open.get(text_field(event, "item_id"))
            if partial is not None:
                partial["arguments"] = str(partial.get("arguments") or "") + text_field(event, "delta")
        elif kind == "response.function_call_arguments.done":
            partial = self._open.get(text_field(event, "item_id"))
            if partial is not None and isinstance(field(event, "arguments"), str):
                partial["arguments"] = field(event, "arguments")
        elif kind == "response.output_item.done":
            item = plain(field(event, "item"))
            if isinstance(item, dict):
                return self._finish(item)
        elif kind == "response.completed":
            done: list[ToolCall] = []
            for item in items(field(field(event, "response"), "output")):
                done += self._finish(plain(item))
            return done
        return []

    def _finish(self, item: dict[str, Any]) -> list[ToolCall]:
        key = text_field(item, "id") or text_field(item, "call_id") or f"#{len(self.items)}"
        if key in self._done:
            return []
        self._done.add(key)
        partial = self._open.pop(key, None)
        if partial:
            item = {**partial, **item}
        self.items.append(item)
        if item.get("type") != "function_call":
            return []
        call = _call(item)
        self.calls.append(call)
        return [call]
