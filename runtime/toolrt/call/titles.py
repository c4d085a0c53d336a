"""The texts a call renders from its tool's templates: the title, and the confirm title and message."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..build.compiled import CompiledTool
from ..build.templates import render

__all__ = ["call_title", "render_optional"]


def call_title(tool: CompiledTool, args: Mapping[str, Any], root: Path) -> str | None:
    """The tool's `title:` template rendered over the arguments; None without one or when it fails."""
    if tool.title is None:
        return None
    try:
        return render(tool.title, args, tool.parameter_names, root)
    except Exception:  # a title must never fail a call
        return None


def render_optional(template: Any, tool: CompiledTool, args: Mapping[str, Any], root: Path) -> str | None:
    return None if template is None else render(template, args, tool.parameter_names, root)
