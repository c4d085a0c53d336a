"""Helpers for tests that run a built-in tool's handler directly, without the dispatch pipeline."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall
from toolrt.errors import DeniedError
from toolrt.permissions.model import PermissionRequest

Handler = Callable[[Mapping[str, Any], ToolContext], Awaitable[Any]]


def make_ctx(
    root: Path,
    asked: list[PermissionRequest] | None = None,
    deny: str | None = None,
    *,
    tool: str = "tool",
    data_dir: Path | None = None,
) -> ToolContext:
    """A context rooted at `root` (its data directory `data_dir`, else `root/data`) whose `ask` records
    requests in `asked` and denies permission `deny` (which `permits` then refuses too)."""

    async def asker(requests: Sequence[PermissionRequest]) -> None:
        if asked is not None:
            asked.extend(requests)
        if any(request.permission == deny for request in requests):
            raise DeniedError(f"{deny} denied")

    def permits(permission: str, pattern: str) -> bool:
        return permission != deny

    return ToolContext(
        DetachedCall(tool_id=tool, root=root, data_dir=data_dir or root / "data", ask=asker, permits=permits)
    )


def call(handler: Handler, args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run a handler to completion (20 s at most) and return its result mapping."""

    async def main() -> dict[str, Any]:
        with anyio.fail_after(20):
            result: dict[str, Any] = await handler(args, ctx)
            return result

    return anyio.run(main)


REPO = Path(__file__).resolve().parent.parent


def load_definition(tool_id: str) -> dict[str, Any]:
    """The built-in `tools.d/<tool_id>.yaml`, parsed."""
    import yaml

    data: dict[str, Any] = yaml.safe_load((REPO / "tools.d" / f"{tool_id}.yaml").read_text(encoding="utf-8"))
    return data


def check_definition(tool_id: str, handler: Handler) -> dict[str, Any]:
    """Load a built-in tool's YAML, check its `python:` handler is `handler` and its examples pass (valid)
    or fail (invalid) its parameters schema; return the definition for further checks."""
    import importlib

    import jsonschema

    definition = load_definition(tool_id)
    module_name, function_name = definition["handler"]["python"].split(":")
    assert getattr(importlib.import_module(module_name), function_name) is handler
    for example in definition["examples"]["valid"]:
        jsonschema.validate(example, definition["parameters"])
    for example in definition["examples"]["invalid"]:
        try:
            jsonschema.validate(example, definition["parameters"])
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"invalid example {example!r} of {tool_id} passes its schema")
    return definition
