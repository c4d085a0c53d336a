"""The results of compiling one tool's declared schema for one provider."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CompiledSpec", "SpecWarning"]


@dataclass(frozen=True, slots=True)
class SpecWarning:
    """One lossy rewrite: what the provider could not take as declared, and what was done instead."""

    format: str
    """The target format, one of `toolrt.specs.FORMATS`."""
    keyword: str
    """The JSON Schema keyword concerned (`oneOf`, `additionalProperties`), or `strict` for the strict-mode fallback."""
    pointer: str
    """JSON pointer of the node in the declared schema, `""` for the root."""
    message: str
    """A sentence for a person reading `toolrt validate`."""

    def __str__(self) -> str:
        return f"{self.format}: {self.pointer or '/'}: {self.message}"


@dataclass(frozen=True, slots=True)
class CompiledSpec:
    """A provider's tool spec (plain JSON data, owned by the caller) and the rewrites it cost."""

    spec: dict[str, Any]
    warnings: tuple[SpecWarning, ...]
