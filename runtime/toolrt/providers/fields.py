"""Reading provider responses by duck typing: SDK objects and plain dicts alike, snake or camel case.

The adapters never import an SDK: a field is read as a mapping key or as an attribute, so
`openai.types.chat.ChatCompletion`, `anthropic.types.Message`, google-genai's
`GenerateContentResponse` and the same data as parsed JSON all work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["field", "items", "plain", "text_field"]


def field(obj: Any, *names: str) -> Any:
    """The first of `names` that `obj` holds (key or attribute) and that is not None; else None."""
    if obj is None:
        return None
    for name in names:
        value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
        if value is not None:
            return value
    return None


def items(value: Any) -> Sequence[Any]:
    """`value` when it is a list or tuple, else an empty tuple (a malformed field reads as empty)."""
    return value if isinstance(value, (list, tuple)) else ()


def text_field(obj: Any, *names: str) -> str:
    """A string field, `""` when absent or not a string."""
    value = field(obj, *names)
    return value if isinstance(value, str) else ""


def plain(obj: Any) -> Any:
    """SDK objects as plain data (pydantic `model_dump`, dropping unset fields); mappings and lists copied."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, Mapping):
        return dump(exclude_none=True)
    if isinstance(obj, Mapping):
        return {key: plain(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(value) for value in obj]
    return obj
