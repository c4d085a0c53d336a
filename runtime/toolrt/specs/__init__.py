"""Provider tool specs compiled from one declared JSON Schema (2020-12).

`compile_spec(format, ...)` turns a tool's name, description and parameter schema into the spec
one provider expects, and reports every rewrite that lost something as a `SpecWarning`. The
declared schema is never mutated; each call returns new JSON data the caller owns. Imports only
the standard library, so `toolrt specs` starts fast.

- `openai`: `{"type": "function", "function": {name, description, parameters, strict}}`, strict
  whenever the schema allows it (`openai.py`);
- `openai-responses`: `{"type": "function", name, description, parameters, strict}`, same rules;
- `anthropic`: `{name, description, input_schema}`, the root a plain object (`anthropic.py`);
- `gemini`: `{name, description, parameters?}` in Gemini's OpenAPI subset (`gemini.py`);
- `mcp`: `{name, title?, description, inputSchema, annotations}`, references inlined (`mcp.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from .anthropic import compile_anthropic
from .core import thaw
from .gemini import compile_gemini
from .mcp import HINTS, compile_mcp
from .model import CompiledSpec, SpecWarning
from .nulls import strip_strict_nulls
from .openai import compile_openai

__all__ = ["FORMATS", "SERVED_FORMATS", "CompiledSpec", "SpecWarning", "compile_spec", "strip_strict_nulls"]

FORMATS: tuple[str, ...] = ("openai", "openai-responses", "anthropic", "gemini", "mcp")
SERVED_FORMATS: tuple[str, ...] = (*FORMATS, "mcp-inline")
"""`FORMATS` and `mcp-inline` (MCP with every `$ref` inlined), which `toolrt serve` uses for clients
that drop `$defs`."""


def compile_spec(
    format: str,
    *,
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    title: str | None = None,
    annotations: Mapping[str, bool] | None = None,
    output: Mapping[str, Any] | None = None,
) -> CompiledSpec:
    """The spec of one tool in `format`, and the warnings for what the format could not take.

    `title`, `annotations` (`read_only`, `destructive`, `idempotent`, `open_world`) and `output` (the
    schema of the tool's structured result, as `outputSchema`) only appear in the `mcp` format.
    Root-level notes (keywords moved out of the root schema) are appended to the tool description.

    Raises:
        UsageError: `format` is not one of `FORMATS`, or `annotations` has an unknown key.
    """
    if format not in SERVED_FORMATS:
        raise UsageError(f"unknown spec format {format!r}; expected one of: {', '.join(FORMATS)}")
    unknown = sorted(set(annotations or ()) - set(HINTS))
    if unknown:
        raise UsageError(f"unknown tool annotation(s) {', '.join(unknown)}; expected any of: {', '.join(HINTS)}")
    schema = thaw(parameters)
    if format in ("openai", "openai-responses"):
        return compile_openai(format, name=name, description=description, parameters=schema)
    if format == "anthropic":
        return compile_anthropic(name=name, description=description, parameters=schema)
    if format == "gemini":
        return compile_gemini(name=name, description=description, parameters=schema)
    return compile_mcp(
        name=name,
        description=description,
        parameters=schema,
        title=title,
        annotations=annotations,
        output=thaw(output) if output is not None else None,
        inline=format == "mcp-inline",
    )
