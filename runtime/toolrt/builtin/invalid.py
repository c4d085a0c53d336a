"""The `invalid` tool: where dispatch's repair sends a call it cannot fix, so the model reads why (OpenCode §10)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..call.context import ToolContext

__all__ = ["invalid"]


async def invalid(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Report the repair error back to the model; never offered to it (`internal: true`)."""
    return {
        "title": "Invalid Tool",
        "output": f"The arguments provided to the tool are invalid: {args['error']}",
        "metadata": {},
    }
