"""Gemini (google-genai): `function_call` parts out of a `GenerateContentResponse`, `function_response` parts back in.

```python
calls = tool_calls(response)                   # GenerateContentResponse, a Content, or the same as dicts
contents.append(response.candidates[0].content)
contents += result_messages(zip(calls, results))   # one user Content holding every function_response
```
`response` is `{"output": text}` on success and `{"error": text}` on failure, as the API documents.
Images and PDFs go in the function response's own `parts` (multimodal function responses), as raw
bytes: the SDK base64-encodes them when it sends the request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .fields import field, items, plain, text_field
from .media import MB, Media, MediaBudget, MediaLimits
from .model import ToolCall
from .results import Pair, result_text

__all__ = ["FORMAT", "LIMITS", "StreamAccumulator", "result_messages", "tool_calls"]

FORMAT = "gemini"
LIMITS = MediaLimits(
    provider="Gemini",
    images=frozenset({"image/png", "image/jpeg", "image/webp"}),
    documents=frozenset({"application/pdf", "text/plain"}),
    max_image_bytes=20 * MB,
    max_document_bytes=20 * MB,
    max_request_bytes=20 * MB,
    max_images=3600,
)


def _parts(response: Any) -> Iterable[Any]:
    if isinstance(response, (list, tuple)):
        return response
    candidates = items(field(response, "candidates"))
    content = field(candidates[0], "content") if candidates else response
    return items(field(content, "parts"))


def _function_call(part: Any) -> Any:
    return field(part, "function_call", "functionCall")


def tool_calls(response: Any) -> list[ToolCall]:
    """The `function_call` parts of the turn's first candidate in order; `[]` when there are none."""
    calls = []
    for part in _parts(response):
        call = _function_call(part)
        if call is not None:
            calls.append(
                ToolCall(id=text_field(call, "id"), name=text_field(call, "name"), arguments=field(call, "args"))
            )
    return calls


def _media_part(media: Media) -> dict[str, Any]:
    return {"inline_data": {"mime_type": media.mime, "data": media.raw}}


def result_messages(pairs: Iterable[Pair]) -> list[dict[str, Any]]:
    """One user `Content` with a `function_response` part per call; `[]` when there are no calls."""
    budget = MediaBudget(LIMITS)
    parts: list[dict[str, Any]] = []
    for call, result in pairs:
        sent, notes = budget.take(result.attachments)
        text = result_text(result, notes)
        response: dict[str, Any] = {"name": call.name}
        if call.id:
            response["id"] = call.id
        response["response"] = {"error": text} if result.error is not None else {"output": text}
        if sent:
            response["parts"] = [_media_part(m) for m in sent]
        parts.append({"function_response": response})
    return [{"role": "user", "parts": parts}] if parts else []


class StreamAccumulator:
    """Collects the chunks of `generate_content_stream`: each `function_call` part arrives whole.

    `feed(chunk)` returns the calls in that chunk; `content()` is the model's turn (every part,
    thought signatures included, consecutive text joined) to append to the history.
    """

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.parts: list[dict[str, Any]] = []

    @property
    def text(self) -> str:
        return "".join(str(p.get("text", "")) for p in self.parts if not p.get("thought"))

    def feed(self, chunk: Any) -> list[ToolCall]:
        done = tool_calls(chunk)
        for part in _parts(chunk):
            data = plain(part)
            if not isinstance(data, dict):
                continue
            last = self.parts[-1] if self.parts else None
            if last is not None and set(data) == {"text"} and set(last) == {"text"}:
                last["text"] = str(last["text"]) + str(data["text"])
            else:
                self.parts.append(data)
        self.calls += done
        return done

    def content(self) -> dict[str, Any]:
        """The model's turn, in request shape."""
        return {"role": "model", "parts": list(self.parts)}
