"""A tool call as a provider's response gave it, before repair, parsing or validation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["StreamAccumulator", "ToolCall"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call out of a model's turn, exactly as sent: the pipeline repairs and validates it later."""

    id: str
    """The provider's id for the call (`tool_call_id`, `call_id`, `tool_use_id`, Gemini's optional `id`);
    `""` when the response gave none."""
    name: str
    """The tool name as the model wrote it; `""` when absent."""
    arguments: Any
    """As sent: JSON text (OpenAI's formats), an object (Anthropic, Gemini), None when absent, or
    whatever malformed value the response held (the argument step turns it into a message)."""


@runtime_checkable
class StreamAccumulator(Protocol):
    """What every provider module's `StreamAccumulator` does: streamed events in, complete calls out.

    Each also rebuilds the assistant turn for the history in its provider's shape (`message()` for Chat
    Completions and Anthropic, `items` for Responses, `content()` for Gemini).
    """

    calls: list[ToolCall]
    """Every call completed so far, in the order the stream finished them."""

    def feed(self, event: Any) -> list[ToolCall]:
        """Take one streamed event (or chunk); the calls it completed."""
        ...
