"""MCP `tools/list` entries: the input schema as written (`$defs`, `$ref`, `$anchor` kept, as
SEP-1613 and SEP-2106 require), or with every `$ref` inlined for the clients that need it.

Several MCP clients drop `$defs` or refuse references (Claude Desktop, VS Code, Bedrock AgentCore):
for them (`drops_defs`, by `clientInfo.name`, under `serve.inline_refs: auto`, or for every client
under `always`) the `mcp-inline` format inlines references and leaves no `$defs`; a recursive one is
cut after a few levels. Everything else passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core import Schema, map_children
from .model import CompiledSpec
from .refs import RefIndex, walk
from .rewriter import Rewriter

__all__ = ["DROPS_DEFS", "compile_mcp", "drops_defs"]

HINTS = {
    "read_only": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "open_world": "openWorldHint",
}
"""toolrt's annotation names → MCP's `ToolAnnotations` fields."""
DROPS_DEFS: tuple[str, ...] = ("claude-ai", "claude desktop", "visual studio code", "vscode", "bedrock")
"""Lowercased parts of the `clientInfo.name` of clients known to drop `$defs` or refuse `$ref`."""
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


def _servable_as_written(schema: Schema) -> bool:
    """Whether a client can use the schema as written: an object at the root (MCP wants `type: object`
    there, so a root `$ref` is inlined) and every reference local and resolvable (else the inlined form,
    which replaces and warns about what it cannot follow)."""
    if schema.get("type") != "object" or "$ref" in schema:
        return False
    index = RefIndex(schema)
    for node, _ in walk(schema, ""):
        if "$dynamicRef" in node or ("$ref" in node and index.resolve(node["$ref"]) is None):
            return False
    return True


def drops_defs(client_name: str | None) -> bool:
    """Whether a client, by its `clientInfo.name`, is one known to drop `$defs` (see `DROPS_DEFS`)."""
    lowered = (client_name or "").lower()
    return any(part in lowered for part in DROPS_DEFS)


def compile_mcp(
    *,
    name: str,
    description: str,
    parameters: Schema,
    title: str | None = None,
    annotations: Mapping[str, bool] | None = None,
    output: Schema | None = None,
    inline: bool = False,
) -> CompiledSpec:
    """The MCP tool entry of one tool, its schemas as written (`inline`: references inlined; the
    `outputSchema` comes from `output`); `annotations` keys outside `HINTS` are ignored."""
    target = "mcp-inline" if inline else "mcp"
    rewriter = McpRewriter(parameters, target)
    inline = inline or not _servable_as_written(parameters)
    spec: Schema = {"name": name}
    if title is not None:
        spec["title"] = title
    spec["description"] = description
    spec["inputSchema"] = rewriter.run() if inline else parameters
    warnings = list(rewriter.warnings) if inline else []
    if output is not None:
        if inline or not _servable_as_written(output):
            output_rewriter = McpRewriter(output, target)
            spec["outputSchema"] = output_rewriter.run()
            warnings.extend(output_rewriter.warnings)
        else:
            spec["outputSchema"] = output
    hints: dict[str, Any] = {} if title is None else {"title": title}
    hints.update({field: bool(annotations[key]) for key, field in HINTS.items() if annotations and key in annotations})
    spec["annotations"] = hints
    return CompiledSpec(spec, tuple(warnings))
