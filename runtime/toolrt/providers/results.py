"""The text of a tool result as every provider's tool-result message carries it."""

from __future__ import annotations

from collections.abc import Sequence

from ..result import ToolResult
from .model import ToolCall

__all__ = ["Pair", "result_text"]

Pair = tuple[ToolCall, ToolResult]
"""A call and its result, in the order the model made the calls."""

NO_OUTPUT = "(no output)"
"""Some providers reject an empty tool result; the model reads this instead."""


def result_text(result: ToolResult, notes: Sequence[str] = ()) -> str:
    """The error text of a failed call, else its output; notes about attachments left out follow."""
    text = result.error if result.error is not None else result.output
    if notes:
        text = "\n\n".join([text, *notes]) if text else "\n".join(notes)
    return text or NO_OUTPUT
