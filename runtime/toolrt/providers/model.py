"""A tool call as a provider's response gave it, before repair, parsing or validation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolCall"]


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
