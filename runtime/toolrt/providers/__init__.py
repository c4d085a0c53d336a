"""From a model's response back to the next request, one module per spec format.

Each module (`openai`, `openai_responses`, `anthropic`, `gemini`) has:
- `tool_calls(response) -> list[ToolCall]`: the calls of one turn, from the SDK object or the same
  data as plain dicts (no SDK is imported);
- `result_messages(pairs) -> list[dict]`: what to append to the next request, in that provider's
  request shape, with its error flag and attachments where it accepts them;
- `StreamAccumulator`: streamed events in, complete `ToolCall`s out as each call finishes.

`Runtime.run_tool_calls(format, response)` puts the three together with the call pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..errors import UsageError
from . import anthropic, gemini, openai, openai_responses
from .media import Media, MediaBudget, MediaLimits
from .model import ToolCall
from .results import Pair, result_text

__all__ = [
    "FORMATS",
    "Adapter",
    "Media",
    "MediaBudget",
    "MediaLimits",
    "Pair",
    "ToolCall",
    "adapter",
    "anthropic",
    "gemini",
    "openai",
    "openai_responses",
    "result_text",
]


class Adapter(Protocol):
    """What every provider module offers (the modules themselves implement it)."""

    FORMAT: str
    LIMITS: MediaLimits

    def tool_calls(self, response: Any) -> list[ToolCall]: ...

    def result_messages(self, pairs: Iterable[Pair]) -> list[dict[str, Any]]: ...


_ADAPTERS: dict[str, Adapter] = {m.FORMAT: m for m in (openai, openai_responses, anthropic, gemini)}
FORMATS: tuple[str, ...] = tuple(_ADAPTERS)
"""The spec formats a model answers in (every one of `toolrt.specs.FORMATS` but `mcp`)."""


def adapter(format: str) -> Adapter:
    """The module for `format`.

    Raises:
        UsageError: `format` is not one of `FORMATS`.
    """
    found = _ADAPTERS.get(format)
    if found is None:
        raise UsageError(f"unknown provider format {format!r}; expected one of: {', '.join(FORMATS)}")
    return found
