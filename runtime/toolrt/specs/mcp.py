"""MCP `tools/list` entries: plain JSON Schema with every `$ref` inlined and no `$defs` left.

Several MCP clients drop `$defs` or refuse references (Claude Desktop, VS Code, Bedrock
AgentCore), so references are inlined when serving; a recursive one is cut after a few levels.
Everything else passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core import Schema, map_children
from .model import CompiledSpec
from .rewriter import Rewriter

__all__ = ["compile_mcp"]

HINTS = {
    "read_only": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "open_world": "openWorldHint",
}
"""toolrt's annotation names → MCP's `ToolAnnotations` fields."""
_REFERENCE_KEYWORDS = frozenset({"$defs", "definitions", "$anchor", "$dynamicAnchor"})


class McpRewriter(Rewriter):
    """Inlines every reference; keeps every other keyword as declared."""

    label = "MCP"
    merge_all_of = False

    def boolean(self, value: bool, pointer: str) -> Any:
        return value

    def rewrite(self, schema: Schema, pointer: str, *, root: bool) -> Any:
        kept = {k: v for k, v in schema.items() if k not in _REFERENCE_KEYWORDS}
        if "$dynamicRef" in kept:
            self.warn("$dynamicRef", pointer, "MCP clients do not follow '$dynamicRef'; it was removed")
            del kept["$dynamicRef"]
        return map_children(kept, pointer, self.node)


def compile_mcp(
    *,
    name: str,
    description: str,
    parameters: Schema,
    title: str | None = None,
    annotations: Mapping[str, bool] | None = None,
    output: Schema | None = None,
) -> CompiledSpec:
    """The MCP tool entry of one tool (`outputSchema` from `output`, references inlined like the input's);
    `annotations` keys outside `HINTS` are ignored."""
    rewriter = McpRewriter(parameters, "mcp")
    spec: Schema = {"name": name}
    if title is not None:
        spec["title"] = title
    spec["description"] = description
    spec["inputSchema"] = rewriter.run()
    warnings = list(rewriter.warnings)
    if output is not None:
        output_rewriter = McpRewriter(output, "mcp")
        spec["outputSchema"] = output_rewriter.run()
        warnings.extend(output_rewriter.warnings)
    hints: dict[str, Any] = {} if title is None else {"title": title}
    hints.update({field: bool(annotations[key]) for key, field in HINTS.items() if annotations and key in annotations})
    spec["annotations"] = hints
    return CompiledSpec(spec, tuple(warnings))
