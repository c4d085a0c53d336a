"""Anthropic tool specs: plain JSON Schema, except that the root must be a plain object.

Anthropic refuses `oneOf`/`anyOf`/`allOf` at the top of `input_schema`; everything below the root
(references and definitions included) is accepted as declared.
"""

from __future__ import annotations

from .core import Schema, with_notes
from .lift import lift_root
from .model import CompiledSpec

__all__ = ["compile_anthropic"]


def compile_anthropic(*, name: str, description: str, parameters: Schema) -> CompiledSpec:
    """The Anthropic tool spec of one tool."""
    schema, notes, warnings = lift_root(parameters, format="anthropic", label="Anthropic")
    spec = {"name": name, "description": with_notes(description, notes) or "", "input_schema": schema}
    return CompiledSpec(spec, tuple(warnings))
