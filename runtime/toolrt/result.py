"""The result of one tool call, as the model and the host see it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["ToolResult"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """OpenCode's result shape. Failures are results too: `error` holds the model-facing text."""

    title: str
    output: str
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    attachments: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None
    structured: Mapping[str, Any] | None = None
    """The data a tool with an `output:` schema returned, validated against it (MCP `structuredContent`);
    `output` is its JSON text. None for every other tool."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        """The `toolrt call --json` shape: `{"title", "output", "metadata", "error"}` (+ attachments, and
        `structured` for a tool with an output schema)."""
        data: dict[str, Any] = {
            "title": self.title,
            "output": self.output,
            "metadata": dict(self.metadata),
            "error": self.error,
        }
        if self.attachments:
            data["attachments"] = [dict(a) for a in self.attachments]
        if self.structured is not None:
            data["structured"] = dict(self.structured)
        return data
